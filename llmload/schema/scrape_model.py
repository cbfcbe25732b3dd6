"""summary.json's blocks read from a target's scraped pages: ``engine`` (what the engine said of itself)
and ``scrape`` / ``gpu_scrape`` (what scraping its pages cost) (docs/results.md).

Read them through llmload/schema/results_model.py, which names them beside the other summary models.
"""

from __future__ import annotations

from llmload.schema.results_lines import LenientModel


class Spread(LenientModel):
    p50: float | None
    p99: float | None
    max: float | None


class ScrapeCost(LenientModel):
    """What scraping one target's /metrics (or DCGM) page took over the run (llmload/measure/scrape_cost.py)."""

    interval_s: float | None  # client.scrape_interval; None: before and after the load only
    count: int  # answered scrapes: the baseline, every interval, the last one
    duration_ms: Spread  # wall time of each, request sent to body read
    bytes: Spread  # body size of each, as served
    server_s_estimate: float  # the sum of the wall times: an upper bound of the server's time on them
    busy_pct: float | None  # server_s_estimate over the span from the first scrape to the end of the last


class EngineFigures(LenientModel):
    """What the engine said about itself over the run, from its /metrics (llmload/measure/engine_figures.py)."""

    scrapes: int
    kv_cache_usage_peak_pct: float | None
    kv_cache_usage_mean_pct: float | None
    requests_running_mean: float | None
    requests_running_peak: float | None = None
    requests_waiting_mean: float | None
    requests_waiting_peak: float | None
    preemptions: float | None  # counter delta, first to last scrape
    prefix_cache_hit_pct: float | None
    queue_time_mean_ms: float | None = None  # the engine's queue-time histogram, delta sum / delta count
    series: dict[str, str] = {}  # figure -> the engine's own series it is read from
