"""The LLM tab's figures (llmload.locust.liveview.LiveView), fed by a real Collector -> Aggregator path.

No processes and no browser: records go through the same drain/merge the local runner and the
master use, and every expected figure is derived here from the records themselves.
"""

from __future__ import annotations

import csv
import io
import random
from pathlib import Path

from llmload.locust.livecharts import ChartSeries
from llmload.locust.liveview import COLUMNS, LiveView, display_rows, to_csv
from llmload.locust.webui import split_list_value
from llmload.measure.livewindow import WINDOW_S
from llmload.measure.records import FAILURE_CLASSES, RequestRecord
from llmload.measure.runstate import Aggregator, Collector
from llmload.report.results import load_run
from tests.oracles import nearest_rank
from tests.synth import SynthTarget, write_results_dir

NOW = 1_800_000_000.0
DELAY = 1.5


def make_records(
    rng: random.Random, target: str, n: int, end_lo: float, end_hi: float
) -> list[RequestRecord]:
    out = []
    for i in range(n):
        e2e = rng.uniform(0.2, 1.5)
        end = rng.uniform(end_lo, end_hi)
        status = "ok" if i % 7 else rng.choice(["http_5xx", "timeout", "stream_error"])
        ok = status == "ok"
        out.append(
            RequestRecord(
                target=target,
                status=status,
                index=i,
                start_time=end - e2e,
                ttft_s=rng.uniform(0.01, 0.3) if ok else None,
                e2e_s=e2e,
                itl_s=[0.02, 0.021] if ok else [],
                output_tokens=rng.randint(2, 64) if ok else 0,
            )
        )
    return out


def feed(
    targets: list[str], records: list[RequestRecord], reports: tuple[float, ...] = (NOW - 6.0, NOW - 2.0)
) -> tuple[Aggregator, LiveView]:
    """One worker's records in its second report, after a first (empty) one; each record's tokens
    streamed in between. Any further reports are empty."""
    col = Collector(targets, worker="w1")
    at = [reports[0]]
    agg = Aggregator(targets, clock=lambda: at[0])
    view = LiveView(targets, delivery_delay_s=DELAY, clock=lambda: NOW)
    agg.line_sinks.append(view.lines)
    agg.merge(col.drain())
    for r in records:
        col.started(r.target)
        col.streamed.add(col.streamed.request(r.target), r.output_tokens)
        if r.ttft_s is not None:
            col.first_token(r.target, r.ttft_s)
        col.record(r)
    for t in reports[1:]:
        at[0] = t
        agg.merge(col.drain())
    return agg, view


def test_rows_are_derived_from_the_merged_request_lines() -> None:
    rng = random.Random(7)
    hi = NOW - DELAY
    recent = make_records(rng, "a", 60, hi - WINDOW_S + 0.01, hi) + make_records(rng, "b", 25, hi - 5, hi)
    old = make_records(rng, "a", 15, hi - 40, hi - WINDOW_S - 1)  # ended before the window
    agg, view = feed(["a", "b"], recent + old)
    view.interval({"target": "a", "loop_lag_p99_ms": 1.5})
    rows = {r["target"]: r for r in view.rows(agg, now=NOW)}
    assert [r["target"] for r in view.rows(agg, now=NOW)] == ["a", "b"]
    for t in ("a", "b"):
        mine = [r for r in recent + old if r.target == t]
        in_win = [r for r in recent if r.target == t]
        ok = [r for r in in_win if r.ok]
        row = rows[t]
        assert row["requests"] == len(mine)  # run total, warm-up and old ones included
        fails: dict[str, int] = {}
        for r in mine:
            if not r.ok:
                fails[r.status] = fails.get(r.status, 0) + 1
        assert row["failures_by_class"] == fails and row["failures"] == sum(fails.values()) > 0
        first = min(r.start_time for r in recent + old)
        span = max(1.0, hi - max(hi - WINDOW_S, first))
        assert row["req_s"] == round(len(in_win) / span, 3)
        tpot = [round(r.tpot_s * 1000, 3) for r in ok if r.tpot_s is not None]
        assert row["tpot_p50_ms"] == nearest_rank(tpot, 50)
        # Output tok/s: every token streamed between the two reports, 4 s apart (livewindow.py).
        assert row["output_tok_s"] == round(sum(r.output_tokens for r in mine) / 4.0, 1)
        # TTFT and ITL: every request the last report brought (its window), ended recently or not.
        mine_ok = [r for r in mine if r.ok]
        ttft = [round(r.ttft_s * 1000, 3) for r in mine_ok if r.ttft_s is not None]
        assert row["ttft_p50_ms"] == nearest_rank(ttft, 50) and row["ttft_p99_ms"] == nearest_rank(ttft, 99)
        assert row["itl_p99_ms"] == 21.0 and row["itl_p50_ms"] == 20.0
    assert rows["a"]["loop_lag_p99_ms"] == 1.5 and rows["b"]["loop_lag_p99_ms"] is None


