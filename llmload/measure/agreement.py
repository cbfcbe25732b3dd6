"""Agreement with the server's own counters: llmload's figures beside the engine's /metrics deltas.

The run's scraper (llmload/hosts/scrape.py) reads the target's /metrics once before any load and once
after the last stream ended, so the difference of the two is exactly what the server did for this
run (the server must serve nothing else meanwhile). Each row compares one figure:

- requests: requests llmload sent, against the server's finished-request counter;
- prompt / output tokens: the sums of usage over every request, against the token counters;
- TTFT / E2E mean: llmload's means over successful requests, against the server's histogram
  sum/count. vLLM starts its clock (``arrival_time``) after its front-end has parsed the HTTP
  request, rendered the chat template and tokenized the prompt, so the client's figures sit a
  constant few milliseconds above the server's (+2.4 ms at concurrency 1 on the tiny CPU test
  model, the same offset in TTFT and E2E): they agree within 5 % or 5 ms, whichever is larger;
- output tok/s: llmload's throughput against the server's generation-token delta over the same
  wall window. When every token the run streamed fell inside the window (no warm-up, a
  request-bound plan), that is the whole-run delta over the window; otherwise the delta between
  the first and last scrape inside the window, over their time apart (then marked ``approx``).

No Locust import; works on summary figures and telemetry rows.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from llmload.schema.results_model import Agreement, AgreementRow, TelemetryRow

MEAN_TOLERANCE_PCT = 5.0
MEAN_TOLERANCE_MS = 5.0
RATE_TOLERANCE_PCT = 3.0


def target_series(rows: Iterable[TelemetryRow], target: str) -> dict[str, list[tuple[float, float]]]:
    out: dict[str, list[tuple[float, float]]] = {}
    for r in rows:
        if r.target == target and r.source == "engine":
            out.setdefault(r.metric, []).append((r.t, r.value))
    for pts in out.values():
        pts.sort()
    return out


def _delta(pts: list[tuple[float, float]] | None) -> float | None:
    if not pts or len(pts) < 2:
        return None
    return pts[-1][1] - pts[0][1]


def _row(
    name: str, unit: str, client: float | None, server: float | None, basis: str | None = None
) -> AgreementRow:
    verdict: Literal["agrees", "differs", "n/a"]
    if client is None or server is None:
        verdict = "n/a"
    else:
        diff = client - server
        if unit in ("requests", "tokens"):
            ok = abs(diff) < 0.5
        elif unit == "ms":
            ok = abs(diff) <= max(MEAN_TOLERANCE_MS, abs(server) * MEAN_TOLERANCE_PCT / 100.0)
        else:
            ok = server > 0 and abs(diff) / server * 100.0 <= RATE_TOLERANCE_PCT
        verdict = "agrees" if ok else "differs"
    row = AgreementRow(figure=name, unit=unit, client=client, server=server, verdict=verdict)
    if client is not None and server:
        row.diff_pct = round((client - server) / server * 100.0, 2)  # a key only when there is a figure
    if basis is not None:
        row.basis = basis
    return row


def server_agreement(
    target: str,
    telemetry: Iterable[TelemetryRow],
    *,
    sent: int,
    prompt_tokens: int,
    output_tokens: int,
    ttft_mean_ms: float | None,
    e2e_mean_ms: float | None,
    output_tok_s: float,
    window: tuple[float | None, float | None, float],
    streamed_all_in_window: bool,
) -> Agreement | None:
    """The agreement rows for one target, or None when its /metrics was never scraped twice."""
    s = target_series(telemetry, target)
    if not s:
        return None
    scrapes = max((len(p) for p in s.values()), default=0)
    if scrapes < 2:
        return None

    def mean_ms(metric: str) -> float | None:
        total, count = _delta(s.get(f"{metric}_sum")), _delta(s.get(f"{metric}_count"))
        return None if not count or total is None else round(total / count * 1000.0, 3)

    rows = [
        _row("requests", "requests", float(sent), _delta(s.get("requests_finished_total"))),
        _row("prompt tokens", "tokens", float(prompt_tokens), _delta(s.get("prompt_tokens_total"))),
        _row("output tokens", "tokens", float(output_tokens), _delta(s.get("generation_tokens_total"))),
        _row("TTFT mean", "ms", ttft_mean_ms, mean_ms("ttft_seconds")),
        _row("E2E mean", "ms", e2e_mean_ms, mean_ms("e2e_seconds")),
    ]
    first, last, span = window
    gen = s.get("generation_tokens_total")
    server_rate: float | None = None
    basis = "whole run over the window"
    if gen and span > 0 and streamed_all_in_window:
        server_rate = (gen[-1][1] - gen[0][1]) / span
    elif gen and first is not None and last is not None:
        inside = [(t, v) for t, v in gen if first <= t <= last]
        basis = "scrapes inside the window (approx)"
        if len(inside) >= 2 and inside[-1][0] > inside[0][0]:
            server_rate = (inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0])
    rows.append(
        _row(
            "output tok/s",
            "tok/s",
            output_tok_s,
            None if server_rate is None else round(server_rate, 3),
            basis=basis,
        )
    )
    judged = [r for r in rows if r.verdict != "n/a"]
    return Agreement(
        scrapes=scrapes, rows=rows, agrees=all(r.verdict == "agrees" for r in judged) if judged else None
    )
