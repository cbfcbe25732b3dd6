"""Terminal output: one live progress line per interval, and the final per-target table (a target
that ran on llmload's simulator marked ``*``, and named with its profile under the table)."""

from __future__ import annotations

import sys
from typing import Any, TextIO

from pydantic import ValidationError

from llmload.config.scenario import Client
from llmload.config.simulated import banner, simulated_in
from llmload.measure.client_health import LATE_READ_MS
from llmload.schema.results_model import InfluxCounts, RunBlock, Summary
from llmload.sinks.answers import ANSWER_HEADERS, SESSION_HEADERS, answer_rows, session_rows


def _f(v: Any, nd: int = 1) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:,.{nd}f}"
    return f"{v:,}" if isinstance(v, int) else str(v)


def progress_line(elapsed: float, rows: dict[str, dict[str, Any]]) -> str:
    parts = [f"[{elapsed:6.1f}s]"]
    for name, r in rows.items():
        parts.append(
            f"{name}: {r['requests_total']} req, {r['in_flight']} in flight, "
            f"{_f(r['output_tok_s'], 0)} tok/s, TTFT p50 {_f(r['ttft_p50_ms'])} ms"
        )
    return "  ".join(parts)


COLUMNS = [
    ("target", None),
    ("requests", None),
    ("failed", None),
    ("TTFT p50", "ms"),
    ("TTFT p99", "ms"),
    ("ITL p50", "ms"),
    ("ITL p99", "ms"),
    ("TPOT p50", "ms"),
    ("E2E p99", "ms"),
    ("out tok/s", None),
    ("req/s", None),
]


def summary_rows(summary: Summary) -> list[list[str]]:
    rows = []
    for name, t in summary.targets.items():
        lat = t.latency_ms
        fails = {k: v for k, v in t.requests.by_class.items() if k != "ok" and v}
        failed = str(t.requests.failed)
        if fails:
            failed += " (" + ", ".join(f"{k} {v}" for k, v in sorted(fails.items())) + ")"
        rows.append(
            [
                name,
                str(t.requests.sent),
                failed,
                _f(lat["ttft"].p50),
                _f(lat["ttft"].p99),
                _f(lat["itl"].p50, 2),
                _f(lat["itl"].p99, 2),
                _f(lat["tpot"].p50, 2),
                _f(lat["e2e"].p99, 0),
                _f(t.throughput.output_tok_s, 0),
                _f(t.throughput.req_s, 2),
            ]
        )
    return rows


REASONING_COLUMNS = [
    ("reasoning", None),
    ("TTFO p50", "ms"),
    ("TTFO p99", "ms"),
    ("reasoning tok", None),
    ("answer tok", None),
    ("no answer", None),
    ("ITL reasoning p50", "ms"),
    ("ITL answer p50", "ms"),
]


def reasoning_rows(summary: Summary) -> list[list[str]]:
    """Reasoning models' figures (docs/metrics.md), one row per target that streamed reasoning."""
    rows = []
    for name, t in summary.targets.items():
        r = t.tokens.reasoning
        if r is None:
            continue
        lat = t.latency_ms
        ttfo, itl_r, itl_a = lat.get("ttfo"), lat.get("itl_reasoning"), lat.get("itl_answer")
        approx = "~" if r.reasoning_approx else ""
        rows.append(
            [
                name,
                _f(ttfo.p50 if ttfo else None),
                _f(ttfo.p99 if ttfo else None),
                approx + _f(r.reasoning),
                approx + _f(r.answer),
                str(t.requests.by_class.get("no_answer", 0)),
                _f(itl_r.p50 if itl_r else None, 2),
                _f(itl_a.p50 if itl_a else None, 2),
            ]
        )
    return rows


