"""Run the engine model without a host clock: deterministic experiments, tests and calibration.

``simulate`` replays a list of arrivals; ``closed_loop`` keeps ``concurrency`` users each sending
their next request the moment the previous one ends (plus ``gap_s``).  Both return per-request
timings on the model clock.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass, field

from llmload.sim.engine import EngineCore, Sequence, StepResult
from llmload.sim.profiles import SimProfile
from llmload.sim.tokens import Plan


@dataclass
class SeqResult:
    req_id: int
    arrival: float
    prompt_tokens: int
    output_tokens: int = 0
    token_times: list[float] = field(default_factory=list)
    finish_reason: str | None = None
    fault: bool = False
    cached_tokens: int = 0
    preemptions: int = 0

    @property
    def ttft(self) -> float:
        return self.token_times[0] - self.arrival

    @property
    def itl(self) -> list[float]:
        t = self.token_times
        return [b - a for a, b in zip(t, t[1:], strict=False)]

    @property
    def e2e(self) -> float:
        return self.token_times[-1] - self.arrival


@dataclass
class RunResult:
    requests: list[SeqResult]
    steps: list[StepResult]
    engine: EngineCore

    @property
    def output_tokens(self) -> int:
        return sum(r.output_tokens for r in self.requests)

    @property
    def duration(self) -> float:
        return self.steps[-1].end - self.steps[0].start if self.steps else 0.0

    @property
    def throughput(self) -> float:
        """Output tokens per second of model time."""
        return self.output_tokens / self.duration if self.duration else 0.0


def fixed_plan(output_tokens: int, finish_reason: str = "length", fault_at: int | None = None) -> Plan:
    return Plan(output_tokens, finish_reason, fault_at, 0)


Arrival = tuple[float, list[int], Plan]  # (time, prompt token ids, plan)


def _run(
    profile: SimProfile,
    next_arrivals: Callable[[float, list[SeqResult]], list[Arrival]],
    initial: list[Arrival],
    max_steps: int,
) -> RunResult:
    core = EngineCore(profile, clock=0.0)
    pending: list[tuple[float, int, list[int], Plan]] = []
    results: list[SeqResult] = []
    by_seq: dict[int, SeqResult] = {}
    seq_no = 0

    def push(items: list[Arrival]) -> None:
        nonlocal seq_no
        for t, ids, plan in items:
            heapq.heappush(pending, (t, seq_no, ids, plan))
            seq_no += 1

    push(initial)
    steps: list[StepResult] = []
    while (pending or core.has_work()) and len(steps) < max_steps:
        if not core.has_work():
            core.clock = max(core.clock, pending[0][0])
        while pending and pending[0][0] <= core.clock:
            t, n, ids, plan = heapq.heappop(pending)
            res = SeqResult(n, t, len(ids))
            results.append(res)
            by_seq[n] = res
            core.add(Sequence(n, ids, plan, t))
        step = core.step()
        if step is None:
            if not pending:
                break  # stuck: nothing can be scheduled and nothing will arrive
            core.clock = max(core.clock, pending[0][0])
            continue
        steps.append(step)
        ended: list[SeqResult] = []
        for e in step.emissions:
            res = by_seq[e.seq.req_id]
            if e.fault:
                res.fault = True
            else:
                res.output_tokens += 1
                res.token_times.append(step.end)
            if e.finish_reason or e.fault:
                res.finish_reason = e.finish_reason
                res.cached_tokens = e.seq.cached_tokens
                res.preemptions = e.seq.preemptions
                ended.append(res)
        if ended:
            push(next_arrivals(step.end, ended))
    return RunResult(results, steps, core)


def simulate(profile: SimProfile, arrivals: list[Arrival], max_steps: int = 1_000_000) -> RunResult:
    """Replay ``arrivals`` (time, prompt ids, plan) through the engine."""
    return _run(profile, lambda _t, _ended: [], arrivals, max_steps)


def closed_loop(
    profile: SimProfile,
    concurrency: int,
    requests: int,
    prompt: Callable[[int], list[int]],
    output_tokens: int,
    gap_s: float = 0.0,
    max_steps: int = 1_000_000,
) -> RunResult:
    """``concurrency`` users, each sending a new request when its last one ends, ``requests`` in all."""
    sent = 0

    def make(t: float, k: int) -> list[Arrival]:
        nonlocal sent
        k = min(k, requests - sent)
        out = [(t, prompt(sent + i), fixed_plan(output_tokens)) for i in range(k)]
        sent += k
        return out

    return _run(profile, lambda t, ended: make(t + gap_s, len(ended)), make(0.0, concurrency), max_steps)
