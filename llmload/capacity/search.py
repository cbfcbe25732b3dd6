"""Which load to probe next, and what the probes so far say the capacity is (pure functions).

A target's capacity is the highest load (arrivals per second, or concurrent streams) at which its
SLOs hold. The search assumes they hold below some load and not above it:

1. bracket: from ``start``, multiply by ``factor`` while probes pass (up to ``max``), or divide
   while they fail (down to ``min``);
2. bisect (geometric midpoints, 3 significant digits; whole streams for concurrency) between the
   highest load that passed and the lowest that failed until they are within ``precision``;
3. repeat: probe those two loads once more with another seed. A load that failed once counts
   as failed, so a repeat can only move the estimate down, and the bisection goes on below it.

The estimate is the highest load that passed every time it was probed, below the lowest load that
ever failed. Its interval runs from the highest load at or below it that passed *clearly* and never
failed to the lowest load above it that failed clearly and never passed (llmload/capacity/judge.py:
each figure's one-sided 95% bound on the same side of its SLO): the search's step and each probe's
sampling error are both inside it. When no probe closes a side, the search probes further out (by
the square root of ``factor``, at most one ``factor`` beyond the bracket, and downwards only to loads
whose probes still get their full ``requests``); a side no probe closes stays open (None).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from llmload.config.executors import Capacity

MAX_PROBES = 24  # per target: a search that has not settled by then stops and says so


@dataclass(frozen=True)
class Outcome:
    """One probe, judged."""

    value: float
    repeat: int  # 0 for the first probe at this value, 1.. for repeats (another seed)
    passed: bool
    clear: bool


@dataclass(frozen=True)
class Estimate:
    value: float | None  # the capacity; None when even the lowest probe failed
    low: float | None  # the interval's ends (None: open on that side)
    high: float | None
    bound: Literal["found", "at_least_max", "below_min", "unsettled"]


def _min(settings: Capacity) -> float:
    return settings.min if settings.min is not None else settings.start / 64


def _tidy(v: float, settings: Capacity) -> float:
    if settings.vary == "concurrency":
        return float(max(1, round(v)))
    return float(f"{v:.3g}")


def _split(outcomes: Sequence[Outcome]) -> tuple[float | None, float | None]:
    """(highest load below every failure that always passed, lowest load that ever failed)."""
    failed = [o.value for o in outcomes if not o.passed]
    hi = min(failed) if failed else None
    bad = set(failed)
    passed = [o.value for o in outcomes if o.passed and o.value not in bad and (hi is None or o.value < hi)]
    return (max(passed) if passed else None), hi


def _close_enough(lo: float, hi: float, settings: Capacity) -> bool:
    if settings.vary == "concurrency":
        return hi - lo <= max(1.0, math.floor(settings.precision * lo))
    return hi / lo - 1 <= settings.precision


def _clear_ends(outcomes: Sequence[Outcome], lo: float) -> tuple[list[float], list[float]]:
    """Loads at or below ``lo`` that passed clearly and never failed; loads above it that failed
    clearly and never passed. One verdict that disagrees with another at the same load makes
    neither clear: requests in one probe share its queue, so a probe's bounds can be too narrow, and
    a repeat is what shows it."""
    values = {o.value for o in outcomes}
    at = {v: [o for o in outcomes if o.value == v] for v in values}
    passes = [v for v in values if v <= lo and all(o.passed for o in at[v]) and any(o.clear for o in at[v])]
    fails = [v for v in values if v > lo and not any(o.passed for o in at[v]) and any(o.clear for o in at[v])]
    return passes, fails


def _floor(settings: Capacity) -> float:
    return max(_min(settings), 1.0) if settings.vary == "concurrency" else _min(settings)


def next_probe(outcomes: Sequence[Outcome], settings: Capacity) -> tuple[float, int] | None:
    """The next probe (load, repeat number), or None when the search is done."""
    if len(outcomes) >= MAX_PROBES:
        return None
    if not outcomes:
        return _tidy(settings.start, settings), 0
    lo, hi = _split(outcomes)
    if hi is None:  # everything passed so far: bracket upwards
        assert lo is not None
        up = min(settings.max, _tidy(lo * settings.factor, settings))
        return (up, 0) if up > lo else None  # None: at max (or rounding cannot go higher)
    if lo is None:  # everything failed so far: bracket downwards
        down = max(_floor(settings), _tidy(hi / settings.factor, settings))
        return (down, 0) if down < hi else None  # None: at min
    if not _close_enough(lo, hi, settings):
        mid = _tidy(math.sqrt(lo * hi), settings)
        if lo < mid < hi:
            return mid, 0
    if settings.repeat:
        for v in (lo, hi):
            if sum(1 for o in outcomes if o.value == v) < 2:
                return v, 1
    # Close the interval: a load above that fails clearly, one at or below that passes clearly,
    # at most one factor beyond the bracket on each side (further out says little of the boundary).
    passes, fails = _clear_ends(outcomes, lo)
    step = math.sqrt(settings.factor)
    values = [o.value for o in outcomes]
    up = min(settings.max, _tidy(max(values) * step, settings))
    if not fails and max(values) < up <= hi * settings.factor:
        return up, 0
    down = max(_floor(settings), _tidy(min(values) / step, settings))
    if not passes and lo / settings.factor <= down < min(values) and _decisive(down, settings):
        return down, 0
    return None


def _decisive(value: float, settings: Capacity) -> bool:
    """Can a probe at ``value`` get its full ``requests`` (so that a p99 can pass clearly)?"""
    return settings.vary == "concurrency" or settings.requests / value <= settings.hold_max


def estimate(outcomes: Sequence[Outcome], settings: Capacity) -> Estimate:
    lo, hi = _split(outcomes)
    if lo is None:
        at_floor = hi is not None and hi <= _floor(settings)
        return Estimate(None, None, hi, "below_min" if at_floor else "unsettled")
    passes, fails = _clear_ends(outcomes, lo)
    bound: Literal["found", "at_least_max", "below_min", "unsettled"] = "found"
    if hi is None:
        bound = "at_least_max" if lo >= settings.max else "unsettled"
    elif next_probe(outcomes, settings) is not None:
        bound = "unsettled"  # stopped before the search was done (MAX_PROBES, a signal)
    return Estimate(lo, max(passes) if passes else None, min(fails) if fails else None, bound)
