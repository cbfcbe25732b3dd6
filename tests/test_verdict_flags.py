"""A verdict that carries its flags (issue 29 item 2), in process: real collectors' records and read
stamps merged by a real aggregator, judged by ``finalize`` (llmload/results/finish.py) as a run's end
judges them; the reports rendered from the same summary.json.

A target's ITL is flagged when more than 1% of its kernel-stamped reads brought several chunks
(llmload/measure/client_health.py): the records below say how many, as the stream client does.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from llmload.cli.report import report_main
from llmload.config.resolved import ResolvedRun
from llmload.config.scenario import parse_scenario
from llmload.measure.records import RequestRecord
from llmload.measure.runstate import Aggregator, Collector
from llmload.report.decision import FLAGGED, DecisionRow, render_rows, who_wins
from llmload.report.markdown import render_markdown
from llmload.results.finish import Observed, finalize
from llmload.results.run_outcome import RunOutcome
from llmload.schema.results_model import Summary
from tests.conftest import ROOT, TOLERANT_CLIENT

TARGETS = ["a", "b"]
REQUESTS = 40
SCENARIO = """\
name: flags
targets:
  - {name: a, kind: sim, sim: {profile: test-fast-a}}
  - {name: b, kind: sim, sim: {profile: test-fast-b}}
