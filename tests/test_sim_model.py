"""The engine model on its own clock: analytic checks, no sockets, no wall clock."""

from __future__ import annotations

import random

import pytest

from llmload.sim.engine import EngineCore, Sequence
from llmload.sim.offline import closed_loop, fixed_plan, simulate
from llmload.sim.profiles import SimProfile, load_profile
from llmload.sim.tokens import chat_token_ids, plan_request


def ids(n: int, salt: int = 0) -> list[int]:
    r = random.Random(salt)
    return [r.randrange(1 << 30) for _ in range(n)]


def with_step(p: SimProfile, **step: float) -> SimProfile:
    return p.model_copy(update={"step": p.step.model_copy(update=step)})


def test_single_stream_ttft_is_prefill_step_and_itl_is_one_seq_step() -> None:
    p = with_step(load_profile("test-fast-a"), base_ms=5.0, per_decode_seq_ms=0.5, per_prefill_token_ms=0.1,
                  per_context_ktoken_ms=2.0)  # fmt: skip
    prompt = 200
    run = simulate(p, [(0.0, ids(prompt), fixed_plan(20))])
    (r,) = run.requests
    s = p.step
    prefill_ms = s.base_ms + s.per_prefill_token_ms * prompt + s.per_context_ktoken_ms * prompt / 1000
    assert r.output_tokens == 20
    assert r.ttft == pytest.approx(prefill_ms / 1000, abs=1e-9)
    # decode step i reads the KV of the prompt and the tokens so far (prompt + i), plus the new one
    for i, gap in enumerate(r.itl, start=1):
        ctx = prompt + i
        ms = s.base_ms + s.per_decode_seq_ms + s.per_context_ktoken_ms * ctx / 1000
        assert gap == pytest.approx(ms / 1000, abs=1e-9)


def test_chunked_prefill_splits_long_prompt_over_steps() -> None:
    p = load_profile("test-fast-a").model_copy(update={"max_num_batched_tokens": 256})
    run = simulate(p, [(0.0, ids(1000), fixed_plan(3))])
    # 1000 prompt tokens at 256 per step: 4 prefill steps, the 4th yields the first token
    assert [st.prefill_tokens for st in run.steps[:4]] == [256, 256, 256, 232]
    assert run.requests[0].token_times[0] == run.steps[3].end


def test_throughput_rises_with_batch_and_saturates_at_max_num_seqs() -> None:
    p = load_profile("test-fast-a").model_copy(update={"max_num_seqs": 16})
    tput = {}
    for c in (1, 2, 4, 8, 16, 32, 64):
        run = closed_loop(p, c, requests=4 * c, prompt=lambda i: ids(40, i), output_tokens=64)
        tput[c] = run.throughput
        assert max(st.decode_seqs + (st.prefill_tokens > 0) for st in run.steps) <= 16
    assert tput[1] < tput[2] < tput[4] < tput[8] < tput[16]
    assert tput[32] == pytest.approx(tput[16], rel=0.03)
    assert tput[64] == pytest.approx(tput[16], rel=0.03)
    # beyond max_num_seqs the extra users only wait: queue time grows
    run = closed_loop(p, 64, requests=64, prompt=lambda i: ids(40, i), output_tokens=64)
    assert max(r.ttft for r in run.requests) > 10 * min(r.ttft for r in run.requests)


def test_kv_overflow_preempts_newest_and_counts_every_preemption() -> None:
    p = load_profile("test-tiny-kv")
    assert p.blocks == 64
    arrivals = [(0.0, ids(100, i), fixed_plan(300)) for i in range(8)]  # 8 x 400 tokens > 1,024 slots
    run = simulate(p, arrivals)
    events = sum(len(st.preempted) for st in run.steps)
    assert events > 0
    assert run.engine.preemptions_total == events == sum(r.preemptions for r in run.requests)
    assert all(r.output_tokens == 300 and r.finish_reason == "length" for r in run.requests)
    # the first request (oldest) is never the victim: newest running sequences go first
    assert run.requests[0].preemptions == 0
    assert run.engine.kv.usage == 0.0 or run.engine.kv.available == p.blocks


def test_preempted_sequence_goes_to_front_and_recomputes_prompt_plus_output() -> None:
    p = load_profile("test-tiny-kv")
    core = EngineCore(p)
    seqs = [Sequence(i, ids(200, i), fixed_plan(400), 0.0) for i in range(4)]
    for s in seqs:
        core.add(s)
    while core.preemptions_total == 0:
        assert core.step() is not None
    victim = core.waiting[0]
    assert victim.preemptions == 1 and victim.computed == 0
    # it recomputes prompt + generated tokens when admitted again
    need, out_before = victim.num_tokens, victim.output
    assert out_before > 0
    first_prefill = None
    while victim.computed < need and victim.preemptions == 1:
        st = core.step()
        assert st is not None
        if first_prefill is None and victim in core.running:
            first_prefill = st.prefill_tokens
    if victim.preemptions == 1:  # recomputed prompt + output in prefill, then sampled the next token
        assert first_prefill is not None and first_prefill >= min(need, p.max_num_batched_tokens) - 16 * 12
        assert victim.output == out_before + 1


