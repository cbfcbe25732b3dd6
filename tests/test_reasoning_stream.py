"""Reasoning models on the stream client and the metrics, in process (tests/memory_transport.py).

TTFT is the first token of either kind; TTFO the first answer token (content or a tool-call delta);
reasoning and answer tokens come from the server's ``completion_tokens_details.reasoning_tokens`` when
it sends them, else from the chunk kinds; a request whose reasoning took every token is "no_answer".
The frames are shaped like vLLM's (role chunk, one chunk per token, usage at the end) and
Aphrodite's (usage on every chunk); each frame is one read, at the gap given (ms).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from llmload.client.openai_stream import build_request, stream_request
from llmload.measure.metrics import REASONING_METRICS, TargetStats
from llmload.measure.records import FAILURE_CLASSES, RequestRecord
from llmload.schema.results_model import RequestLine
from tests.memory_transport import MemoryTransport

ROLE = {"role": "assistant", "content": ""}


def ev(obj: dict[str, Any]) -> str:
    return "data: " + json.dumps(obj) + "\n\n"


def delta(d: dict[str, Any], finish: str | None = None, usage: dict[str, Any] | None = None) -> str:
    obj: dict[str, Any] = {"id": "x", "choices": [{"index": 0, "delta": d, "finish_reason": finish}]}
    if usage is not None:
        obj["usage"] = usage
    return ev(obj)


def usage(completion: int, reasoning: int | None = None) -> str:
    u: dict[str, Any] = {"prompt_tokens": 5, "completion_tokens": completion}
    if reasoning is not None:
        u["completion_tokens_details"] = {"reasoning_tokens": reasoning}
    return ev({"id": "x", "choices": [], "usage": u})


def run(frames: list[tuple[float, str]]) -> RequestRecord:
    mem = MemoryTransport(200, [t.encode() for _, t in frames], gaps_s=[d / 1000 for d, _ in frames])
    req = build_request(api="chat", model="m", prompt="hi", max_tokens=16)
    return stream_request(mem, req, RequestRecord(target="t"), clock=mem.clock)


def reasoning_stream(
    n_reason: int, n_answer: int, *, key: str = "reasoning_content", details: bool = True
) -> list[tuple[float, str]]:
    """vLLM with a reasoning parser: role chunk, reasoning chunks 10 ms apart, a 50 ms switch, answer
    chunks 20 ms apart, then usage (with the reasoning split when ``details``)."""
    frames = [(5.0, delta(ROLE))]
    for i in range(n_reason):
        frames.append((30.0 if i == 0 else 10.0, delta({key: f"r{i}"})))
    for i in range(n_answer):
        last = i == n_answer - 1
        frames.append((50.0 if i == 0 else 20.0, delta({"content": f"a{i}"}, "stop" if last else None)))
    if n_answer == 0:
        frames[-1] = (10.0, delta({key: "end"}, "length"))
    total = n_reason + n_answer
    frames.append((1.0, usage(total, n_reason if details else None)))
    frames.append((1.0, "data: [DONE]\n\n"))
    return frames


@pytest.mark.parametrize("key", ["reasoning_content", "reasoning"])
def test_ttft_ttfo_and_the_split_from_the_servers_usage(key: str) -> None:
    rec = run(reasoning_stream(3, 4, key=key))
    assert rec.status == "ok"
    assert rec.ttft_s == pytest.approx(0.035)  # the first reasoning token (5 + 30 ms)
    assert rec.ttfo_s == pytest.approx(0.035 + 0.020 + 0.050)  # the first answer token
    assert (rec.reasoning_tokens, rec.answer_tokens, rec.output_tokens) == (3, 4, 7)
    assert rec.reasoning_tokens_source == "usage" and rec.reasoning_chunks == 3
    reasoning_gaps, answer_gaps = rec.phase_gaps()
    assert reasoning_gaps == pytest.approx([0.010, 0.010])
    assert answer_gaps == pytest.approx([0.020, 0.020, 0.020])  # the 50 ms switch is in neither
    assert rec.reasoning_tpot_s == pytest.approx(0.010)
    assert rec.answer_tpot_s == pytest.approx((0.060 + 0.002) / 3)  # E2E ends at [DONE], 2 ms on
    line = RequestLine.model_validate(rec.to_json())
    assert line.ttfo_ms == pytest.approx(105.0) and line.reasoning_tokens == 3 and line.answer_tokens == 4


def test_without_usage_details_the_chunk_kinds_count() -> None:
    rec = run(reasoning_stream(5, 2, details=False))
    assert (rec.reasoning_tokens, rec.answer_tokens) == (5, 2)
    assert rec.reasoning_tokens_source == "chunks"


def test_the_servers_count_wins_and_the_chunks_show_the_difference() -> None:
    """The server says 4 reasoning tokens (one it did not stream, e.g. </think>): usage is the count,
    the chunks stay on the line, as output tokens and chunks do."""
    frames = reasoning_stream(3, 2)
    frames[-2] = (1.0, usage(6, 4))
    rec = run(frames)
    assert (rec.reasoning_tokens, rec.answer_tokens, rec.reasoning_chunks) == (4, 2, 3)


def test_a_servers_zero_beside_reasoning_chunks_is_no_count() -> None:
    """vLLM 0.32 with <think> in the prompt (DeepSeek-R1's template) says reasoning_tokens 0 while it
    streams reasoning_content: the chunks count, and a stream of reasoning only is no answer."""
    frames = reasoning_stream(3, 2)
    frames[-2] = (1.0, usage(5, 0))
    rec = run(frames)
    assert (rec.reasoning_tokens, rec.answer_tokens, rec.reasoning_tokens_source) == (3, 2, "chunks")
    only = reasoning_stream(6, 0)
    only[-2] = (1.0, usage(6, 0))
    assert run(only).status == "no_answer"
    classic = reasoning_stream(0, 3)
    classic[-2] = (1.0, usage(3, 0))
    assert run(classic).reasoning_tokens_source == "usage" and not run(classic).has_reasoning


def test_reasoning_that_used_the_whole_budget_is_no_answer() -> None:
    rec = run(reasoning_stream(6, 0))
    assert rec.status == "no_answer" and not rec.ok
    assert "no_answer" in FAILURE_CLASSES
    assert rec.ttft_s is not None and rec.ttfo_s is None
    assert (rec.reasoning_tokens, rec.answer_tokens) == (6, 0)
    assert "finish_reason length" in str(rec.error)
    no_details = run(reasoning_stream(6, 0, details=False))
    assert no_details.status == "no_answer"


def test_no_answer_chunk_is_no_answer_even_when_usage_leaves_a_token_over() -> None:
    """vLLM counts </think> in completion_tokens but not in reasoning_tokens, and streams no chunk for
    it: 5 reasoning, 6 completion and no answer chunk is still no answer."""
    frames = reasoning_stream(5, 0)
    frames[-2] = (1.0, usage(6, 5))
    rec = run(frames)
    assert rec.status == "no_answer" and rec.ttfo_s is None


def test_a_closing_chunk_without_a_token_is_no_answer_token() -> None:
    """OpenAI-style close: an empty content chunk with finish_reason that usage says carried no token."""
    frames = reasoning_stream(4, 0)
    frames[-3] = (10.0, delta({"reasoning_content": "r3"}))
    frames.insert(-2, (1.0, delta({"content": ""}, "length")))
    rec = run(frames)
    assert rec.chunks == 4 and rec.status == "no_answer" and rec.ttfo_s is None


def test_aphrodite_usage_on_every_chunk_weighs_reasoning_chunks() -> None:
    def u(n: int) -> dict[str, int]:
        return {"prompt_tokens": 5, "completion_tokens": n}

    frames = [
        (10.0, delta({"reasoning_content": "ab"}, usage=u(2))),
        (10.0, delta({"reasoning_content": "c"}, usage=u(3))),
        (10.0, delta({"content": "xyz"}, "stop", usage=u(6))),
        (1.0, "data: [DONE]\n\n"),
    ]
    rec = run(frames)
    assert rec.status == "ok" and (rec.reasoning_tokens, rec.answer_tokens) == (3, 3)
    assert rec.reasoning_chunks == 2


def test_a_tool_call_delta_is_an_answer_token() -> None:
    call = {"tool_calls": [{"index": 0, "function": {"name": "f", "arguments": "{"}}]}
    frames = [
        (10.0, delta({"reasoning_content": "hm"})),
        (10.0, delta(call, "tool_calls")),
        (1.0, "data: [DONE]\n\n"),
    ]
    rec = run(frames)
    assert rec.status == "ok" and rec.ttfo_s == pytest.approx(0.020) and rec.answer_tokens == 1


def test_a_classic_stream_has_ttfo_equal_to_ttft_and_no_reasoning_keys() -> None:
    rec = run(reasoning_stream(0, 3))
    assert rec.status == "ok" and rec.ttfo_s == rec.ttft_s and not rec.has_reasoning
    line = rec.to_json()
    assert "ttfo_ms" not in line and "reasoning_tokens" not in line


def test_metrics_fold_merge_and_show_reasoning_only_when_there_was_some() -> None:
    classic = TargetStats()
    classic.add(run(reasoning_stream(0, 3)))
    assert not set(REASONING_METRICS) & set(classic.latency_block())
    assert classic.histograms["ttfo"].count == 1  # kept: a later reasoning request merges with it

    a, b = TargetStats(), TargetStats()
    a.add(run(reasoning_stream(3, 4)))
    b.add(run(reasoning_stream(6, 0)))
    merged = TargetStats.from_wire(a.to_wire())
    merged.merge(TargetStats.from_wire(b.to_wire()))
    merged.merge(classic)
    assert merged.by_class["no_answer"] == 1 and merged.failures == 1
    assert (merged.reasoning_requests, merged.reasoning_tokens, merged.answer_tokens) == (2, 9, 4)
    block = merged.latency_block()
    assert block["ttfo"]["count"] == 2  # the ok requests: the reasoning one and the classic one
    assert block["itl_reasoning"]["count"] == 2 and block["itl_answer"]["count"] == 3
    assert block["tpot_reasoning"]["count"] == 1 and block["tpot_answer"]["count"] == 1
    assert block["ttfo"]["max"] == pytest.approx(105.0)
