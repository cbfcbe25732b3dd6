"""What the engines said about themselves: a per-target summary of telemetry.jsonl, and the
agreement rows summary.json holds (llmload/measure/agreement.py), ready for the HTML and Markdown.

Counters (preemptions, prefix-cache hits and queries) are differences between the first and last
scrape, so a long-lived server's history before the run does not count; gauges (running, waiting,
KV-cache usage) are means and peaks over the scrapes.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from llmload.measure.agreement import MEAN_TOLERANCE_MS, MEAN_TOLERANCE_PCT, RATE_TOLERANCE_PCT
from llmload.report.results import RunData
from llmload.report.slo import fmt


@dataclass
class EngineSummary:
    target: str
    scrapes: int
    kv_peak_pct: float | None
    kv_mean_pct: float | None
    running_mean: float | None
    waiting_mean: float | None
    waiting_peak: float | None
    preemptions: float | None
    prefix_hit_pct: float | None

    def cells(self) -> list[str]:
        return [
            self.target,
            str(self.scrapes),
            fmt(self.kv_peak_pct),
            fmt(self.kv_mean_pct),
            fmt(self.running_mean),
            fmt(self.waiting_mean),
            fmt(self.waiting_peak),
            fmt(self.preemptions),
            fmt(self.prefix_hit_pct),
        ]


ENGINE_HEADERS = [
    "target",
    "scrapes",
    "KV cache peak %",
    "KV cache mean %",
    "running (mean)",
    "waiting (mean)",
    "waiting (peak)",
    "preemptions",
    "prefix-cache hit %",
]
AGREEMENT_HEADERS = ["target", "figure", "llmload", "server", "difference", "verdict"]


def _series(run: RunData) -> dict[str, dict[str, list[tuple[float, float]]]]:
    out: dict[str, dict[str, list[tuple[float, float]]]] = defaultdict(lambda: defaultdict(list))
    for s in run.telemetry:
        if s.source == "engine":
            out[s.target][s.metric].append((s.t, s.value))
    for by_metric in out.values():
        for pts in by_metric.values():
            pts.sort()
    return out


def _mean(pts: list[tuple[float, float]] | None) -> float | None:
    return sum(v for _, v in pts) / len(pts) if pts else None


def _peak(pts: list[tuple[float, float]] | None) -> float | None:
    return max(v for _, v in pts) if pts else None


def _delta(pts: list[tuple[float, float]] | None) -> float | None:
    return pts[-1][1] - pts[0][1] if pts and len(pts) >= 2 else None


def engine_summaries(run: RunData) -> list[EngineSummary]:
    series = _series(run)
    out = []
    for target in run.targets:
        s = series.get(target)
        if not s:
            continue
        kv = s.get("kv_cache_usage_ratio")
        hits, queries = _delta(s.get("prefix_cache_hits_total")), _delta(s.get("prefix_cache_queries_total"))
        hit_pct = 100.0 * hits / queries if hits is not None and queries else None
        if hit_pct is None and s.get("prefix_cache_hit_ratio"):
            hit_pct = 100.0 * s["prefix_cache_hit_ratio"][-1][1]  # the engine's own gauge
        peak, mean = _peak(kv), _mean(kv)
        out.append(
            EngineSummary(
                target=target,
                scrapes=max(len(p) for p in s.values()),
                kv_peak_pct=None if peak is None else 100.0 * peak,
                kv_mean_pct=None if mean is None else 100.0 * mean,
                running_mean=_mean(s.get("requests_running")),
                waiting_mean=_mean(s.get("requests_waiting")),
                waiting_peak=_peak(s.get("requests_waiting")),
                preemptions=_delta(s.get("preemptions_total")),
                prefix_hit_pct=hit_pct,
            )
        )
    return out


def agreement_rows(run: RunData) -> list[list[str]]:
    """One row per compared figure and target (targets whose /metrics was scraped)."""
    rows = []
    for target, block in run.targets.items():
        agreement = block.server_agreement
        for r in agreement.rows if agreement is not None else []:
            diff = r.diff_pct
            unit = "" if r.unit in ("requests", "tokens") else f" {r.unit}"
            verdict: str = r.verdict
            if r.basis and "approx" in r.basis:
                verdict += " (approx)"
            rows.append(
                [
                    target,
                    r.figure,
                    fmt(r.client) + unit,
                    fmt(r.server) + unit,
                    "-" if diff is None else f"{diff:+.2f} %",
                    verdict,
                ]
            )
    return rows


def agreement_note() -> str:
    return (
        "The server's figures are the differences of its /metrics counters between a scrape taken "
        "before the load and one after the last stream ended. Counts and tokens agree when equal; "
        f"TTFT and E2E means within {MEAN_TOLERANCE_PCT:g} % or {MEAN_TOLERANCE_MS:g} ms, whichever is "
        "larger (llmload's clock also covers the HTTP round trip); "
        f"output tok/s within {RATE_TOLERANCE_PCT:g} %."
    )


def rate_series(pts: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """A counter's per-second rate between consecutive scrapes (a reset counts from zero)."""
    out = []
    for (t0, v0), (t1, v1) in zip(pts, pts[1:], strict=False):
        if t1 > t0:
            out.append((t1, max(0.0, (v1 - v0) if v1 >= v0 else v1) / (t1 - t0)))
    return out


def engine_series(run: RunData) -> dict[str, dict[str, list[tuple[float, float]]]]:
    """target -> metric -> [(t, value)] of the engine's own series, sorted by time."""
    return {t: dict(m) for t, m in _series(run).items()}
