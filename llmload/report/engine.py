"""What the engines said about themselves: the engine figures and the agreement rows summary.json
holds (llmload/measure/engine_figures.py, llmload/measure/agreement.py), ready for the HTML and Markdown.
"""

from __future__ import annotations

from dataclasses import dataclass

from llmload.measure.agreement import MEAN_TOLERANCE_MS, MEAN_TOLERANCE_PCT, RATE_TOLERANCE_PCT
from llmload.measure.engine_figures import engine_figures
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


def engine_summaries(run: RunData) -> list[EngineSummary]:
    """Each scraped target's engine figures: summary.json's, else (an older summary) from telemetry.jsonl."""
    out = []
    for target, block in run.targets.items():
        f = block.engine or engine_figures(run.telemetry, target, block.kind)
        if f is None:
            continue
        out.append(
            EngineSummary(
                target=target,
                scrapes=f.scrapes,
                kv_peak_pct=f.kv_cache_usage_peak_pct,
                kv_mean_pct=f.kv_cache_usage_mean_pct,
                running_mean=f.requests_running_mean,
                waiting_mean=f.requests_waiting_mean,
                waiting_peak=f.requests_waiting_peak,
                preemptions=f.preemptions,
                prefix_hit_pct=f.prefix_cache_hit_pct,
            )
        )
    return out


def agreement_rows(run: RunData) -> list[list[str]]:
    """One row per compared figure and target (targets whose /metrics was scraped)."""
    rows = []
    for target, block in run.targets.items():
        agreement = block.server_agreement
        if agreement is not None and agreement.targets and agreement.targets[0] != target:
            continue  # a server several targets share: its rows once, under all their names
        label = " + ".join(agreement.targets) if agreement is not None and agreement.targets else target
        for r in agreement.rows if agreement is not None else []:
            diff = r.diff_pct
            unit = "" if r.unit in ("requests", "tokens") else f" {r.unit}"
            verdict: str = r.verdict
            if r.basis and "approx" in r.basis:
                verdict += " (approx)"
            rows.append(
                [
                    label,
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
        f"output tok/s within {RATE_TOLERANCE_PCT:g} %. Targets that share one server (A + B) are "
        "compared as their sum."
    )


def rate_series(pts: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """A counter's per-second rate between consecutive scrapes (a reset counts from zero)."""
    out = []
    for (t0, v0), (t1, v1) in zip(pts, pts[1:], strict=False):
        if t1 > t0:
            out.append((t1, max(0.0, (v1 - v0) if v1 >= v0 else v1) / (t1 - t0)))
    return out
