"""Each engine's own view of a run (summary.json targets.NAME.engine), from its telemetry rows."""

from __future__ import annotations

from llmload.measure.engine_figures import engine_figures
from llmload.schema.results_model import TelemetryRow


def _rows(target: str, series: dict[str, list[float]]) -> list[TelemetryRow]:
    return [
        TelemetryRow(t=float(i), target=target, source="engine", metric=metric, value=v)
        for metric, values in series.items()
        for i, v in enumerate(values)
    ]


def test_gauges_are_means_and_peaks_counters_are_deltas() -> None:
    rows = _rows(
        "a",
        {
            "kv_cache_usage_ratio": [0.1, 0.3, 0.2],
            "requests_running": [2, 4, 3],
            "requests_waiting": [0, 3, 0],
            "preemptions_total": [5, 5, 7],
            "queue_seconds_sum": [10.0, 10.5, 11.0],
            "queue_seconds_count": [100, 110, 120],
            "prefix_cache_hits_total": [50, 60, 80],
            "prefix_cache_queries_total": [100, 140, 200],
        },
    )
    rows += _rows("b", {"kv_cache_usage_ratio": [0.9, 0.9]})  # another target's rows do not count
    rows.append(TelemetryRow(t=1.0, target="a", source="gpu", metric="kv_cache_usage_ratio", value=1.0))
    f = engine_figures(rows, "a", "aphrodite")
    assert f is not None and f.scrapes == 3
    assert (
        round(f.kv_cache_usage_peak_pct or 0, 6) == 30.0 and round(f.kv_cache_usage_mean_pct or 0, 6) == 20.0
    )
    assert (f.requests_running_mean, f.requests_running_peak) == (3.0, 4.0)
    assert (f.requests_waiting_mean, f.requests_waiting_peak) == (1.0, 3.0)
    assert f.preemptions == 2.0 and f.prefix_cache_hit_pct == 30.0  # (80 - 50) / (200 - 100)
    assert round(f.queue_time_mean_ms or 0, 6) == 50.0  # 1.0 s over 20 requests
    assert f.series["kv_cache_usage"] == "aphrodite:kv_cache_usage_perc or aphrodite:gpu_cache_usage_perc"
    assert f.series["requests_waiting"] == "aphrodite:num_requests_waiting"


def test_a_target_never_scraped_has_none() -> None:
    assert engine_figures(_rows("b", {"requests_running": [1, 2]}), "a", "vllm") is None
    f = engine_figures(_rows("a", {"requests_running": [1]}), "a", "vllm")
    assert (
        f is not None and f.preemptions is None and f.kv_cache_usage_peak_pct is None
    )  # one scrape: no delta
    assert f.series["requests_running"] == "vllm:num_requests_running"
