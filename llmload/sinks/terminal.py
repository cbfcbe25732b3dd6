"""Terminal output: one live progress line per interval, and the final per-target table."""

from __future__ import annotations

import sys
from typing import Any, TextIO

from llmload.schema.results_model import Summary


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


def render_table(summary: Summary) -> str:
    head = [c if u is None else f"{c} ({u})" for c, u in COLUMNS]
    rows = summary_rows(summary)
    widths = [max(len(head[i]), *(len(r[i]) for r in rows)) for i in range(len(head))]
    lines = []
    fmt = ["<"] + [">"] * (len(head) - 1)
    lines.append("  ".join(f"{h:{a}{w}}" for h, a, w in zip(head, fmt, widths, strict=True)))
    lines.append("  ".join("-" * w for w in widths))
    for r in rows:
        lines.append("  ".join(f"{c:{a}{w}}" for c, a, w in zip(r, fmt, widths, strict=True)))
    run = summary.run
    foot = (
        f"run {run.run_id}: status {run.status}, {run.duration_s:.1f} s, "
        f"client loop lag p99 {_f(run.client.loop_lag_ms.p99, 2)} ms, CPU max {_f(run.client.cpu_percent.max, 0)}%"
    )
    delays = [ts.client_delay_ms.p99 for ts in run.client.timestamps.values() if ts.source == "kernel"]
    if any(d is not None for d in delays):
        foot += f", client delay p99 {_f(max(d for d in delays if d is not None), 2)} ms (kernel stamps)"
    lines.append(foot)
    for reason in run.reasons:
        lines.append(f"  ! {reason}")
    for note in run.client.notes:
        lines.append(f"  . {note}")
    for flag in run.client.flags:
        lines.append(f"  ! {flag.target} {flag.metric.upper()} flagged: {flag.why}")
    return "\n".join(lines)


def print_table(summary: Summary, out: TextIO = sys.stdout) -> None:
    out.write(render_table(summary) + "\n")
    out.flush()
