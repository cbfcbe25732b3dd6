"""The load plan: a scenario's phases (llmload/config/executors.py) as steps over time.

    phases -> plan_steps -> Step            one setting of one phase (users, or an arrival rate)
    Step + targets + mode -> build_plan     the run's steps in order, each with its active targets
    Step -> users_at                        closed loop: Locust's user count and spawn rate
    Step -> arrival_times                   open loop: seeded arrival offsets
    split_share                             one worker's share of a per-target count

Everything here is a pure function of the scenario: the master and every worker build the same
plan from the same scenario, so a step number is all a worker needs to hear.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from llmload.config.executors import (
    AnyPhase,
    Capacity,
    ConstantArrivalRate,
    ConstantVUs,
    RampingArrivalRate,
    RampingVUs,
    Sweep,
    Trace,
)

Arrival = Literal["poisson", "uniform"]
Saturation = Literal["delay", "drop"]
LoadMode = Literal["parallel", "sequential"]


@dataclass(frozen=True)
class Step:
    """A stretch of one phase with one setting: closed-loop users, or an open-loop schedule."""

    phase: str
    level: str
    duration: float | None  # None: until max_requests
    max_requests: int | None
    users: int = 0  # closed loop: concurrent users per target at the end of the step
    start_users: int | None = None  # ramping: users at the start (linear ramp)
    spawn_rate: float | None = None
    rate: float | None = None  # open loop: arrivals per second at the end of the step
    start_rate: float | None = None  # ramping arrival: rate at the start (linear)
    arrival: Arrival = "poisson"
    max_vus: int = 1000
    on_saturation: Saturation = "delay"
    settle_after: float = 0.0
    value: float | None = None  # sweep level value
    arrivals: tuple[float, ...] = ()  # trace: each request's offset from the step start

    @property
    def open_loop(self) -> bool:
        return self.rate is not None

    @property
    def planned_s(self) -> float | None:
        """How long the step's schedule lasts: its duration, or an open loop's request count at its
        rate; None for a closed loop bounded by a count."""
        if self.duration is not None:
            return self.duration
        if self.rate and self.max_requests is not None:
            return self.max_requests / self.rate
        return None


@dataclass(frozen=True)
class PlanStep:
    step: Step
    targets: tuple[str, ...]  # active targets (all in parallel mode, one in sequential mode)
    number: int  # position in the whole plan
    position: int  # position in one target's plan (same for every target: paired schedules)


# A trace step ends this long after its last arrival; the streams still open finish in the drain.
TRACE_TAIL_S = 1.0


def plan_steps(phases: Sequence[AnyPhase], trace: Sequence[float] = ()) -> list[Step]:
    """Flatten phases into steps, in run order; ``trace``: the offsets a trace phase replays."""
    steps: list[Step] = []
    for i, ph in enumerate(phases):
        name = ph.name or (ph.executor if len(phases) == 1 else f"{i + 1}-{ph.executor}")
        if isinstance(ph, Capacity):
            raise ValueError("a capacity phase is a search of probe runs (llmload/capacity/), not a step")
        steps += _STEPS[type(ph)](ph, name, trace)
    return steps


def _constant_vus(ph: ConstantVUs, name: str, trace: Sequence[float]) -> list[Step]:
    return [Step(name, name, ph.duration, ph.max_requests, users=ph.vus, spawn_rate=ph.spawn_rate)]


def _ramping_vus(ph: RampingVUs, name: str, trace: Sequence[float]) -> list[Step]:
    starts = [ph.start_vus, *(int(st.target) for st in ph.stages)]
    return [
        Step(
            name, f"{name}#{j + 1}", st.duration, ph.max_requests, users=int(st.target), start_users=starts[j]
        )
        for j, st in enumerate(ph.stages)
    ]


def _constant_rate(ph: ConstantArrivalRate, name: str, trace: Sequence[float]) -> list[Step]:
    rate = ph.rate / ph.time_unit
    return [
        Step(
            name,
            name,
            ph.duration,
            ph.max_requests,
            rate=rate,
            arrival=ph.arrival,
            max_vus=ph.max_vus,
            on_saturation=ph.on_saturation,
        )
    ]


def _ramping_rate(ph: RampingArrivalRate, name: str, trace: Sequence[float]) -> list[Step]:
    rates = [ph.start_rate / ph.time_unit, *(st.target / ph.time_unit for st in ph.stages)]
    return [
        Step(
            name,
            f"{name}#{j + 1}",
            st.duration,
            ph.max_requests,
            rate=rates[j + 1],
            start_rate=rates[j],
            arrival=ph.arrival,
            max_vus=ph.max_vus,
            on_saturation=ph.on_saturation,
        )
        for j, st in enumerate(ph.stages)
    ]


def _trace(ph: Trace, name: str, trace: Sequence[float]) -> list[Step]:
    span = trace[-1] if trace else 0.0
    rate = len(trace) / max(span, 1e-9)  # nominal: the arrivals are the trace's
    sat = ph.on_saturation
    return [
        Step(
            name,
            name,
            span + TRACE_TAIL_S,
            len(trace),
            rate=rate,
            max_vus=ph.max_vus,
            on_saturation=sat,
            arrivals=tuple(trace),
        )
    ]


def _sweep(ph: Sweep, name: str, trace: Sequence[float]) -> list[Step]:
    if ph.vary == "concurrency":
        return [
            Step(name, f"c={int(lv)}", ph.hold, ph.requests, users=int(lv), value=lv, settle_after=ph.settle)
            for lv in ph.levels
        ]
    return [
        Step(
            name,
            f"rate={lv:g}",
            ph.hold,
            ph.requests,
            rate=lv,
            arrival=ph.arrival,
            max_vus=ph.max_vus,
            value=lv,
            settle_after=ph.settle,
        )
        for lv in ph.levels
    ]


# The steps of each kind of phase (a capacity phase is a search of its own, never steps)
_STEPS: dict[type, Callable[[Any, str, Sequence[float]], list[Step]]] = {
    ConstantVUs: _constant_vus,
    RampingVUs: _ramping_vus,
    ConstantArrivalRate: _constant_rate,
    RampingArrivalRate: _ramping_rate,
    Trace: _trace,
    Sweep: _sweep,
}


def build_plan(
    phases: Sequence[AnyPhase], targets: Sequence[str], mode: LoadMode, trace: Sequence[float] = ()
) -> list[PlanStep]:
    """The run's steps: every target in each step (parallel), or each target's steps in turn."""
    steps = plan_steps(phases, trace)
    out: list[PlanStep] = []
    if mode == "sequential":
        for t in targets:
            for pos, st in enumerate(steps):
                out.append(PlanStep(st, (t,), len(out), pos))
    else:
        for pos, st in enumerate(steps):
            out.append(PlanStep(st, tuple(targets), pos, pos))
    return out


def users_at(step: Step, n_targets: int) -> tuple[int, float]:
    """Closed loop: Locust's total user count for ``n_targets`` active targets, and its spawn rate.

    A ramping stage spreads the change in users over the stage; ``spawn_rate`` paces a constant
    phase; otherwise every user starts at once.
    """
    total = step.users * n_targets
    if step.start_users is not None and step.duration:
        return total, max(0.01, abs(step.users - step.start_users) * n_targets / step.duration)
    if step.spawn_rate:
        return total, step.spawn_rate * n_targets
    return total, float(max(total, 1))


def planned_requests(step: Step) -> int | None:
    """The most requests one target can be sent in ``step`` (None: not known before it runs, as in a
    closed loop held for a time)."""
    if step.arrivals:
        return len(step.arrivals)
    if step.open_loop and step.planned_s is not None:  # the count arrival_times draws
        n = int(round(_expected_arrivals(step)))
        return min(n, step.max_requests) if step.max_requests is not None else n
    return step.max_requests


def _expected_arrivals(step: Step) -> float:
    """An open-loop step's integral of its (linear) rate over its schedule."""
    assert step.rate is not None and step.planned_s is not None
    r0 = step.start_rate if step.start_rate is not None else step.rate
    return (r0 + step.rate) / 2 * step.planned_s