def _table(columns: list[tuple[str, str | None]], rows: list[list[str]]) -> list[str]:
    head = [c if u is None else f"{c} ({u})" for c, u in columns]
    widths = [max(len(head[i]), *(len(r[i]) for r in rows)) for i in range(len(head))]
    fmt = ["<"] + [">"] * (len(head) - 1)
    lines = ["  ".join(f"{h:{a}{w}}" for h, a, w in zip(head, fmt, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    for r in rows:
        lines.append("  ".join(f"{c:{a}{w}}" for c, a, w in zip(r, fmt, widths, strict=True)))
    return lines


SIMULATED_MARK = "*"


def render_table(summary: Summary) -> str:
    sims = simulated_in(summary)

    def marked(rows: list[list[str]]) -> list[list[str]]:
        return [[r[0] + SIMULATED_MARK if r[0] in sims else r[0], *r[1:]] for r in rows]

    rows = summary_rows(summary)
    columns = COLUMNS
    if any(t.goodput_req_s is not None for t in summary.targets.values()):  # per-request SLOs set
        columns = [*COLUMNS, ("goodput", "req/s")]
        rows = [[*r, _f(t.goodput_req_s, 2)] for r, t in zip(rows, summary.targets.values(), strict=True)]
    lines = _table(columns, marked(rows))
    reasoning = reasoning_rows(summary)
    if reasoning:  # only a run that had reasoning: a classic run's table is as it was
        lines += ["", *_table(REASONING_COLUMNS, marked(reasoning))]
    answers = answer_rows(summary.targets)
    if answers:  # only a run whose answers were checked (JSON, tool calls)
        lines += ["", *_table([(h, None) for h in ANSWER_HEADERS], marked(answers))]
    sessions = session_rows(summary.targets)
    if sessions:  # agent loops
        lines += ["", *_table([(h, None) for h in SESSION_HEADERS], marked(sessions))]
    simulated = banner(sims, summary.targets)
    if simulated:  # a demo's figures must not read as real engines (config/simulated.py)
        lines.append(f"{SIMULATED_MARK} {simulated}")
    run = summary.run
    foot, advice = client_health_line(run)
    lines.append(f"run {run.run_id}: status {run.status}, {run.duration_s:.1f} s, {foot}")
    if advice:
        lines.append(f"  ! {advice}")
    for reason in run.reasons:
        lines.append(f"  ! {reason}")
    for note in run.client.notes:
        lines.append(f"  . {note}")
    for flag in run.client.flags:
        lines.append(f"  ! {flag.target} {flag.metric.upper()} flagged: {flag.why}")
    influx = InfluxCounts.of(run)
    if influx is not None:
        lines.append(f"  . {influx.line()}")
    return "\n".join(lines)


def client_health_line(run: RunBlock) -> tuple[str, str | None]:
    """The client's own figures, each with the limit it is judged against, and what to do when one
    passes it (None when none does). Loop lag and CPU: the scenario's ``client`` limits; client delay
    (kernel stamps): the delay above which a read counts as late (llmload/measure/client_health.py)."""
    try:
        limits = Client.model_validate(run.scenario.get("client") or {})
    except ValidationError:  # an older summary.json: the defaults
        limits = Client()
    lag, cpu = run.client.loop_lag_ms.p99, run.client.cpu_percent.max
    lag_limit, cpu_limit = limits.loop_lag_threshold_ms, limits.cpu_threshold_percent
    parts = [
        f"client loop lag p99 {_f(lag, 2)} ms (limit {lag_limit:g} ms)",
        f"CPU max {_f(cpu, 0)}% (limit {cpu_limit:g}%)",
    ]
    above = []
    if lag is not None and lag > lag_limit:
        above.append(f"loop lag p99 {lag:.2f} ms > {lag_limit:g} ms")
    if cpu is not None and cpu > cpu_limit:
        above.append(f"CPU {cpu:.0f}% > {cpu_limit:g}%")
    delays = [ts.client_delay_ms.p99 for ts in run.client.timestamps.values() if ts.source == "kernel"]
    delay = max((d for d in delays if d is not None), default=None)
    if delay is not None:
        parts.append(f"client delay p99 {_f(delay, 2)} ms (kernel stamps, limit {LATE_READ_MS:g} ms)")
        if delay > LATE_READ_MS:
            above.append(f"client delay p99 {delay:.2f} ms > {LATE_READ_MS:g} ms")
    if not above:
        return ", ".join(parts), None
    advice = (
        f"the client was busy ({'; '.join(above)}): its late reads can blur TTFT and ITL; "
        "add load processes (llmload run --workers N) or run on a quieter host"
    )
    return ", ".join(parts), advice


def print_table(summary: Summary, out: TextIO = sys.stdout) -> None:
    out.write(render_table(summary) + "\n")
    out.flush()
