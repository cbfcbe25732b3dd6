"""What the run's scrapes cost the servers they read, from telemetry.jsonl's ``source: scrape`` rows.

The scraper (llmload/hosts/scrape.py) times each answered request from sending it to the last byte of
its body, and counts the body's bytes. Per target and page (the engine's /metrics, the DCGM exporter's)
this gives the number of scrapes, the p50/p99/max of their wall time and size, and an estimate of the
server time they took: the sum of the wall times. That sum is an upper bound: each wall time also holds
the loopback or network round trip and the scraper's own wake-up; what it bounds is the time the server
spent rendering and sending the page, which an engine's front end (vLLM's API server: one event loop)
does not spend on the streams it serves. ``busy_pct`` puts it over the span the scraper ran.

Percentiles are nearest-rank (llmload/measure/histogram.py). No Locust import.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from llmload.measure.histogram import percentile
from llmload.schema.results_model import ScrapeCost, TelemetryRow
from llmload.schema.scrape_model import Spread

Page = Literal["engine", "gpu"]


def scrape_cost(
    rows: Iterable[TelemetryRow], target: str, page: Page, interval_s: float | None
) -> ScrapeCost | None:
    """The scrapes of ``target``'s ``page``; None when it never answered."""
    took: list[tuple[float, float]] = []  # (t, seconds)
    sizes: list[float] = []
    for r in rows:
        if r.source != "scrape" or r.target != target:
            continue
        if r.metric == f"{page}_scrape_seconds":
            took.append((r.t, r.value))
        elif r.metric == f"{page}_scrape_bytes":
            sizes.append(r.value)
    if not took:
        return None
    took.sort()
    seconds = [s for _, s in took]
    server_s = sum(seconds)
    span = took[-1][0] + took[-1][1] - took[0][0]
    return ScrapeCost(
        interval_s=interval_s,
        count=len(took),
        duration_ms=_spread([s * 1e3 for s in seconds], 3),
        bytes=_spread(sizes, 0),
        server_s_estimate=round(server_s, 4),
        busy_pct=round(100.0 * server_s / span, 4) if len(took) > 1 and span > 0 else None,
    )


def _spread(values: list[float], digits: int) -> Spread:
    def r(v: float | None) -> float | None:
        return None if v is None else round(v, digits)

    return Spread(
        p50=r(percentile(values, 50)), p99=r(percentile(values, 99)), max=r(max(values, default=None))
    )