def test_repeated_prefix_raises_cache_hits_and_lowers_ttft() -> None:
    p = with_step(load_profile("test-fast-a"), per_prefill_token_ms=0.05)
    system = ids(512, 99)
    shared = [(i * 1.0, system + ids(20, i), fixed_plan(4)) for i in range(5)]
    unique = [(i * 1.0, ids(532, 1000 + i), fixed_plan(4)) for i in range(5)]
    a, b = simulate(p, shared), simulate(p, unique)
    assert a.engine.prefix_hits_total >= 4 * 512
    assert b.engine.prefix_hits_total == 0
    assert a.engine.prefix_queries_total == b.engine.prefix_queries_total == 5 * 532
    assert a.requests[0].ttft == pytest.approx(b.requests[0].ttft)
    for later in a.requests[1:]:
        assert later.ttft < 0.5 * a.requests[0].ttft
        assert later.cached_tokens == 512
    off = simulate(p.model_copy(update={"prefix_caching": False}), shared)
    assert off.engine.prefix_hits_total == 0
    assert off.requests[-1].ttft == pytest.approx(off.requests[0].ttft)


def test_cached_blocks_are_evicted_lru_when_pool_is_short() -> None:
    p = load_profile("test-tiny-kv")
    # 40 distinct 200-token prompts one after another: each leaves 12 cached blocks; pool is 64
    run = simulate(p, [(i * 1.0, ids(200, i), fixed_plan(2)) for i in range(40)])
    assert len(run.requests) == 40 and all(r.output_tokens == 2 for r in run.requests)
    assert len(run.engine.kv.refs) <= p.blocks


def test_abort_frees_blocks_at_once() -> None:
    core = EngineCore(load_profile("test-fast-a"))
    s = Sequence(1, ids(300), fixed_plan(100), 0.0)
    core.add(s)
    core.step()
    assert core.kv.usage > 0
    core.abort(s)
    assert not core.has_work()
    assert core.kv.available == core.kv.num_blocks


def test_same_seed_same_counts_and_step_times() -> None:
    p = load_profile("test-fast-b")

    def run(seed: int) -> tuple[list[int], list[float]]:
        arrivals = []
        for i in range(30):
            prompt = chat_token_ids([("user", f"question {i} " + "word " * (i % 7))])
            plan = plan_request(max_tokens=200, min_tokens=0, ignore_eos=False, dist=p.output_length,
                                fault_rate=0.0, sim_seed=seed, request_seed=None, digest=i)  # fmt: skip
            arrivals.append((i * 0.01, prompt, plan))
        res = simulate(p, arrivals)
        return [r.output_tokens for r in res.requests], [st.duration for st in res.steps]

    a, b, c = run(1), run(1), run(2)
    assert a == b
    assert a[0] != c[0]
    assert len(set(a[0])) > 5  # natural stops vary


def test_natural_stop_honours_min_and_max_tokens() -> None:
    p = load_profile("test-fast-a")
    for d in range(200):
        plan = plan_request(max_tokens=60, min_tokens=10, ignore_eos=False, dist=p.output_length,
                            fault_rate=0.0, sim_seed=0, request_seed=None, digest=d)  # fmt: skip
        assert 10 <= plan.output_tokens <= 60
        assert plan.finish_reason == ("length" if plan.output_tokens == 60 else "stop")
    forced = plan_request(max_tokens=60, min_tokens=0, ignore_eos=True, dist=p.output_length,
                          fault_rate=0.0, sim_seed=0, request_seed=None, digest=1)  # fmt: skip
    assert (forced.output_tokens, forced.finish_reason) == (60, "length")


def test_fault_injection_is_seeded_and_aborts_before_the_planned_token() -> None:
    p = load_profile("test-fast-a")
    plans = [plan_request(max_tokens=50, min_tokens=0, ignore_eos=True, dist=p.output_length, fault_rate=0.3,
                          sim_seed=3, request_seed=7, digest=d) for d in range(300)]  # fmt: skip
    faulty = [pl for pl in plans if pl.fault_at is not None]
    assert 0.2 < len(faulty) / len(plans) < 0.4
    run = simulate(p, [(0.0, ids(10, i), pl) for i, pl in enumerate(faulty[:10])])
    for r, pl in zip(run.requests, faulty[:10], strict=True):
        assert r.fault and r.output_tokens == pl.fault_at
