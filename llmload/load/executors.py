"""Load phases, named as k6 names its executors.

- constant-vus: ``vus`` closed-loop streams per target for ``duration`` (or ``max_requests``).
- ramping-vus: ``start_vus`` then ``stages: [{duration, target}]`` (linear ramps).
- constant-arrival-rate: open loop, ``rate`` per ``time_unit``, Poisson or uniform gaps,
  at most ``max_vus`` in flight (late arrivals counted as delayed, or dropped).
- ramping-arrival-rate: open loop with ``start_rate`` and ``stages`` of target rates.
- sweep: a list of ``levels`` (concurrency, or rates with ``vary: rate``), each held for
  ``hold`` seconds or ``requests`` requests, with ``settle`` between levels.

All counts are per target (each target gets the same plan: paired A/B).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from llmload.durations import Duration


class _Phase(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str | None = Field(None, description="phase name in results (default: executor and index)")
    max_requests: int | None = Field(
        None, ge=1, description="end the phase after this many requests per target"
    )


class Stage(BaseModel):
    model_config = ConfigDict(extra="forbid")
    duration: Duration
    target: float = Field(ge=0)


class ConstantVUs(_Phase):
    executor: Literal["constant-vus"]
    vus: int = Field(ge=1)
    duration: Duration | None = None
    spawn_rate: float | None = Field(
        None, gt=0, description="users started per second (default: all at once)"
    )

    @model_validator(mode="after")
    def _end(self) -> ConstantVUs:
        if self.duration is None and self.max_requests is None:
            raise ValueError("constant-vus needs duration or max_requests")
        return self


class RampingVUs(_Phase):
    executor: Literal["ramping-vus"]
    start_vus: int = Field(0, ge=0)
    stages: list[Stage] = Field(min_length=1)


class ConstantArrivalRate(_Phase):
    executor: Literal["constant-arrival-rate"]
    rate: float = Field(gt=0, description="arrivals per time_unit")
    time_unit: Duration = 1.0
    duration: Duration
    arrival: Literal["poisson", "uniform"] = "poisson"
    max_vus: int = Field(1000, ge=1, description="in-flight cap; arrivals beyond it wait (delayed) or drop")
    on_saturation: Literal["delay", "drop"] = "delay"


class RampingArrivalRate(_Phase):
    executor: Literal["ramping-arrival-rate"]
    start_rate: float = Field(0.0, ge=0)
    time_unit: Duration = 1.0
    stages: list[Stage] = Field(min_length=1)
    arrival: Literal["poisson", "uniform"] = "poisson"
    max_vus: int = Field(1000, ge=1)
    on_saturation: Literal["delay", "drop"] = "delay"


class Sweep(_Phase):
    executor: Literal["sweep"]
    vary: Literal["concurrency", "rate"] = "concurrency"
    levels: list[float] = Field(min_length=1, description="concurrency levels, or rates per second")
    hold: Duration | None = Field(None, description="time at each level")
    requests: int | None = Field(None, ge=1, description="requests per target at each level")
    settle: Duration = Field(0.0, description="pause between levels (not measured)")
    arrival: Literal["poisson", "uniform"] = "poisson"
    max_vus: int = Field(1000, ge=1)

    @model_validator(mode="after")
    def _hold(self) -> Sweep:
        if self.hold is None and self.requests is None:
            raise ValueError("sweep needs `hold` (duration per level) or `requests` (per level)")
        if self.vary == "concurrency" and any(lv < 1 or lv != int(lv) for lv in self.levels):
            raise ValueError("concurrency levels must be whole numbers >= 1")
        return self


Phase = Annotated[
    ConstantVUs | RampingVUs | ConstantArrivalRate | RampingArrivalRate | Sweep,
    Field(discriminator="executor"),
]


def phases_from_shorthand(
    users: int, spawn_rate: float | None, duration: float | None, max_requests: int | None
) -> list[Any]:
    if duration is None and max_requests is None:
        duration = 30.0
    return [
        ConstantVUs(
            executor="constant-vus",
            vus=users,
            duration=duration,
            spawn_rate=spawn_rate,
            max_requests=max_requests,
        )
    ]


# --- plans: what each phase does over time --------------------------------


@dataclass
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
    arrival: str = "poisson"
    max_vus: int = 1000
    on_saturation: str = "delay"
    settle_after: float = 0.0
    value: float | None = None  # sweep level value

    @property
    def open_loop(self) -> bool:
        return self.rate is not None


def plan_steps(phases: list[Any]) -> list[Step]:
    """Flatten phases into steps, in run order."""
    steps: list[Step] = []
    for i, ph in enumerate(phases):
        name = ph.name or (ph.executor if len(phases) == 1 else f"{i + 1}-{ph.executor}")
        if isinstance(ph, ConstantVUs):
            steps.append(
                Step(name, name, ph.duration, ph.max_requests, users=ph.vus, spawn_rate=ph.spawn_rate)
            )
        elif isinstance(ph, RampingVUs):
            cur = ph.start_vus
            for j, st in enumerate(ph.stages):
                steps.append(
                    Step(
                        name,
                        f"{name}#{j + 1}",
                        st.duration,
                        ph.max_requests,
                        users=int(st.target),
                        start_users=cur,
                    )
                )
                cur = int(st.target)
        elif isinstance(ph, ConstantArrivalRate):
            steps.append(
                Step(
                    name,
                    name,
                    ph.duration,
                    ph.max_requests,
                    rate=ph.rate / ph.time_unit,
                    arrival=ph.arrival,
                    max_vus=ph.max_vus,
                    on_saturation=ph.on_saturation,
                )
            )
        elif isinstance(ph, RampingArrivalRate):
            cur_r = ph.start_rate / ph.time_unit
            for j, st in enumerate(ph.stages):
                r = st.target / ph.time_unit
                steps.append(
                    Step(
                        name,
                        f"{name}#{j + 1}",
                        st.duration,
                        ph.max_requests,
                        rate=r,
                        start_rate=cur_r,
                        arrival=ph.arrival,
                        max_vus=ph.max_vus,
                        on_saturation=ph.on_saturation,
                    )
                )
                cur_r = r
        elif isinstance(ph, Sweep):
            for lv in ph.levels:
                if ph.vary == "concurrency":
                    label = f"c={int(lv)}"
                    level = Step(name, label, ph.hold, ph.requests, users=int(lv), value=lv)
                else:
                    label = f"rate={lv:g}"
                    level = Step(
                        name,
                        label,
                        ph.hold,
                        ph.requests,
                        rate=lv,
                        arrival=ph.arrival,
                        max_vus=ph.max_vus,
                        value=lv,
                    )
                level.settle_after = ph.settle
                steps.append(level)
    return steps


def arrival_times(step: Step, seed: int, horizon: float | None = None) -> list[float]:
    """Seeded arrival offsets (seconds from the step start) for an open-loop step.

    Ramping rates map arrivals through the inverse of the integrated (linear) rate.
    The same seed gives the same schedule for every target: paired A/B.
    """
    assert step.rate is not None
    dur = step.duration if step.duration is not None else horizon
    r0 = step.start_rate if step.start_rate is not None else step.rate
    r1 = step.rate
    limit = step.max_requests or 10_000_000
    rng = random.Random(seed)
    out: list[float] = []
    if dur is None:
        # Request-count bounded at a constant rate.
        t = 0.0
        while len(out) < limit:
            t += rng.expovariate(r1) if step.arrival == "poisson" else 1.0 / r1
            out.append(t)
        return out
    total = (r0 + r1) / 2 * dur  # expected arrivals: integral of the rate
    n = min(limit, int(round(total)))
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
