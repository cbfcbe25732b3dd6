"""The table of what the run's scrapes cost each target (summary.json's ``scrape`` and ``gpu_scrape``).

One row per target and page; the figures are llmload/measure/scrape_cost.py's, rendered, never recomputed.
"""

from __future__ import annotations

from llmload.report.results import RunData
from llmload.report.slo import fmt
from llmload.schema.results_model import ScrapeCost

SCRAPE_HEADERS = [
    "target",
    "page",
    "every s",
    "scrapes",
    "wall p50 ms",
    "wall p99 ms",
    "size p50 KiB",
    "size p99 KiB",
    "server s (at most)",
    "busy % (at most)",
]


def scrape_rows(run: RunData) -> list[list[str]]:
    rows = []
    for target, block in run.targets.items():
        for page, cost in (("/metrics", block.scrape), ("DCGM", block.gpu_scrape)):
            if cost is not None:
                rows.append([target, page, *_cells(cost)])
    return rows


def _cells(c: ScrapeCost) -> list[str]:
    def kib(v: float | None) -> str:
        return "-" if v is None else f"{v / 1024:.1f}"

    return [
        "before/after" if c.interval_s is None else fmt(c.interval_s),
        str(c.count),
        fmt(c.duration_ms.p50),
        fmt(c.duration_ms.p99),
        kib(c.bytes.p50),
        kib(c.bytes.p99),
        f"{c.server_s_estimate:.3f}",
        "-" if c.busy_pct is None else f"{c.busy_pct:.3f}",
    ]


def scrape_note() -> str:
    return (
        "Each scrape's wall time runs from sending the request to the last byte of the page. It bounds the "
        "server's time on the page from above (it adds the round trip), so their sum is the most server "
        "time the scrapes took, and busy % that sum over the span the scraper ran (docs/telemetry.md)."
    )