def test_rates_in_the_first_seconds_use_the_time_elapsed() -> None:
    rng = random.Random(3)
    hi = NOW - DELAY
    recs = make_records(rng, "a", 20, hi - 2.0, hi)  # the run started ~3.5 s ago
    agg, view = feed(["a"], recs)
    first = min(r.start_time for r in recs)
    (row,) = view.rows(agg, now=NOW)
    assert row["req_s"] == round(20 / max(1.0, hi - first), 3)
    assert row["req_s"] > 20 / WINDOW_S  # not diluted over the full window


def test_nothing_recent_means_no_rates_but_totals_stay() -> None:
    rng = random.Random(5)
    recs = make_records(rng, "a", 10, NOW - 50, NOW - 30)
    agg, view = feed(["a"], recs, reports=(NOW - 34.0, NOW - 30.0, NOW - 20.0, NOW - 10.0, NOW - 1.0))
    (row,) = view.rows(agg, now=NOW)
    assert row["requests"] == 10 and row["req_s"] == 0 and row["output_tok_s"] == 0
    assert row["tpot_p50_ms"] is None
    # TTFT and ITL keep the last values measured: no request has ended since to replace them.
    ttft = [round(r.ttft_s * 1000, 3) for r in recs if r.ok and r.ttft_s is not None]
    assert row["ttft_p50_ms"] == nearest_rank(ttft, 50) and row["itl_p99_ms"] == 21.0


def test_a_finished_run_shows_the_summary_figures(tmp_path: Path) -> None:
    d = write_results_dir(
        tmp_path / "run", [SynthTarget("a", failures={"timeout": 2, "aborted": 3})], requests_per_target=12
    )
    summary = load_run(d).summary
    block = summary.targets["a"]
    agg, view = feed(["a", "b"], [])
    view.finish(summary)
    (row,) = view.rows(agg)  # b never ran: no row from the summary
    assert row["requests"] == 12 and row["failures_by_class"] == {"timeout": 2} and row["failures"] == 2
    assert row["cut"] == 3 == block.requests.by_class["aborted"]  # cut by Stop: no failure
    lat = block.latency_ms
    assert (row["ttft_p50_ms"], row["ttft_p99_ms"], row["itl_p99_ms"], row["tpot_p50_ms"]) == (
        lat["ttft"].p50,
        lat["ttft"].p99,
        lat["itl"].p99,
        lat["tpot"].p50,
    )
    assert (row["req_s"], row["output_tok_s"], row["loop_lag_p99_ms"]) == (
        block.throughput.req_s,
        block.throughput.output_tok_s,
        summary.run.client.loop_lag_ms.p99,
    )
    assert row["users"] == 0 and row["in_flight"] == 0


