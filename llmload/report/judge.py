"""A run's SLOs judged from its Summary alone: the one judgement the verdict, the reports and
``llmload report`` share (so no renderer decides an exit code).

A sweep is judged on its capacity, level by level (report/levels.py); any other run on its
whole-run figures (report/slo.py). A result whose figure rests on a measurement the run flagged
(report/flagged.py) carries those flags: it is inconclusive, not met nor missed, unless the
scenario sets ``slo: {flagged_figures: judge}`` or the flag's error cannot have decided it (a late
TTFT that still met its bound).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from llmload.config.slo_spec import SloSpec
from llmload.report.flagged import flags_on, label, measures_of, stands
from llmload.report.levels import capacity_results, level_rows
from llmload.report.slo import SloResult, bound, evaluate_slos, fmt, slo_from_summary
from llmload.schema.results_model import Summary


def slo_results(summary: Summary, slo: SloSpec | None) -> list[SloResult]:
    """Every SLO result of the run: per target (and per sweep level's capacity), with its flags."""
    if slo is None:
        return []
    rows = level_rows(summary, slo)
    results = capacity_results(rows, slo) if rows else evaluate_slos(summary, slo)
    return [_with_flags(summary, slo, r) for r in results]


def _with_flags(summary: Summary, slo: SloSpec, r: SloResult) -> SloResult:
    block = summary.targets.get(r.target)
    reasoning = block is not None and "ttfo" in block.latency_ms
    flags = flags_on(summary.run.client.flags, r.target, measures_of(r.slo, slo, reasoning))
    if not flags:
        return r
    return replace(
        r,
        flagged=tuple(label(f) for f in flags),
        judge_flagged=slo.judges_flagged,
        stands=stands(r.slo, r.passed),
    )


@dataclass(frozen=True)
class Judgement:
    """The run's SLO results, sorted by what they say."""

    slo: SloSpec | None
    results: list[SloResult]

    @property
    def missed(self) -> list[SloResult]:
        return [r for r in self.results if r.state == "missed"]

    @property
    def inconclusive(self) -> list[SloResult]:
        return [r for r in self.results if r.state == "inconclusive"]

    @property
    def judged_on_flags(self) -> list[SloResult]:
        """Judged on flagged figures because the scenario said so (``flagged_figures: judge``)."""
        return [r for r in self.results if r.flagged and r.judge_flagged and not r.stands]

    @property
    def standing(self) -> list[SloResult]:
        """On flagged figures, but their error could only have pushed them away from their result."""
        return [r for r in self.results if r.flagged and r.stands]

    @property
    def state(self) -> str | None:
        """None without SLOs; missed when any was missed (a miss is known whatever else is unknown),
        else inconclusive when any could not be judged, else met."""
        if self.slo is None:
            return None
        if self.missed:
            return "missed"
        return "inconclusive" if self.inconclusive else "met"

    def bounds(self) -> list[str]:
        """The thresholds the run was judged against, once each: ``ttft_p99_ms <= 150 ms`` (a sweep's
        levels against every figure SLO, then its capacity against its floor)."""
        figures = [bound(k, v) for k, v in self.slo.figures().items()] if self.slo is not None else []
        return list(dict.fromkeys([*figures, *(r.bound() for r in self.results)]))


def judge(summary: Summary) -> Judgement:
    """The run's SLOs (``run.slo``) judged on its figures and flags."""
    slo = slo_from_summary(summary)
    return Judgement(slo, slo_results(summary, slo))


def describe_miss(r: SloResult) -> str:
    """e.g. ``ttft_p99_ms 2,310 > 2,000 ms (vllm-awq)``."""
    unit = f" {r.unit}" if r.unit else ""
    bad = ">" if r.comparator == "<=" else "<"
    measured = "not measured" if r.measured is None else f"{fmt(r.measured)} {bad} {fmt(r.threshold)}{unit}"
    return f"{r.slo} {measured} ({r.target})"
