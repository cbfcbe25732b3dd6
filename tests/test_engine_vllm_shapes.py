"""Tool calls, structured output and the Responses API against a real vLLM server (the CPU build).

The tiny local Llama has random weights, so it writes no sensible call or document by itself; vLLM
enforces the shape with structured output: a named ``tool_choice`` and ``response_format:
json_schema`` constrain every token to the schema. The schemas here are enums and the server allows
no free whitespace, so each document is short and ends well within max_tokens (with whitespace
allowed, the random model pads the document with spaces until max_tokens cuts it: invalid_output,
which is what llmload reports then). What is checked is what llmload adds: the tool-call deltas
count as answer tokens, each answer is judged valid, output tokens equal the server's usage, and the
Responses API's event stream (``POST /v1/responses``) gives the same figures as chat.
"""

from __future__ import annotations

import pytest

from llmload.client.openai_stream import build_request, stream_request
from llmload.client.transport import GeventTransport
from llmload.config.workload_spec import SyntheticWorkload
from llmload.load.workload import RequestSpec
from llmload.locust.sessions import agent_session, mark_turn
from llmload.measure.records import RequestRecord
from tests.engines import SERVED, start_vllm, tiny_model

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]
CITY = {
    "type": "object",
    "properties": {"city": {"enum": ["Paris", "Rome", "Oslo"]}, "unit": {"enum": ["c", "f"]}},
    "required": ["city", "unit"],
    "additionalProperties": False,
}
TOOLS = {
    "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": CITY}}],
    "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
}
JSON = {"response_format": {"type": "json_schema", "json_schema": {"name": "city", "schema": CITY}}}


def _requests(base_url: str, api: str, fields: dict[str, object], n: int = 4) -> list[RequestRecord]:
    wl = SyntheticWorkload.model_validate(fields)
    shape = wl.answer_shape()
    tr = GeventTransport(base_url)
    out = []
    for i in range(n):
        req = build_request(
            api=api, model=SERVED, prompt=f"weather {i}", max_tokens=48, extra_body=wl.body_fields()
        )
        out.append(stream_request(tr, req, RequestRecord(target=api, index=i), shape=shape))
    tr.close()
    return out


@pytest.fixture(scope="module")
def vllm(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    tmp = tmp_path_factory.mktemp("vllm-shapes")
    # A named tool_choice needs a parser (pythonic needs no special token); without any-whitespace the
    # grammar leaves a random model no room to pad a document with spaces until max_tokens.
    args = ["--enable-auto-tool-choice", "--tool-call-parser", "pythonic"]
    args += ["--structured-outputs-config", '{"backend": "xgrammar", "disable_any_whitespace": true}']
    with start_vllm(tiny_model(tmp), extra_args=args) as server:
        yield server


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_named_tool_calls_are_streamed_counted_and_valid(vllm, api: str) -> None:  # type: ignore[no-untyped-def]
    for rec in _requests(vllm.base_url, api, TOOLS):
        assert rec.status == "ok", (rec.status, rec.error)
        assert (rec.answer_check, rec.answer_valid, rec.tool_calls) == ("tool_call", True, 1)
        assert rec.output_tokens_source == "usage" and rec.output_tokens >= rec.chunks > 0
        assert rec.ttft_s is not None and rec.ttfo_s is not None and rec.ttfo_s >= rec.ttft_s


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_json_schema_answers_are_valid_and_counted_as_the_server_counts(vllm, api: str) -> None:  # type: ignore[no-untyped-def]
    for rec in _requests(vllm.base_url, api, JSON):
        assert rec.status == "ok", (rec.status, rec.error)
        assert (rec.answer_check, rec.answer_valid, rec.tool_calls) == ("json_schema", True, 0)
        assert rec.output_tokens_source == "usage" and rec.output_tokens >= rec.chunks > 0
        assert rec.finish_reason == "stop" and rec.answer_tokens == rec.output_tokens


def test_the_responses_api_gives_the_same_figures_as_chat(vllm) -> None:  # type: ignore[no-untyped-def]
    """Free text, greedy, the same prompts: the same token counts through both APIs, from each one's usage."""
    chat = _requests(vllm.base_url, "chat", {"temperature": 0.0}, n=3)
    resp = _requests(vllm.base_url, "responses", {"temperature": 0.0}, n=3)
    for c, r in zip(chat, resp, strict=True):
        assert c.status == r.status == "ok", (c.error, r.error)
        assert r.output_tokens_source == "usage" and r.output_tokens == c.output_tokens
        assert r.prompt_tokens == c.prompt_tokens and r.finish_reason == c.finish_reason
        assert (
            r.ttft_s is not None
            and r.e2e_s is not None
            and r.e2e_s >= r.ttft_s
            and len(r.itl_s) == r.chunks - 1
        )


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_an_agent_loop_sends_each_call_and_its_result_back(vllm, api: str) -> None:  # type: ignore[no-untyped-def]
    """A named tool_choice calls on every turn, so a 3-round session runs out of rounds; the server's
    prompt grows each turn by the calls and results llmload sent back (its own prompt_tokens)."""
    wl = SyntheticWorkload.model_validate({**TOOLS, "agent": {"rounds": 3, "tool_result": '{"t": 21}'}})
    assert wl.agent is not None
    tr = GeventTransport(vllm.base_url)
    recs: list[RequestRecord] = []

    def send(spec: RequestSpec) -> RequestRecord:
        req = build_request(
            api=api, model=SERVED, prompt=spec.messages, max_tokens=48, extra_body=wl.body_fields()
        )
        rec = stream_request(tr, req, RequestRecord(target=api, index=spec.index), shape=wl.answer_shape())
        mark_turn(rec, spec)
        recs.append(rec)
        return rec

    agent_session(
        RequestSpec(5, [{"role": "user", "content": "weather?"}], 48, 2), wl.agent, send, lambda: True
    )
    tr.close()
    assert [(r.index, r.turn, r.status, r.tool_calls, r.answer_valid) for r in recs] == [
        (15 + t, t, "ok", 1, True) for t in range(3)
    ], [(r.status, r.error) for r in recs]
    assert [r.session_end for r in recs] == [None, None, "rounds"]
    prompts = [r.prompt_tokens or 0 for r in recs]
    assert prompts[0] < prompts[1] < prompts[2], prompts
