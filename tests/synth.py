"""Write a synthetic results directory exactly per docs/results.md (summary.json through results_model).

For tests, benchmarks and documentation examples of the report layer: requests come from
known latency distributions (log-normal around a given median), go through the real
:class:`~llmload.measure.records.RequestRecord` and its ``to_json``, and summary.json, timeseries.jsonl,
events.jsonl and (optionally) telemetry.jsonl are derived from those records. Telemetry here is
made up: there is no GPU on a test machine.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_args

import orjson

from llmload.measure.records import FAILURE_CLASSES, RequestRecord
from llmload.report.results import SCHEMA
from llmload.report.stats import summarise
from llmload.schema.results_model import (
    HistogramSnapshot,
    Latency,
    Level,
    LevelRequests,
    LevelTarget,
    Requests,
    RunBlock,
    Status,
    Summary,
    TargetBlock,
    TelemetryRow,
    Throughput,
    TimeseriesRow,
    Tokens,
)

T0 = 1_764_676_800.0  # 2025-12-02T12:00:00Z, a fixed epoch so generated runs are reproducible


@dataclass
class SynthTarget:
    """How one synthetic target behaves."""

    name: str
    ttft_ms: float = 80.0  # median time to first token
    itl_ms: float = 20.0  # median gap between tokens
    output_tokens: int = 32
    sigma: float = 0.25  # log-normal spread of TTFT and of each gap
    failures: dict[str, int] = field(default_factory=dict)  # failure class -> how many requests fail
    users: int = 4
    kind: str = "sim"
    labels: dict[str, str] = field(default_factory=dict)
    cost_per_hour: float | None = None
    gpus: int = 1
    ttft_scale: float = 1.0  # multiplies every TTFT after drawing (a shift that keeps the random draws)
    seed: int | None = None  # its own draw stream (default: from the run's seed and its position)
    # recorded in run.scenario.targets (kind, sim, labels), as a real run records its scenario; None: not recorded
    recorded: dict[str, Any] | None = None


@dataclass
class SynthLevel:
    """One sweep level: its label, value and how much it slows each target down."""

    level: str
    value: float
    users: int
    slowdown: float = 1.0
    open_streams: int | None = None  # the most streams open at once (default: all its users)


def _records(
    t: SynthTarget,
    n: int,
    rng: random.Random,
    start: float,
    *,
    users: int,
    slowdown: float,
    index0: int,
    phase: str,
    level: str,
) -> list[RequestRecord]:
    fails: list[str] = []
    for cls, k in t.failures.items():
        if cls not in FAILURE_CLASSES:
            raise ValueError(f"unknown failure class {cls!r}")
        fails.extend([cls] * k)
    fail_at = {index0 + (i * 7919) % n: cls for i, cls in enumerate(fails)}  # spread over the run
    clock = [start + 0.013 * u for u in range(users)]
    out: list[RequestRecord] = []
    for i in range(n):
        idx = index0 + i
        u = i % users
        ttft = t.ttft_ms / 1000.0 * rng.lognormvariate(0.0, t.sigma) * slowdown
        gaps = [
            t.itl_ms / 1000.0 * rng.lognormvariate(0.0, t.sigma) * slowdown
            for _ in range(t.output_tokens - 1)
        ]
        ttft *= t.ttft_scale
        rec = RequestRecord(
            target=t.name,
            index=idx,
            phase=phase,
            level=level,
            start_time=clock[u],
            prompt_tokens=100,
            http_status=200,
        )
        failed = fail_at.get(idx)
        if failed is None:
            rec.ttft_s = ttft
            rec.itl_s = gaps
            rec.e2e_s = ttft + sum(gaps)
            rec.output_tokens = t.output_tokens
            rec.chunks = t.output_tokens
            rec.finish_reason = "length"
        else:
            rec.status = failed
            rec.e2e_s = ttft / 2
            rec.http_status = {"http_5xx": 503, "http_4xx": 400, "http_429": 429}.get(failed, 200)
            rec.error = f"synthetic {failed}"
        clock[u] += (rec.e2e_s or 0.0) + 0.001
        out.append(rec)
    return out


def _figures(
    recs: list[RequestRecord], window: tuple[float, float]
) -> tuple[LevelRequests, Tokens, dict[str, Latency], Throughput, dict[str, list[float]]]:
    by_class: dict[Status, int] = dict.fromkeys(get_args(Status), 0)
    for r in recs:
        by_class[r.status] += 1  # type: ignore[index]  # a RequestRecord's status is a Status
    ok = [r for r in recs if r.ok]
    gaps = [g for r in ok for g in r.itl_s]
    series = {
        "ttft": [r.ttft_s for r in ok if r.ttft_s is not None],
        "itl": gaps,
        "itl_per_token": [],
        "tpot": [r.tpot_s for r in ok if r.tpot_s is not None],
        "e2e": [r.e2e_s for r in ok if r.e2e_s is not None],
    }
    window_s = window[1] - window[0]
    out_tok = sum(r.output_tokens for r in recs)
    requests = LevelRequests(sent=len(recs), ok=len(ok), failed=len(recs) - len(ok), by_class=by_class)
    tokens = Tokens(
        prompt=sum(r.prompt_tokens or 0 for r in recs),
        prompt_client=sum(r.prompt_tokens_client for r in recs),
        output=out_tok,
        output_approx=False,
    )
    lat = {
        m: Latency.model_validate(summarise(round(v * 1000.0, 3) for v in vals)) for m, vals in series.items()
    }
    throughput = Throughput(
        output_tok_s=round(out_tok / window_s, 3),
        req_s=round(len(recs) / window_s, 3),
        window_s=round(window_s, 3),
        window_tokens=out_tok,
        window_requests=float(len(recs)),  # as req_s counts them here
        levels=1,
    )
    return requests, tokens, lat, throughput, series


def _target_block(
    t: SynthTarget, recs: list[RequestRecord], window: tuple[float, float], with_histograms: bool
) -> TargetBlock:
    req, tokens, lat, throughput, series = _figures(recs, window)
    block = TargetBlock(
        kind=t.kind,
        model="synthetic-model",
        base_url="http://127.0.0.1:9",
        labels={**t.labels, "gpus": str(t.gpus)},
        cost_per_hour=t.cost_per_hour,
        requests=Requests(
            **req.model_dump(), in_window=len(recs), warmup=0, dropped=0, delayed=0, backoffs=0, backoff_s=0.0
        ),
        tokens=tokens,
        latency_ms=lat,
        throughput=throughput,
    )
    if with_histograms:
        for m, vals in series.items():
            counts: dict[int, int] = {}
            for v in vals:
                us = int(v * 1e6 + 0.5)
                counts[us] = counts.get(us, 0) + 1
            keys = sorted(counts)
            block.histograms[m] = HistogramSnapshot(unit="us", keys=keys, counts=[counts[k] for k in keys])
    return block


def _level_block(recs: list[RequestRecord], window: tuple[float, float]) -> LevelTarget:
    req, tokens, lat, throughput, _ = _figures(recs, window)
    return LevelTarget(requests=req, tokens=tokens, latency_ms=lat, throughput=throughput)


def _timeseries(
    targets: list[SynthTarget],
    recs: dict[str, list[RequestRecord]],
    window: tuple[float, float],
    interval_s: float,
    unreliable: bool,
) -> list[dict[str, Any]]:
    lines: list[dict[str, Any]] = []
    n_int = max(1, int((window[1] - window[0]) / interval_s + 0.999))
    for k in range(n_int):
        a = window[0] + k * interval_s
        b = a + interval_s
        for t in targets:
            rs = recs[t.name]
            if a >= max(r.start_time + (r.e2e_s or 0) for r in rs):
                continue  # this target has finished
            done = [r for r in rs if a <= r.start_time + (r.e2e_s or 0) < b]
            ttfts = sorted(r.ttft_s * 1000 for r in done if r.ttft_s is not None)
            itls = sorted(g * 1000 for r in done for g in r.itl_s)
            out_tok = sum(r.output_tokens for r in done)
            s_ttft, s_itl = summarise(ttfts), summarise(itls)
            lag = 40.0 if unreliable else 0.4 + 0.1 * (k % 3)
            row = TimeseriesRow(
                t=round(b, 3),
                target=t.name,
                interval_s=interval_s,
                requests=len(done),
                failures=sum(1 for r in done if not r.ok),
                output_tokens=out_tok,
                streamed_tokens=out_tok,  # synthetic: as if each request's tokens came in its last interval
                output_tok_s=round(out_tok / interval_s, 3),
                req_s=round(len(done) / interval_s, 3),
                in_flight=sum(1 for r in rs if r.start_time <= b < r.start_time + (r.e2e_s or 0)),
                users=t.users,
                ttft_p50_ms=s_ttft["p50"],
                ttft_p99_ms=s_ttft["p99"],
                itl_p50_ms=s_itl["p50"],
                itl_p99_ms=s_itl["p99"],
                loop_lag_p99_ms=lag,
                cpu_percent=95.0 if unreliable else 30.0 + 5 * (k % 4),
            )
            lines.append(row.model_dump())
    return lines


def _telemetry(targets: list[SynthTarget], ts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    energy: dict[tuple[str, int], float] = {}
    for line in ts:
        t = next(x for x in targets if x.name == line["target"])
        kv = round(min(1.0, line["in_flight"] / (t.users * 1.5)), 4)
        for metric, value in (("kv_cache_usage_ratio", kv), ("requests_running", float(line["in_flight"]))):
            row = TelemetryRow(t=line["t"], target=t.name, source="engine", metric=metric, value=value)
            out.append(row.model_dump(exclude_none=True))
        for g in range(t.gpus):
            power = 250.0 + 20.0 * line["in_flight"] + 0.5 * line["output_tok_s"]
            e = energy[(t.name, g)] = energy.get((t.name, g), 1.0e6) + power * line["interval_s"]
            for metric, value in (
                ("memory_used_bytes", 70.0 * 2**30),
                ("memory_total_bytes", 80.0 * 2**30),
                ("power_watts", power),
                ("energy_joules", e),
            ):
                row = TelemetryRow(
                    t=line["t"], target=t.name, source="gpu", metric=metric, value=value, gpu=str(g)
                )
                out.append(row.model_dump())
    return out


def _span(recs: list[RequestRecord]) -> tuple[float, float]:
    return min(r.start_time for r in recs), max(r.start_time + (r.e2e_s or 0) for r in recs)


def _dump_jsonl(path: Path, lines: list[dict[str, Any]]) -> None:
    path.write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines))


def write_results_dir(
    path: Path,
    targets: list[SynthTarget],
    *,
    requests_per_target: int = 200,
    seed: int = 0,
    slo: dict[str, float] | None = None,
    status: str = "ok",
    reasons: list[str] | None = None,
    unreliable: bool = False,
    levels: list[SynthLevel] | None = None,
    telemetry: bool = False,
    histograms: bool = True,
    interval_s: float = 2.0,
    run_id: str | None = None,
    cost: dict[str, float] | None = None,
) -> Path:
    """Write summary.json, requests.jsonl, timeseries.jsonl, events.jsonl (+ telemetry.jsonl) into ``path``.

    Each target draws from its own seeded stream, so changing one target (or ``ttft_scale``)
    leaves the others' draws unchanged; the same index means the same workload item for every target.
    Two targets given the same ``seed`` (and settings) draw the same requests. ``cost`` is the
    scenario's ``cost:`` mapping.
    """
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    plan = levels or [SynthLevel("main", 0.0, 0)]
    recs: dict[str, list[RequestRecord]] = {}
    per_level: dict[str, list[list[RequestRecord]]] = {}
    for ti, t in enumerate(targets):
        rng = random.Random(seed * 1000 + ti if t.seed is None else t.seed)
        start = T0
        recs[t.name] = []
        per_level[t.name] = []
        for li, lv in enumerate(plan):
            users = lv.users or t.users
            chunk = _records(
                t,
                requests_per_target,
                rng,
                start,
                users=users,
                slowdown=lv.slowdown,
                index0=li * requests_per_target,
                phase="sweep" if levels else "main",
                level=lv.level,
            )
            per_level[t.name].append(chunk)
            recs[t.name].extend(chunk)
            start = max(r.start_time + (r.e2e_s or 0) for r in chunk) + 0.01
    all_recs = [r for rs in recs.values() for r in rs]
    window = (T0, max(r.start_time + (r.e2e_s or 0) for r in all_recs))
    run = RunBlock.model_validate(
        {
            "run_id": run_id or f"synthetic-{seed}",
            "scenario_name": "synthetic",
            "scenario_file": "scenarios/synthetic.yaml",
            "scenario": {
                "name": "synthetic",
                "cost": cost,
                "targets": [{"name": t.name, **t.recorded} for t in targets if t.recorded is not None],
            },
            "started_at": "2025-12-02T12:00:00.000Z",
            "ended_at": "2025-12-02T12:01:00.000Z",
            "duration_s": round(window[1] - window[0], 3),
            "measure_start": window[0],
            "measure_end": window[1],
            "versions": {"llmload": "0.1.0", "locust": "2.47.0", "python": "3.11.7"},
            "mode": "local",
            "workers": ["local"],
            "status": status,
            "reasons": list(reasons or []),
            "client": {
                "loop_lag_ms": {"p50": 0.3, "p99": 40.0 if unreliable else 0.6, "max": 50.0, "count": 100},
                "cpu_percent": {"mean": 90.0 if unreliable else 35.0, "max": 99.0 if unreliable else 45.0},
                "unreliable": unreliable,
            },
            "slo": slo,
        }
    )
    summary = Summary(
        schema=SCHEMA,
        run=run,
        targets={t.name: _target_block(t, recs[t.name], _span(recs[t.name]), histograms) for t in targets},
    )
    if levels:
        summary.levels = [
            Level(
                phase="sweep",
                level=lv.level,
                value=lv.value,
                targets={
                    t.name: _level_block(per_level[t.name][li], _span(per_level[t.name][li])).model_copy(
                        update={
                            "users": lv.users,
                            "max_open": lv.users if lv.open_streams is None else lv.open_streams,
                        }
                    )
                    for t in targets
                },
            )
            for li, lv in enumerate(levels)
        ]
    (path / "summary.json").write_bytes(orjson.dumps(summary.dump(), option=orjson.OPT_INDENT_2))
    _dump_jsonl(path / "requests.jsonl", [r.to_json() for r in sorted(all_recs, key=lambda r: r.start_time)])
    ts = _timeseries(targets, recs, window, interval_s, unreliable)
    _dump_jsonl(path / "timeseries.jsonl", ts)
    _dump_jsonl(
        path / "events.jsonl",
        [
            {"t": window[0], "kind": "start", "text": "run started"},
            {"t": window[1], "kind": "stop", "text": "run stopped"},
        ],
    )
    if telemetry:
        _dump_jsonl(path / "telemetry.jsonl", _telemetry(targets, ts))
    return path
