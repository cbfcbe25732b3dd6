"""A scenario's load plan in words, for the web UI's start form (it replaces Locust's users and ramp fields).

    plan_words(scenario)   # ["targets: vllm, aphrodite (in parallel)", "1. 8 users per target for 30 s", ...]

The steps are plan.py's, so the words say what the run will do, not what the YAML spelled.
"""

from __future__ import annotations

from llmload.config.executors import Capacity, Trace
from llmload.config.scenario import Scenario
from llmload.load.plan import Step, plan_steps

MAX_STEPS = 12  # a long sweep is summed up after this many lines


def _secs(s: float) -> str:
    if s >= 120 and s % 60 == 0:
        return f"{s / 60:g} min"
    return f"{s:g} s"


def _how_long(step: Step) -> str:
    parts = [f"for {_secs(step.duration)}"] if step.duration is not None else []
    if step.max_requests is not None:
        parts.append(f"{'at most ' if parts else 'until '}{step.max_requests:,} requests per target")
    return ", ".join(parts)


def step_words(step: Step) -> str:
    """One step: its users or arrival rate per target, and how long it lasts."""
    if step.arrivals:
        what = f"replay {len(step.arrivals):,} trace arrivals per target"
    elif step.open_loop:
        rate = (
            f"{step.rate:g} req/s"
            if step.start_rate is None
            else f"{step.start_rate:g} -> {step.rate:g} req/s"
        )
        what = f"{rate} per target ({step.arrival} arrivals)"
    elif step.start_users is not None and step.start_users != step.users:
        what = f"ramp {step.start_users} -> {step.users} users per target"
    else:
        what = f"{step.users} user{'s' if step.users != 1 else ''} per target"
    words = " ".join(x for x in (what, _how_long(step)) if x)
    return words + (f", then {_secs(step.settle_after)} pause" if step.settle_after else "")


def plan_words(sc: Scenario) -> list[str]:
    """The plan as lines: targets and mode, each step, then warm-up and stop grace."""
    load = sc.load
    names = ", ".join(t.name for t in sc.targets)
    mode = "one after another" if load.mode == "sequential" else "in parallel"
    lines = [f"targets: {names}" + (f" ({mode})" if len(sc.targets) > 1 else "")]
    if any(isinstance(p, Capacity) for p in load.phases):
        return [*lines, "a capacity search (runs headless: llmload capacity)"]
    if any(isinstance(p, Trace) for p in load.phases) and len(load.phases) == 1:
        return [*lines, "replay the workload's trace (its arrival times)", _tail(sc)]
    steps = plan_steps(load.phases)
    for i, st in enumerate(steps[:MAX_STEPS]):
        label = "" if st.level == st.phase and len(steps) == 1 else f" ({st.level})"
        lines.append(f"{i + 1}. {step_words(st)}{label}")
    if len(steps) > MAX_STEPS:
        lines.append(f"... and {len(steps) - MAX_STEPS} more steps")
    return [*lines, _tail(sc)]


def _tail(sc: Scenario) -> str:
    load = sc.load
    warm = f"the first {_secs(load.warmup)} not measured (warm-up)" if load.warmup else "no warm-up"
    return f"{warm}; at the plan's end, streams in flight get {_secs(load.stop_grace)} to finish (Stop cuts them)"
