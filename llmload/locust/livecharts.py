"""The LLM tab's live charts: a bounded time series per target, sampled every reporting interval.

At each interval (it is one of ``Conductor.sinks``), for each target: the live window's output
tok/s, TTFT p50/p99 and ITL p99 (llmload/measure/livewindow.py, the figures of the progress line and the
table), the streams in flight, and the engine's KV-cache usage when the run scrapes its /metrics
(the latest value in telemetry.jsonl). webui.py serves them as ``GET ./llmload/series``; the page
draws them with its own small script (livecharts.js): nothing comes from a CDN.
"""

from __future__ import annotations

from collections import deque
from pathlib import Path
from typing import Any

from llmload.measure.runstate import Aggregator
from llmload.sinks.results import TelemetryTail

MAX_POINTS = 300  # per target: the last 10 minutes at the default 2 s interval
FIELDS = ("output_tok_s", "ttft_p50_ms", "ttft_p99_ms", "itl_p99_ms", "in_flight", "kv_cache_usage_pct")
KV_METRIC = "kv_cache_usage_ratio"  # collectors/engine_metrics.py's normalised name, 0..1


class ChartSeries:
    def __init__(
        self, agg: Aggregator, targets: list[str], telemetry: Path | None, max_points: int = MAX_POINTS
    ) -> None:
        self.agg = agg
        self.targets = list(targets)
        self.tail = TelemetryTail(telemetry) if telemetry is not None else None
        self._tail_at: float | None = None
        self.points: dict[str, deque[dict[str, Any]]] = {t: deque(maxlen=max_points) for t in self.targets}

    def interval(self, row: dict[str, Any]) -> None:
        target = row["target"]
        if target not in self.points:
            return
        if self.tail is not None and self._tail_at != row["t"]:  # once per interval, for every target
            self._tail_at = row["t"]
            self.tail.read()
        kv = self.tail.latest.get((target, KV_METRIC)) if self.tail is not None else None
        live = self.agg.live.latency(target)
        self.points[target].append(
            {
                "t": row["t"],
                "output_tok_s": row["output_tok_s"],
                "ttft_p50_ms": live["ttft_p50_ms"],
                "ttft_p99_ms": live["ttft_p99_ms"],
                "itl_p99_ms": live["itl_p99_ms"],
                "in_flight": row["in_flight"],
                "kv_cache_usage_pct": None if kv is None else round(100.0 * kv, 2),
            }
        )

    def event(self, kind: str, text: str) -> None:
        """A sink hears the run's events too; the charts draw none of them."""

    def to_json(self) -> dict[str, Any]:
        """``{"fields": [...], "targets": {name: {"t": [...], field: [...], ...}}}``, oldest first."""
        out: dict[str, Any] = {}
        for t, pts in self.points.items():
            out[t] = {"t": [p["t"] for p in pts], **{f: [p[f] for p in pts] for f in FIELDS}}
        return {"fields": list(FIELDS), "targets": out}
