"""A run's SLOs judged from its Summary alone: the one judgement the verdict, the reports and
``llmload report`` share (so no renderer decides an exit code).

A sweep is judged on its capacity, level by level (report/levels.py); any other run on its
whole-run figures (report/slo.py).
"""

from __future__ import annotations

from llmload.config.slo_spec import SloSpec
from llmload.report.levels import capacity_results, level_rows
from llmload.report.slo import SloResult, evaluate_slos, fmt, slo_from_summary
from llmload.schema.results_model import Summary


def slo_results(summary: Summary, slo: SloSpec | None) -> list[SloResult]:
    """Every SLO result of the run: per target (and per sweep level's capacity)."""
    if slo is None:
        return []
    rows = level_rows(summary, slo)
    return capacity_results(rows, slo) if rows else evaluate_slos(summary, slo)


def missed_slos(summary: Summary) -> list[str]:
    """The SLOs missed, as ``ttft_p99_ms 2,310 > 2,000 ms (vllm-awq)``; [] when none is set or all met."""
    return [describe_miss(r) for r in slo_results(summary, slo_from_summary(summary)) if not r.passed]


def describe_miss(r: SloResult) -> str:
    unit = f" {r.unit}" if r.unit else ""
    bad = ">" if r.comparator == "<=" else "<"
    measured = "not measured" if r.measured is None else f"{fmt(r.measured)} {bad} {fmt(r.threshold)}{unit}"
    return f"{r.slo} {measured} ({r.target})"
