"""A step's SLOs watched while it runs: a miss that the rest of its requests cannot undo.

With at most ``N`` requests in a step, a 99th percentile over ``n <= N`` values is the value of
nearest rank ``ceil(0.99 n)`` (llmload/measure/histogram.py ``rank``), so it is above a bound as soon as more
than ``n - rank(99, n)`` values are; that allowance never shrinks as ``n`` grows, so ``N``'s
allowance decides for every ``n`` the step can still end with. The same holds for the error rate:
more than ``error_rate x N`` failures is a miss whatever the rest do. Nothing here guesses: a step
ended on it would have missed anyway (``load.stop_on_slo_miss``, used by capacity probes).

The TTFT and E2E histograms hold successful requests only, so a failure cannot hide in them.
"""

from __future__ import annotations

from llmload.config.slo_spec import SloSpec
from llmload.load.plan import PlanStep, planned_requests
from llmload.measure.histogram import rank
from llmload.measure.metrics import TargetStats

# SLO key -> (the histogram it bounds, its percentile)
WATCHED: dict[str, tuple[str, float]] = {"ttft_p99_ms": ("ttft", 99.0), "e2e_p99_ms": ("e2e", 99.0)}


def certain_miss(stats: TargetStats, slo: SloSpec, planned: int) -> str | None:
    """Why ``stats`` (one target's requests of a step of at most ``planned`` requests) can no longer
    meet ``slo``; None while it still can."""
    active = slo.active()
    for key, (metric, p) in WATCHED.items():
        bound = active.get(key)
        if bound is None:
            continue
        over = stats.histograms[metric].count_over_ms(bound)
        allowed = planned - rank(p, planned)
        if over > allowed:
            return f"{over} requests over {key} {bound:g} ms (at most {allowed} of {planned} may be)"
    bound = active.get("error_rate")
    failures = stats.failures - (0 if slo.no_answer_counts else stats.by_class.get("no_answer", 0))
    if bound is not None and failures > bound * planned:
        return f"{failures} failed requests (error_rate {bound:g} of {planned} allows {bound * planned:g})"
    return None


def step_miss(level: dict[str, TargetStats], ps: PlanStep, slo: SloSpec, turns: int = 1) -> str | None:
    """Why every target of the step ``ps`` has missed its SLOs for good (its figures so far:
    ``level``); None while one of them still can meet them, or when the step's size is not known.

    ``turns``: the most requests one session sends (a closed loop's budget counts sessions)."""
    planned = planned_requests(ps.step)
    if planned is None:
        return None
    if not ps.step.open_loop:
        planned *= turns
    why = {t: certain_miss(level[t], slo, planned) if t in level else None for t in ps.targets}
    if not all(why.values()):
        return None
    return "; ".join(f"{t}: {w}" for t, w in why.items())