load: {users: 2, duration: 10s, warmup: 0s}
"""


def _run(
    slo: str = "",
    *,
    coalesced: dict[str, int] | None = None,
    late_first: dict[str, int] | None = None,
    targets: list[str] = TARGETS,
    unreported: dict[str, int] | None = None,
) -> Summary:
    """A finished run judged by finalize: REQUESTS ok requests per target, every read kernel-stamped
    and read on time, ``coalesced[t]`` of target t's 400 reads bringing several chunks; with
    ``late_first[t]``, target t read 2 ms late and that many first tokens came with later ones
    (its TTFT flagged)."""
    text = (
        SCENARIO
        if targets == TARGETS
        else SCENARIO.replace("  - {name: b, kind: sim, sim: {profile: test-fast-b}}\n", "")
    )
    sc = parse_scenario(text + slo)
    now = time.time()
    col, agg = Collector(targets), Aggregator(targets)
    for t in targets:
        col.stamps[t].source = "kernel"
        col.stamps[t].kernel_reads = REQUESTS * 10
        col.stamps[t].first_tokens = REQUESTS
        late = (late_first or {}).get(t, 0)
        for _ in range(REQUESTS * 10):
            col.stamps[t].delay.record(0.002 if late else 0.0001)
        col.stamps[t].coalesced_reads = (coalesced or {}).get(t, 0)
        col.stamps[t].coalesced_first_tokens = late
        for i in range(REQUESTS):
            col.started(t)
            speed = 1.0 if t == "a" else 2.0  # b is twice as slow, on every figure
            col.record(
                RequestRecord(
                    target=t,
                    index=i,
                    start_time=now + i * 0.1,
                    ttft_s=0.02 * speed * (1 + i % 5 / 10),
                    e2e_s=0.2 * speed,
                    itl_s=[0.01 * speed] * 10,
                    output_tokens=11,
                    output_tokens_source="usage",
                    chunks=11,
                )
            )
    lag = col.loop_lag
    lag.record(0.0005)
    agg.merge(col.drain())
    outcome = RunOutcome(started_at=now, run_t0=now, ended_at=now + REQUESTS * 0.1 + 1, plan_complete=True)
    outcome.stop_reason = "plan complete"
    outcome.unreported = unreported or {}
    run = ResolvedRun(scenario=sc, run_id="flags-1", results_dir=Path("unused"), mode="local")
    observed = Observed(cpu_samples=[20.0], telemetry=[], open_streams=None)
    summary, code = finalize(run, outcome, agg, observed, allow_worker_loss=False)
    assert summary.run.exit_code == code
    return summary


def test_an_slo_on_a_flagged_figure_is_inconclusive_never_ok() -> None:
    summary = _run("slo: {itl_p99_ms: 500, error_rate: 0.01}\n", coalesced={"a": 40})
    run = summary.run
    assert [(f.target, f.metric) for f in run.client.flags] == [("a", "itl")]
    assert run.status == "ok" and run.exit_code == 3
    v = run.verdict or ""
    assert v.startswith("inconclusive (exit 3): SLO on a flagged figure: itl_p99_ms on a ITL"), v
    assert "--workers N" in v and "quieter host" in v  # what to do
    assert v.endswith("judged against itl_p99_ms <= 500 ms, error_rate <= 0.01"), v  # the thresholds


def test_a_conclusive_miss_exits_1_and_still_names_the_flagged_one() -> None:
    summary = _run("slo: {itl_p99_ms: 500, e2e_p99_ms: 1}\n", coalesced={"a": 40})
    v = summary.run.verdict or ""
    assert summary.run.exit_code == 1 and v.startswith("SLO missed (exit 1): e2e_p99_ms 200 > 1 ms (a)"), v
    assert "SLO on a flagged figure: itl_p99_ms on a ITL" in v


def test_the_scenario_may_judge_flagged_figures_and_the_verdict_says_so() -> None:
    summary = _run("slo: {itl_p99_ms: 500, flagged_figures: judge}\n", coalesced={"a": 40})
    v = summary.run.verdict or ""
    assert summary.run.exit_code == 0 and v.startswith("ok (exit 0): judged on a flagged figure"), v
    assert (
        "(slo.flagged_figures: judge): itl_p99_ms on a ITL" in v
        and "judged against itl_p99_ms <= 500 ms" in v
    )


def test_a_flag_an_slo_does_not_rest_on_changes_no_code() -> None:
    # e2e and error_rate rest on no flagged measurement: judged as ever; the decision summary's
    # ITL still rests on it (two targets), and the verdict says so
    summary = _run("slo: {e2e_p99_ms: 1000, error_rate: 0.01}\n", coalesced={"a": 40})
    v = summary.run.verdict or ""
    assert summary.run.exit_code == 0 and v.startswith("ok (exit 0): flagged: a ITL (the decision summary"), v
    assert v.endswith("judged against e2e_p99_ms <= 1,000 ms, error_rate <= 0.01"), v


def test_a_flagged_figure_whose_error_could_not_have_decided_it_keeps_its_result() -> None:
    """A flagged TTFT is stamped late, never early: met though it reads high, it is met; missed, it
    is inconclusive. TPOT shrinks by the same lateness: missed though it reads low, it is missed."""
    met = _run("slo: {ttft_p99_ms: 500}\n", late_first={"a": 10})
    assert [(f.target, f.metric) for f in met.run.client.flags] == [("a", "ttft")]
    v = met.run.verdict or ""
    assert met.run.exit_code == 0 and "ttft_p99_ms met though a TTFT flagged (it can only read high)" in v, v
    missed = _run("slo: {ttft_p99_ms: 1}\n", late_first={"a": 10, "b": 10})
    assert missed.run.exit_code == 3, missed.run.verdict
    assert "SLO on a flagged figure: ttft_p99_ms on a TTFT (28 ms), b TTFT (56 ms)" in (
        missed.run.verdict or ""
    )
    one = _run("slo: {ttft_p99_ms: 1}\n", late_first={"a": 10})  # b's TTFT, not flagged, missed: known
    assert one.run.exit_code == 1 and (one.run.verdict or "").startswith(
        "SLO missed (exit 1): ttft_p99_ms 56 > 1 ms (b)"
    )
    tpot = _run("slo: {tpot_p50_ms: 1}\n", late_first={"a": 10, "b": 10})
    v = tpot.run.verdict or ""
    assert (
        tpot.run.exit_code == 1
        and "tpot_p50_ms missed though a TTFT, b TTFT flagged (it can only read low)" in v
    ), v
    tpot_met = _run("slo: {tpot_p50_ms: 500}\n", late_first={"a": 10})
    assert tpot_met.run.exit_code == 3 and "SLO on a flagged figure: tpot_p50_ms on a TTFT" in (
        tpot_met.run.verdict or ""
    )


def test_no_flag_no_slo_one_target() -> None:
    assert _run().run.verdict == "ok (exit 0): no SLO set"
    one = _run(targets=["a"], coalesced={"a": 40})  # one target: no decision summary, no SLO
    assert one.run.verdict == "ok (exit 0): no SLO set" and one.run.client.flags


def test_requests_never_reported_make_the_run_degraded_and_are_counted() -> None:
    summary = _run(unreported={"b": 7})
    assert summary.run.status == "degraded" and summary.run.exit_code == 3, summary.run.verdict
    assert any("7 request(s) sent and never reported" in r and "'b': 7" in r for r in summary.run.reasons)
    # the verdict names what degraded it (it said "0 worker(s) lost": bench_fleet, 1,000 workers)
    assert summary.run.verdict is not None and "worker(s) lost" not in summary.run.verdict
    assert summary.run.verdict.startswith("degraded: 7 request(s) sent and never reported"), (
        summary.run.verdict
    )


def test_a_sweeps_capacity_rests_on_what_its_slos_rest_on() -> None:
    from llmload.config.slo_spec import SloSpec
    from llmload.report.flagged import measures_of

    slo = SloSpec(ttft_p99_ms=100, e2e_p99_ms=100, min_capacity=4)
    assert measures_of("min_capacity", slo) == {"ttft"}
    assert measures_of("ttfo_p99_ms", slo) == {"ttft"} and measures_of("ttfo_p99_ms", slo, True) == {
        "ttft",
        "itl",
    }
    assert measures_of("tpot_p50_ms", slo) == {"ttft"} and measures_of("error_rate", slo) == set()


def test_a_flagged_decision_row_names_no_winner() -> None:
    row = DecisionRow("ITL p99", "ms", True, "a", 10.0, "b", 20.0, 5.0, 15.0, "paired by request")
    assert row.winner == "a"
    flagged = DecisionRow(**{**row.__dict__, "flagged": ("a ITL",)})
    assert flagged.winner is None
    _, cells = render_rows([row, flagged])
    assert cells[0][1] == "a" and cells[1][1] == FLAGGED
    assert cells[1][5] == "flagged: a ITL; paired by request" and cells[1][2].startswith("a ahead: ")
    assert who_wins([row, flagged]) == "a wins ITL p99 (2.00x); flagged, no winner: ITL p99 (a ITL)"


@pytest.mark.parametrize("judge", [False, True])
def test_the_reports_say_what_the_verdict_says(tmp_path: Path, judge: bool) -> None:
    """report.md, report.html and junit.xml from the summary finalize wrote: the verdict line, the
    SLO marked inconclusive (a JUnit error, never a pass), the ITL row flagged with no winner."""
    knob = ", flagged_figures: judge" if judge else ""
    summary = _run(f"slo: {{itl_p99_ms: 500{knob}}}\n", coalesced={"a": 40})
    d = _results_dir(tmp_path, summary)
    code = report_main([str(d)])
    assert code == summary.run.exit_code == (0 if judge else 3)
    md = (d / "report.md").read_text()
    assert f"Verdict: `{summary.run.verdict}`" in md
    itl_row = next(line for line in md.splitlines() if line.startswith("| ITL p99"))
    assert f"| {FLAGGED} |" in itl_row and "flagged: a ITL" in itl_row
    ttft_row = next(line for line in md.splitlines() if line.startswith("| TTFT p50"))
    assert "| a |" in ttft_row  # an unflagged figure still has its winner
    html = (d / "report.html").read_text()
    assert 'id="run-verdict"' in html and 'id="decision-flagged"' in html
    suite = ET.parse(d / "junit.xml").getroot().find("testsuite")
    assert suite is not None
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["verdict"] == summary.run.verdict and props["exit_code"] == str(summary.run.exit_code)
    case = next(
        c
        for c in suite.iter("testcase")
        if c.get("name", "").startswith("slo itl_p99_ms") and "a" == c.get("classname", "").rsplit(".", 1)[-1]
    )
    if judge:
        assert case.find("error") is None and case.find("failure") is None and suite.get("errors") == "0"
        assert "| a | itl_p99_ms | <= 500 ms |" in md and "| PASS |" in md
    else:
        err = case.find("error")
        assert err is not None and err.get("type") == "inconclusive" and suite.get("errors") == "1"
        assert "| INCONCLUSIVE |" in md and "**a**: INCONCLUSIVE" in md
        assert "INCONCLUSIVE" in html and 'id="slo-flagged"' in html


def _results_dir(tmp_path: Path, summary: Summary) -> Path:
    """summary.json as the run writes it, with requests.jsonl lines the decision summary reads."""
    d = tmp_path / "r"
    d.mkdir()
    (d / "summary.json").write_text(json.dumps(summary.dump(), default=str))
    lines = []
    for t in TARGETS:
        speed = 1.0 if t == "a" else 2.0
        for i in range(REQUESTS):
            rec = RequestRecord(
                target=t,
                index=i,
                start_time=summary.run.measure_start + i * 0.1,
                ttft_s=0.02 * speed * (1 + i % 5 / 10),
                e2e_s=0.2 * speed,
                itl_s=[0.01 * speed] * 10,
                output_tokens=11,
                output_tokens_source="usage",
                chunks=11,
            )
            lines.append(json.dumps(rec.to_json()))
    (d / "requests.jsonl").write_text("\n".join(lines) + "\n")
    return d


def test_markdown_of_an_unflagged_run_names_its_winner(tmp_path: Path) -> None:
    summary = _run("slo: {itl_p99_ms: 500}\n")
    md = render_markdown(_results_dir(tmp_path, summary))
    itl_row = next(line for line in md.splitlines() if line.startswith("| ITL p99"))
    assert "| a |" in itl_row and FLAGGED not in md


def _frames() -> str:
    """One response as the scripted server's raw frames: the role chunk, then five tokens in one write
    (one read brings them all: a coalesced read, every request), then the end."""

    def event(obj: object) -> str:
        return f"data: {json.dumps(obj)}\n\n"

    role = event({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})
    tokens = "".join(
        event({"choices": [{"index": 0, "delta": {"content": "x"}, "finish_reason": None}]}) for _ in range(5)
    )
    end = event({"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]})
    end += event({"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10}})
    return json.dumps([[2, role], [3, tokens], [1, end + "data: [DONE]\n\n"]])


@pytest.mark.integration
@pytest.mark.parametrize("reports", [True, False])
def test_a_run_with_flagged_itl_never_ends_ok_on_its_itl_slo(
    tmp_path: Path, sse_server: str, reports: bool
) -> None:
    """``llmload run``: two targets whose every stream comes in coalesced reads, an ITL SLO it could
    not judge: exit 3 with or without reports; the terminal ends with who wins, report.html and the
    verdict, which junit.xml and report.md repeat."""
    raw = f"{{llmload_test: {{mode: raw, frames: {_frames()}}}}}"
    scn = tmp_path / "flagged.yaml"
    scn.write_text(
        "name: flagged\n"
        f"{TOLERANT_CLIENT}\n"
        "targets:\n"
        + "".join(
            f"  - {{name: {t}, kind: openai, base_url: '{sse_server}', model: test-model, extra_body: {raw}}}\n"
            for t in ("x", "y")
        )
        + "load: {users: 2, max_requests: 12, warmup: 0s}\n"
        "slo: {itl_p99_ms: 10000, error_rate: 0.5}\n"
    )
    out = tmp_path / "r"
    extra = () if reports else ("--no-reports",)
    cmd = [sys.executable, "-m", "llmload", "run", str(scn), "--results", str(out), *extra]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=180, cwd=ROOT)
    summary = json.loads((out / "summary.json").read_text())
    run = summary["run"]
    assert {f["target"] for f in run["client"]["flags"] if f["metric"] == "itl"} == {"x", "y"}, run["client"]
    assert r.returncode == run["exit_code"] == 3, r.stdout[-3000:] + r.stderr[-3000:]
    assert run["status"] == "ok" and run["verdict"].startswith(
        "inconclusive (exit 3): SLO on a flagged figure"
    )
    assert "judged against itl_p99_ms <= 10,000 ms, error_rate <= 0.5" in run["verdict"]
    tail = r.stdout.strip().splitlines()
    assert tail[-1] == f"verdict: {run['verdict']}"
    if not reports:
        assert tail[-2].startswith("report: not written (--no-reports)")
        return
    assert tail[-2] == f"report: {out / 'report.html'}" and (out / "report.html").is_file()
    # (a busy host may flag TTFT too: then its rows are in the flagged list as well)
    assert tail[-3].startswith("who wins: ") and "flagged, no winner: " in tail[-3], tail[-3]
    assert "ITL p99 (per-request mean gap) (x ITL, y ITL)" in tail[-3], tail[-3]
    suite = ET.parse(out / "junit.xml").getroot().find("testsuite")
    assert suite is not None and suite.get("errors") == "2"  # itl_p99_ms of x and y: inconclusive
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["verdict"] == run["verdict"] and props["exit_code"] == "3"
    assert f"Verdict: `{run['verdict']}`" in (out / "report.md").read_text()
