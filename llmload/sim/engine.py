"""The engine model: step-based continuous batching in the manner of vLLM's V1 scheduler.

It knows nothing about sockets or wall clocks: :meth:`EngineCore.step` schedules one step at the
model time ``clock``, advances ``clock`` by the step time and returns what each sequence produced.
The live server paces steps against the host clock; :mod:`llmload.sim.offline` runs them back to back.

Per step: running sequences first (oldest first; a decode is one token, an unfinished chunked prefill
continues within the token budget); when one needs a KV block and none is free, the newest running
sequence is preempted (recompute: its blocks are freed and it goes to the FRONT of the waiting queue).
Then, if nothing was preempted, waiting sequences are admitted FCFS while the token budget,
``max_num_seqs`` and free blocks allow (prefix-cache hits skip their prefill).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from llmload.sim.kvcache import BlockManager, SeqBlocks, block_hashes
from llmload.sim.profiles import SimProfile
from llmload.sim.tokens import Plan


@dataclass(eq=False)
class Sequence:
    req_id: int
    prompt_ids: list[int]
    plan: Plan
    arrival: float
    hashes: list[int] = field(default_factory=list)
    output: int = 0  # tokens generated so far
    computed: int = 0  # tokens whose KV is computed
    blocks: SeqBlocks = field(default_factory=SeqBlocks)
    first_scheduled: float | None = None
    first_token: float | None = None
    cached_tokens: int = 0  # prefix-cache hit tokens at first admission
    preemptions: int = 0
    done: bool = False
    ctx: Any = None  # the server's per-request state

    prompt_len: int = 0  # set from prompt_ids
    num_tokens: int = 0  # prompt + output (kept as a field: read several times per step)

    def __post_init__(self) -> None:
        self.prompt_len = len(self.prompt_ids)
        self.num_tokens = self.prompt_len + self.output


@dataclass
class Emission:
    """What one sequence produced in a step."""

    seq: Sequence
    token_index: int  # index of the new token (-1 when none)
    finish_reason: str | None = None  # "length" | "stop" when it ended normally
    fault: bool = False  # aborted by fault injection instead of producing token_index


@dataclass
class StepResult:
    start: float
    end: float
    decode_seqs: int
    prefill_tokens: int
    context_tokens: int
    emissions: list[Emission]
    preempted: list[Sequence]

    @property
    def duration(self) -> float:
        return self.end - self.start


class EngineCore:
    def __init__(self, profile: SimProfile, clock: float = 0.0) -> None:
        self.profile = profile
        self.clock = clock
        self.kv = BlockManager(profile.blocks, profile.kv.block_size, profile.prefix_caching)
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        # counters (engine totals, read by telemetry)
        self.preemptions_total = 0
        self.prompt_tokens_total = 0
        self.prompt_cached_tokens_total = 0  # of those, prefix-cache hits at the first admission
        self.generation_tokens_total = 0
        self.prefix_queries_total = 0
        self.prefix_hits_total = 0
        self.steps_total = 0
        self.busy_seconds_total = 0.0

    # -- requests -------------------------------------------------------------------------------
    def add(self, seq: Sequence) -> None:
        if self.profile.prefix_caching and not seq.hashes:
            seq.hashes = block_hashes(seq.prompt_ids, self.kv.block_size)
        self.waiting.append(seq)

    def abort(self, seq: Sequence) -> None:
        """Drop a sequence (client gone): its KV blocks are free at once."""
        if seq.done:
            return
        seq.done = True
        if seq in self.running:
            self.running.remove(seq)
        else:
            try:
                self.waiting.remove(seq)
            except ValueError:
                pass
        self.kv.release(seq.blocks)

    def has_work(self) -> bool:
        return bool(self.running or self.waiting)

    # -- one step -------------------------------------------------------------------------------
    def _preempt(self, seq: Sequence) -> None:
        self.kv.release(seq.blocks)
        seq.computed = 0
        seq.preemptions += 1
        self.preemptions_total += 1
        self.waiting.appendleft(seq)

    def _schedule_running(
        self, budget: int, out: list[tuple[Sequence, int]], preempted: list[Sequence]
    ) -> int:
        kv = self.kv
        i = 0
        while i < len(self.running) and budget > 0:
            seq = self.running[i]
            num_new = min(seq.num_tokens - seq.computed, budget)
            while not kv.allocate(seq.blocks, seq.computed + num_new):
                victim = self.running.pop()
                self._preempt(victim)
                preempted.append(victim)
                if victim is seq:
                    return budget
            out.append((seq, num_new))
            budget -= num_new
            i += 1
        return budget

    def _admit_waiting(self, budget: int, out: list[tuple[Sequence, int]]) -> None:
        kv, p = self.kv, self.profile
        while self.waiting and budget > 0 and len(self.running) < p.max_num_seqs:
            seq = self.waiting[0]
            hits = kv.lookup(seq.hashes, seq.num_tokens - 1)
            hit_hashes = seq.hashes[:hits]
            computed = hits * kv.block_size
            num_new = min(seq.num_tokens - computed, budget)
            revived = sum(1 for h in hit_hashes if kv.refs[h] == 0)
            fresh = kv.blocks_for(computed + num_new) - hits
            if fresh + revived > kv.available:
                break
            self.waiting.popleft()
            kv.take_cached(seq.blocks, hit_hashes)
            kv.allocate(seq.blocks, computed + num_new)
            if p.prefix_caching:
                self.prefix_queries_total += seq.num_tokens
                self.prefix_hits_total += computed
            seq.computed = computed
            if seq.first_scheduled is None:
                seq.first_scheduled = self.clock
                seq.cached_tokens = computed
            self.running.append(seq)
            out.append((seq, num_new))
            budget -= num_new

    def step_time(self, decode_seqs: int, prefill_tokens: int, context_tokens: int) -> float:
        s = self.profile.step
        ms = (
            s.base_ms
            + s.per_decode_seq_ms * decode_seqs
            + s.per_prefill_token_ms * prefill_tokens
            + s.per_context_ktoken_ms * context_tokens / 1000.0
        )
        return ms / 1000.0

    def step(self) -> StepResult | None:
        """Run one step at ``clock``; None when there is nothing to do."""
        if not self.has_work():
            return None
        scheduled: list[tuple[Sequence, int]] = []
        preempted: list[Sequence] = []
        budget = self._schedule_running(self.profile.max_num_batched_tokens, scheduled, preempted)
        if not preempted:
            self._admit_waiting(budget, scheduled)
        if not scheduled:
            return None
        decode = prefill = context = 0
        for seq, n in scheduled:
            if n == 1 and seq.output > 0 and seq.computed == seq.num_tokens - 1:
                decode += 1
            else:
                prefill += n
            context += seq.computed + n
        start = self.clock
        end = start + self.step_time(decode, prefill, context)
        self.clock = end
        self.steps_total += 1
        self.busy_seconds_total += end - start
        emissions: list[Emission] = []
        finished: list[Sequence] = []
        kv = self.kv
        for seq, n in scheduled:
            seq.computed += n
            if seq.hashes:
                kv.commit(seq.blocks, seq.hashes, seq.computed)
            if seq.computed < seq.num_tokens:
                continue  # chunked prefill continues next step
            index = seq.output
            plan = seq.plan
            if plan.fault_at is not None and index >= plan.fault_at:
                emissions.append(Emission(seq, -1, fault=True))
                finished.append(seq)
                continue
            seq.output += 1
            seq.num_tokens += 1
            self.generation_tokens_total += 1
            if index == 0:
                seq.first_token = end
                self.prompt_tokens_total += seq.prompt_len
                self.prompt_cached_tokens_total += seq.cached_tokens
            if seq.output >= plan.output_tokens:
                emissions.append(Emission(seq, index, plan.finish_reason))
                finished.append(seq)
            else:
                emissions.append(Emission(seq, index))
        for seq in finished:
            seq.done = True
            self.running.remove(seq)
            kv.release(seq.blocks)
        return StepResult(start, end, decode, prefill, context, emissions, preempted)
