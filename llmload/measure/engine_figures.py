"""What an engine said about itself over a run, from its /metrics scrapes (telemetry.jsonl rows):
summary.json's ``targets.NAME.engine`` and the reports' engine summary, computed once here.

Gauges (requests running and waiting, KV-cache usage) are means and peaks over the scrapes; counters
(preemptions, prefix-cache hits and queries, the queue-time histogram's sum and count) are
differences between the first and the last scrape, so a long-lived server's history before the run
does not count. ``series`` names, per figure, the engine's own series it is read from (the rules of
collectors/engine_metrics.py for the target's kind, newest name first): ``vllm:kv_cache_usage_perc``
for vLLM, ``aphrodite:kv_cache_usage_perc`` for Aphrodite.

No Locust import; works on telemetry rows.
"""

from __future__ import annotations

from collections.abc import Iterable

from llmload.measure.agreement import target_series
from llmload.schema.results_model import EngineFigures, TelemetryRow

# figure -> the normalised metrics it reads (docs/telemetry.md)
READS: dict[str, tuple[str, ...]] = {
    "kv_cache_usage": ("kv_cache_usage_ratio",),
    "requests_running": ("requests_running",),
    "requests_waiting": ("requests_waiting",),
    "preemptions": ("preemptions_total",),
    "prefix_cache_hit": ("prefix_cache_hits_total", "prefix_cache_queries_total", "prefix_cache_hit_ratio"),
    "queue_time": ("queue_seconds_sum", "queue_seconds_count"),
}


def _mean(pts: list[tuple[float, float]] | None) -> float | None:
    return sum(v for _, v in pts) / len(pts) if pts else None


def _peak(pts: list[tuple[float, float]] | None) -> float | None:
    return max(v for _, v in pts) if pts else None


def _delta(pts: list[tuple[float, float]] | None) -> float | None:
    return pts[-1][1] - pts[0][1] if pts and len(pts) >= 2 else None


def _pct(ratio: float | None) -> float | None:
    return None if ratio is None else 100.0 * ratio


def engine_series(kind: str) -> dict[str, str]:
    """Figure -> the engine's own series names for ``kind`` ("a or b" when it was renamed)."""
    from collectors.engine_metrics import RULES  # the scrape's own rules: one vocabulary

    names = {rule.metric: " or ".join(c.label() for c in rule.candidates) for rule in RULES.get(kind, [])}
    out = {}
    for figure, metrics in READS.items():
        found = [names[m] for m in metrics if m in names]
        if found:
            out[figure] = ", ".join(found)
    return out


def engine_figures(rows: Iterable[TelemetryRow], target: str, kind: str) -> EngineFigures | None:
    """The target's engine figures, or None when no engine sample of it was scraped."""
    s = target_series(rows, target)
    if not s:
        return None
    hits, queries = _delta(s.get("prefix_cache_hits_total")), _delta(s.get("prefix_cache_queries_total"))
    hit_pct = 100.0 * hits / queries if hits is not None and queries else None
    if hit_pct is None and s.get("prefix_cache_hit_ratio"):
        hit_pct = 100.0 * s["prefix_cache_hit_ratio"][-1][1]  # the engine's own gauge
    queued_s, queued_n = _delta(s.get("queue_seconds_sum")), _delta(s.get("queue_seconds_count"))
    kv = s.get("kv_cache_usage_ratio")
    return EngineFigures(
        scrapes=max(len(p) for p in s.values()),
        kv_cache_usage_peak_pct=_pct(_peak(kv)),
        kv_cache_usage_mean_pct=_pct(_mean(kv)),
        requests_running_mean=_mean(s.get("requests_running")),
        requests_running_peak=_peak(s.get("requests_running")),
        requests_waiting_mean=_mean(s.get("requests_waiting")),
        requests_waiting_peak=_peak(s.get("requests_waiting")),
        preemptions=_delta(s.get("preemptions_total")),
        prefix_cache_hit_pct=hit_pct,
        queue_time_mean_ms=1000.0 * queued_s / queued_n if queued_s is not None and queued_n else None,
        series=engine_series(kind),
    )
