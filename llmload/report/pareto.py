"""The Pareto frontier of a sweep: what each engine gives one user against what it gives per GPU.

For each engine (target) and each load it was measured at (a sweep's levels; a capacity probe's
points later), one point:

- output tok/s per user: ``1000 / TPOT p50`` (ms), the median stream's decode speed once its tokens
  flow, as one user sees it (TPOT = (E2E - TTFT) / (output tokens - 1), per request);
- output tok/s per GPU: the level's ``throughput.output_tok_s / GPUs``, with efficiency.py's GPU count
  (the target label ``gpus``, else the GPUs in its telemetry);
- whether the level met every SLO at the load it asked for (levels.py ``LevelRow.counts``, the same
  test that sets a target's capacity); None when the run set no SLOs.

A point is dominated when another point of the same engine is at least as good on both axes and
better on one; the frontier is the engine's non-dominated points. Both axes are better higher.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from llmload.report.levels import LevelRow
from llmload.report.slo import fmt
from llmload.schema.results_model import Summary, latency


@dataclass(frozen=True)
class ParetoPoint:
    target: str
    label: str  # the level ("c=8"), or a capacity probe's name
    per_user_tok_s: float
    per_gpu_tok_s: float
    met_slo: bool | None = None


def dominates(a: ParetoPoint, b: ParetoPoint) -> bool:
    """a is at least as good as b on both axes and better on one."""
    ge = a.per_user_tok_s >= b.per_user_tok_s and a.per_gpu_tok_s >= b.per_gpu_tok_s
    return ge and (a.per_user_tok_s > b.per_user_tok_s or a.per_gpu_tok_s > b.per_gpu_tok_s)


def frontier(points: Sequence[ParetoPoint]) -> list[ParetoPoint]:
    """The non-dominated points of one engine's set, by tok/s per user ascending."""
    keep = [p for p in points if not any(dominates(q, p) for q in points)]
    return sorted(keep, key=lambda p: (p.per_user_tok_s, -p.per_gpu_tok_s))


def by_target(points: Sequence[ParetoPoint]) -> dict[str, list[ParetoPoint]]:
    out: dict[str, list[ParetoPoint]] = {}
    for p in points:
        out.setdefault(p.target, []).append(p)
    return out


def level_points(
    summary: Summary, rows: Sequence[LevelRow], gpus: dict[str, int | None]
) -> list[ParetoPoint]:
    """One point per (level, target) of a sweep whose TPOT, throughput and GPU count are known.

    ``rows`` are levels.level_rows() of the run ([] when it is not a sweep: no points).
    """
    judged = {(r.level, r.target): r for r in rows}
    out = []
    for lv in summary.levels:
        for target, block in lv.targets.items():
            row, n = judged.get((lv.level, target)), gpus.get(target)
            tpot = latency(block, "tpot").p50
            if row is None or not n or not tpot:
                continue
            met = row.counts if row.results else None
            out.append(ParetoPoint(target, lv.level, 1000.0 / tpot, block.throughput.output_tok_s / n, met))
    return out


HEADERS = ["target", "level", "output tok/s per user", "output tok/s per GPU", "SLOs", "frontier"]


def table_rows(points: Sequence[ParetoPoint]) -> list[list[str]]:
    """The points as table cells (report.md), grouped by target."""
    cells = []
    for target, mine in by_target(points).items():
        front = set(frontier(mine))
        for p in mine:
            slo = "-" if p.met_slo is None else ("met" if p.met_slo else "missed")
            on = "yes" if p in front else "dominated"
            cells.append([target, p.label, fmt(p.per_user_tok_s), fmt(p.per_gpu_tok_s), slo, on])
    return cells
