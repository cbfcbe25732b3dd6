"""Load phases, named as k6 names its executors.

- constant-vus: ``vus`` closed-loop streams per target for ``duration`` (or ``max_requests``).
- ramping-vus: ``start_vus`` then ``stages: [{duration, target}]`` (linear ramps).
- constant-arrival-rate: open loop, ``rate`` per ``time_unit``, Poisson or uniform gaps,
  at most ``max_vus`` in flight (late arrivals counted as delayed, or dropped).
- ramping-arrival-rate: open loop with ``start_rate`` and ``stages`` of target rates.
- sweep: a list of ``levels`` (concurrency, or rates with ``vary: rate``), each held for
  ``hold`` seconds or ``requests`` requests, with ``settle`` between levels.
- trace: the workload's trace (``workload: {kind: trace}``), each request at its time.
- capacity: not a schedule but a search: the highest rate (or concurrency) at which the
  scenario's SLOs hold, probe by probe (llmload/capacity/); the only phase of its scenario.

All counts are per target (each target gets the same plan: paired A/B). This module is the
scenario's syntax for load; what the phases do over time (steps, users, arrival times) is
llmload/load/plan.py.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from llmload.config.durations import Duration, Span, Timeout
from llmload.config.limits import MAX_ARRIVALS, MAX_RATE_PER_S, MAX_USERS
from llmload.config.spec import Spec


class _Phase(Spec):
    name: str | None = Field(None, description="phase name in results (default: executor and index)")
    max_requests: int | None = Field(
        None, ge=1, description="end the phase after this many requests per target"
    )

    def longest_s(self) -> float | None:
        """The longest the phase sends requests for; None where a count of requests sets it."""
        return None


class Stage(Spec):
    duration: Duration
    target: float = Field(ge=0, description="users, or arrivals per time_unit")


class ConstantVUs(_Phase):
    executor: Literal["constant-vus"]
    vus: int = Field(ge=1, le=MAX_USERS)
    duration: Span | None = None
    spawn_rate: float | None = Field(
        None, gt=0, le=MAX_RATE_PER_S, description="users started per second (default: all at once)"
    )

    @model_validator(mode="after")
    def _end(self) -> ConstantVUs:
        if self.duration is None and self.max_requests is None:
            raise ValueError("constant-vus needs duration or max_requests")
        return self

    def longest_s(self) -> float | None:
        return self.duration


class RampingVUs(_Phase):
    executor: Literal["ramping-vus"]
    start_vus: int = Field(0, ge=0, le=MAX_USERS)
    stages: list[Stage] = Field(min_length=1)

    @model_validator(mode="after")
    def _size(self) -> RampingVUs:
        if any(st.target > MAX_USERS for st in self.stages):
            raise ValueError(f"a stage's target is at most {MAX_USERS:,} users per target")
        check_stages(self.stages)
        return self

    def longest_s(self) -> float:
        return sum(st.duration for st in self.stages)


class ConstantArrivalRate(_Phase):
    executor: Literal["constant-arrival-rate"]
    rate: float = Field(gt=0, description="arrivals per time_unit")
    time_unit: Timeout = 1.0
    duration: Span
    arrival: Literal["poisson", "uniform"] = "poisson"
    max_vus: int = Field(
        1000, ge=1, le=MAX_USERS, description="in-flight cap; arrivals beyond it wait (delayed) or drop"
    )
    on_saturation: Literal["delay", "drop"] = "delay"

    @model_validator(mode="after")
    def _size(self) -> ConstantArrivalRate:
        per_s = self.rate / self.time_unit
        check_open_loop([per_s], per_s * self.duration)
        return self

    def longest_s(self) -> float:
        return self.duration


class RampingArrivalRate(_Phase):
    executor: Literal["ramping-arrival-rate"]
    start_rate: float = Field(0.0, ge=0)
    time_unit: Timeout = 1.0
    stages: list[Stage] = Field(min_length=1)
    arrival: Literal["poisson", "uniform"] = "poisson"
    max_vus: int = Field(1000, ge=1, le=MAX_USERS)
    on_saturation: Literal["delay", "drop"] = "delay"

    @model_validator(mode="after")
    def _size(self) -> RampingArrivalRate:
        rates = [self.start_rate / self.time_unit] + [st.target / self.time_unit for st in self.stages]
        arrivals = sum(
            (a + b) / 2 * st.duration for a, b, st in zip(rates, rates[1:], self.stages, strict=False)
        )
        check_open_loop(rates, arrivals)
        check_stages(self.stages)
        return self

    def longest_s(self) -> float:
        return sum(st.duration for st in self.stages)


class Sweep(_Phase):
    executor: Literal["sweep"]
    vary: Literal["concurrency", "rate"] = "concurrency"
    levels: list[float] = Field(min_length=1, description="concurrency levels, or rates per second")
    hold: Span | None = Field(None, description="time at each level")
    requests: int | None = Field(None, ge=1, description="requests per target at each level")
    settle: Duration = Field(0.0, description="pause between levels (not measured)")
    arrival: Literal["poisson", "uniform"] = "poisson"
    max_vus: int = Field(1000, ge=1, le=MAX_USERS)

    @model_validator(mode="after")
    def _hold(self) -> Sweep:
        if self.hold is None and self.requests is None:
            raise ValueError("sweep needs `hold` (duration per level) or `requests` (per level)")
        if self.vary == "concurrency" and any(lv < 1 or lv != int(lv) for lv in self.levels):
            raise ValueError("concurrency levels must be whole numbers >= 1")
        if self.vary == "concurrency" and max(self.levels) > MAX_USERS:
            raise ValueError(f"concurrency levels are at most {MAX_USERS:,} streams per target")
        if self.vary == "rate":
            check_open_loop(self.levels, max(self.levels) * (self.hold or 0.0))
        return self

    def longest_s(self) -> float | None:
        if self.hold is None:
            return None
        return len(self.levels) * self.hold + (len(self.levels) - 1) * self.settle


class Trace(_Phase):
    """Replay ``workload: {kind: trace}``: each request sent at its trace time (open loop)."""

    executor: Literal["trace"]
    max_vus: int = Field(
        1000, ge=1, le=MAX_USERS, description="in-flight cap; arrivals beyond it wait (delayed) or drop"
    )
    on_saturation: Literal["delay", "drop"] = "delay"


class Capacity(_Phase):
    """Search each target's capacity within the SLOs: bracket, bisect, repeat at the boundary.

    Each probe is a run of its own (one constant-arrival-rate or constant-vus phase per target);
    how probes are chosen and judged is llmload/capacity/search.py and judge.py.
    """

    executor: Literal["capacity"]
    vary: Literal["rate", "concurrency"] = "rate"
    start: float = Field(
        1.0, gt=0, le=MAX_USERS, description="the first probe: arrivals per second, or streams"
    )
    min: float | None = Field(None, gt=0, description="the lowest probe (default: start / 64)")
    max: float = Field(
        1024.0, gt=0, le=MAX_USERS, description="the highest probe: capacity is reported as at least this"
    )
    factor: float = Field(2.0, gt=1, description="bracketing: each probe this many times the last")
    precision: float = Field(
        0.1, gt=0, lt=1, description="bisect until the highest pass and the lowest miss are this close"
    )
    requests: int = Field(
        300, ge=10, description="measured requests per probe (a p99 needs 299 to pass clearly, judge.py)"
    )
    hold_max: Span = Field(60.0, description="the longest measured time of a probe")
    warmup: Duration | None = Field(None, description="each probe's warm-up (default: load.warmup)")
    repeat: bool = Field(True, description="probe the boundary again with another seed")
    arrival: Literal["poisson", "uniform"] = "poisson"
    max_vus: int = Field(10_000, ge=1, le=MAX_USERS, description="rate probes: in-flight cap")
    at: Literal["slo", "goodput"] = Field(
        "slo",
        description="slo: a probe passes when every SLO figure holds; goodput: when at least `attainment` "
        "of its requests met every per-request SLO with a usable answer (DistServe's goodput)",
    )
    attainment: float = Field(
        0.9, gt=0, le=1, description="at goodput: the share of requests that must be good"
    )

    @model_validator(mode="after")
    def _bounds(self) -> Capacity:
        if self.max_requests is not None:
            raise ValueError("a capacity search sets each probe's length with `requests` and `hold_max`")
        if self.max < self.start or (self.min is not None and self.min > self.start):
            raise ValueError("capacity needs min <= start <= max")
        if self.vary == "concurrency" and self.start != int(self.start):
            raise ValueError("concurrency probes start at a whole number of streams")
        return self


def check_open_loop(rates_per_s: list[float], arrivals: float) -> None:
    """An open-loop phase's rates and the arrivals it schedules (kept in memory) stay within the
    limits of llmload/base/strict.py."""
    if max(rates_per_s, default=0.0) > MAX_RATE_PER_S:
        raise ValueError(f"at most {MAX_RATE_PER_S:,.0f} arrivals per second per target")
    if arrivals > MAX_ARRIVALS:
        raise ValueError(
            f"schedules about {arrivals:,.0f} arrivals per target, more than the {MAX_ARRIVALS:,} "
            "one phase may hold: split it, or shorten it"
        )


def check_stages(stages: list[Stage]) -> None:
    """A ramping phase's stages may step (a stage of 0 s) but not all of them: 0 s in all sends nothing."""
    if not any(st.duration > 0 for st in stages):
        raise ValueError("the stages last 0 s in all: give a stage a duration")


def longest_s(phases: list[AnyPhase]) -> float | None:
    """The longest the phases send requests for, one after another; None where a count sets one."""
    spans = [ph.longest_s() for ph in phases]
    return None if None in spans else sum(s for s in spans if s is not None)


AnyPhase = ConstantVUs | RampingVUs | ConstantArrivalRate | RampingArrivalRate | Sweep | Trace | Capacity
Phase = Annotated[AnyPhase, Field(discriminator="executor")]


def phases_from_shorthand(
    users: int, spawn_rate: float | None, duration: float | None, max_requests: int | None
) -> list[AnyPhase]:
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