def test_csv_and_display_rows() -> None:
    rng = random.Random(11)
    recs = make_records(rng, "a", 30, NOW - 8, NOW - DELAY)
    agg, view = feed(["a", "b"], recs)
    rows = view.rows(agg, now=NOW)
    parsed = list(csv.DictReader(io.StringIO(to_csv(rows))))
    assert [p["target"] for p in parsed] == ["a", "b"]
    assert set(parsed[0]) == {k for k, _ in COLUMNS if k != "failures_by_class"} | {
        f"failures_{c}" for c in FAILURE_CLASSES if c != "aborted"
    }
    for c in FAILURE_CLASSES:
        if c == "aborted":  # a cut stream is no failure: the "cut" column (test below)
            continue
        assert int(parsed[0][f"failures_{c}"]) == sum(1 for r in recs if r.status == c)
    assert float(parsed[0]["ttft_p99_ms"]) == rows[0]["ttft_p99_ms"]
    assert parsed[1]["ttft_p50_ms"] == "" and parsed[1]["requests"] == "0"
    shown = display_rows(rows)
    assert shown[0]["name"] == "a" and shown[1]["ttft_p50_ms"] == ""
    fails = rows[0]["failures_by_class"]
    assert shown[0]["failures_by_class"] == ", ".join(f"{c} {n}" for c, n in fails.items()) != ""


def test_list_options_from_the_form() -> None:
    assert split_list_value("load.users=4, workload.output_tokens=[1,2],x-y=a,b") == [
        "load.users=4",
        "workload.output_tokens=[1,2]",
        "x-y=a,b",
    ]
    assert split_list_value("") == [] and split_list_value(" a , b ") == ["a", "b"]


def test_chart_series_are_bounded_and_read_kv_cache_usage_from_telemetry(tmp_path: Path) -> None:
    telemetry = tmp_path / "telemetry.jsonl"
    agg, _ = feed(["a", "b"], make_records(random.Random(2), "a", 12, NOW - 8, NOW - 3))
    charts = ChartSeries(agg, ["a", "b"], telemetry, max_points=3)
    row = {"target": "a", "output_tok_s": 100.0, "in_flight": 4}
    charts.interval({**row, "t": NOW - 4})  # no telemetry file yet: no KV point
    line = '{"t": 1, "target": "a", "source": "engine", "metric": "kv_cache_usage_ratio", "value": 0.25}\n'
    gpu = '{"t": 1, "target": "a", "source": "gpu", "metric": "kv_cache_usage_ratio", "value": 0.9}\n'
    telemetry.write_text(line + gpu + line.replace("0.25", "0.5")[:-9])  # the last line is half-written
    for k in range(4):
        charts.interval({**row, "t": NOW - 3 + k})
        if k == 1:
            with telemetry.open("a") as f:
                f.write(line.replace("0.25", "0.5")[-9:])  # ... and now complete
    data = charts.to_json()
    a = data["targets"]["a"]
    assert a["t"] == [NOW - 2, NOW - 1, NOW]  # the last max_points only
    assert a["kv_cache_usage_pct"] == [25.0, 50.0, 50.0]  # engine samples only, complete lines only
    assert a["output_tok_s"] == [100.0] * 3 and a["in_flight"] == [4] * 3
    assert a["ttft_p50_ms"][-1] == agg.live.latency("a")["ttft_p50_ms"] is not None
    assert data["targets"]["b"]["t"] == [] and set(data["fields"]) <= set(a)


def test_streams_cut_by_stop_are_counted_apart_from_failures() -> None:
    """A stream llmload cut (status aborted: Stop, a signal, stop_grace) is in "Cut by Stop", not in
    Failures, live as in the final rows; the CSV has its column and no failures_aborted."""
    rng = random.Random(5)
    recs = make_records(rng, "a", 14, NOW - 8, NOW - DELAY)
    for r in recs[:3]:
        r.status, r.ttft_s, r.itl_s = "aborted", None, []
    agg, view = feed(["a"], recs)
    (row,) = view.rows(agg, now=NOW)
    real = [r for r in recs if r.status not in ("ok", "aborted")]
    assert row["cut"] == 3 and "aborted" not in row["failures_by_class"]
    assert row["failures"] == len(real) == sum(row["failures_by_class"].values())
    (line,) = csv.DictReader(io.StringIO(to_csv([row])))
    assert line["cut"] == "3" and "failures_aborted" not in line
    assert [t for k, t in COLUMNS if k == "cut"] == ["Cut by Stop"]