def split_share(total: int, k: int, n: int) -> int:
    """Worker k's deterministic share of ``total`` among ``n`` workers."""
    return total // n + (1 if k < total % n else 0)


def arrival_times(step: Step, seed: int) -> list[float]:
    """Seeded arrival offsets (seconds from the step start) for an open-loop step.

    Ramping rates map arrivals through the inverse of the integrated (linear) rate.
    The same seed gives the same schedule for every target: paired A/B.
    """
    assert step.rate is not None
    if step.arrivals:
        return list(step.arrivals)  # a trace: its own times, the same for every target (paired)
    # Request-count bounded: the count's own span at the step's rate, drawn like a duration's.
    dur = step.planned_s
    assert dur is not None, "an open-loop step has a duration or a request count"
    r0 = step.start_rate if step.start_rate is not None else step.rate
    r1 = step.rate
    rng = random.Random(seed)
    total = _expected_arrivals(step)
    n = planned_requests(step) or 0
    if step.arrival == "poisson":
        # A Poisson process conditioned on its count: n independent uniform points in the
        # integrated-rate domain. Gaps are exponential-like, and the phase sends exactly the
        # target number of requests, so the achieved rate is not left to sampling luck.
        us = sorted(rng.uniform(0.0, total) for _ in range(n))
    else:
        us = [(i + 0.5) * total / n for i in range(n)] if n else []
    return [_invert_linear(u, r0, r1, dur) for u in us]


def _invert_linear(u: float, r0: float, r1: float, dur: float) -> float:
    """Time t where the integral of a linear rate r0 -> r1 over [0, t] equals u."""
    a = (r1 - r0) / dur / 2
    if abs(a) < 1e-12:
        return u / r0 if r0 > 0 else dur
    disc = r0 * r0 + 4 * a * u
    return (-r0 + math.sqrt(max(0.0, disc))) / (2 * a)
