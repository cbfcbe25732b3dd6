"""Shaped answers (issue 25: tools, response_format, the Responses API), in process: the judge, the
stream reader on chat tool-call deltas and on Responses events, and the scenario's bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmload.client.openai_stream import build_request
from llmload.client.sse import StreamState
from llmload.config.answer_check import JSON_OBJECT, JSON_SCHEMA, TOOL_CALL, AnswerShape, ToolCall
from llmload.config.workload_spec import SyntheticWorkload
from llmload.measure.records import FAILURE_CLASSES, RequestRecord
from tests.test_bad_input import GOOD, run_bad_input

WEATHER = {
    "type": "object",
    "properties": {"city": {"enum": ["Paris", "Rome"]}, "days": {"type": "integer", "maximum": 7}},
    "required": ["city"],
    "additionalProperties": False,
}
TOOL_SHAPE = AnswerShape(TOOL_CALL, tools={"get_weather": WEATHER}, call_required=True)


@pytest.mark.parametrize(
    ("shape", "content", "calls", "finish", "problem"),
    [
        (AnswerShape(JSON_OBJECT), '{"a": 1}', [], "stop", None),
        (AnswerShape(JSON_OBJECT), "[1, 2]", [], "stop", "not an object"),
        (AnswerShape(JSON_OBJECT), '{"a": 1', [], "length", "not JSON"),
        (AnswerShape(JSON_SCHEMA, schema=WEATHER), ' {"city": "Rome"} ', [], "stop", None),
        (
            AnswerShape(JSON_SCHEMA, schema=WEATHER),
            '{"city": "Oslo"}',
            [],
            "stop",
            "city: 'Oslo' is not one of",
        ),
        (AnswerShape(JSON_SCHEMA, schema=WEATHER), '{"town": "Rome"}', [], "stop", "'city' is a required"),
        (TOOL_SHAPE, "", [ToolCall("get_weather", ['{"city":', ' "Paris", "days": 3}'])], "tool_calls", None),
        (
            TOOL_SHAPE,
            "",
            [ToolCall("get_weather", ['{"city": "Paris", "days": 9}'])],
            "stop",
            "days: 9 is greater",
        ),
        (TOOL_SHAPE, "", [ToolCall("get_weather", ['{"city": "Par'])], "length", "(cut at max_tokens)"),
        (TOOL_SHAPE, "", [ToolCall("get_time", ["{}"])], "stop", "no such function"),
        (TOOL_SHAPE, "it is sunny", [], "stop", "no tool call"),
        (AnswerShape(TOOL_CALL, tools={"get_weather": WEATHER}), "it is sunny", [], "stop", None),
        (
            AnswerShape(TOOL_CALL, tools={"get_weather": WEATHER, "f": {}}, call_required=True, named="f"),
            "",
            [ToolCall("get_weather", ['{"city": "Rome"}'])],
            "stop",
            "tool_choice named f",
        ),
    ],
)
def test_the_judge_says_what_makes_an_answer_unusable(
    shape: AnswerShape, content: str, calls: list[ToolCall], finish: str, problem: str | None
) -> None:
    got = shape.judge(content, calls, finish)
    if problem is None:
        assert got is None
    else:
        assert got is not None and problem in got, got


def _feed(
    api: str, events: list[dict[str, object]], shape: AnswerShape | None, names: bool = False
) -> RequestRecord:
    """Events as one SSE body, one read per event at t = 1, 2, 3 ... (t_send 0)."""
    st = StreamState(t_send=0.0, api=api, shape=shape, answer=[] if shape is not None else None)
    for i, ev in enumerate(events, start=1):
        head = f"event: {ev['type']}\n" if names else ""
        st.feed_block(float(i), (head + "data: " + json.dumps(ev) + "\n\n").encode())
    if api != "responses":
        st.feed_block(float(len(events) + 1), b"data: [DONE]\n\n")
    return st.finish(float(len(events) + 1), RequestRecord(target="t"))


def _tool_chunk(first: bool, args: str, finish: str | None = None) -> dict[str, object]:
    call: dict[str, object] = {"index": 0, "function": {"arguments": args}}
    if first:
        call = {
            "index": 0,
            "id": "chatcmpl-tool-1",
            "type": "function",
            "function": {"name": "get_weather", "arguments": args},
        }
    return {"choices": [{"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": finish}]}


def _usage(completion: int, reasoning: int | None = None) -> dict[str, object]:
    usage: dict[str, object] = {"prompt_tokens": 5, "completion_tokens": completion}
    if reasoning is not None:
        usage["completion_tokens_details"] = {"reasoning_tokens": reasoning}
    return {"choices": [], "usage": usage}


def test_chat_tool_call_deltas_are_answer_tokens_and_their_arguments_are_judged() -> None:
    role = {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}
    think = {"choices": [{"index": 0, "delta": {"reasoning_content": "hmm"}}]}
    good = [
        role,
        think,
        _tool_chunk(True, '{"city"'),
        _tool_chunk(False, ': "Rome"}', "tool_calls"),
        _usage(3, 1),
    ]
    rec = _feed("chat", good, TOOL_SHAPE)
    assert (rec.status, rec.tool_calls, rec.answer_check, rec.answer_valid) == ("ok", 1, TOOL_CALL, True)
    assert (rec.ttft_s, rec.ttfo_s, rec.reasoning_tokens, rec.answer_tokens, rec.chunks) == (
        2.0,
        3.0,
        1,
        2,
        3,
    )
    assert rec.empty_chunks == 0  # a call's argument delta is a token with text, not an empty one
    bad = [role, _tool_chunk(True, '{"city"'), _tool_chunk(False, ': "Oslo"}', "tool_calls"), _usage(2)]
    rec = _feed("chat", bad, TOOL_SHAPE)
    assert (
        rec.status == "invalid_output" and rec.answer_valid is False and "invalid_output" in FAILURE_CLASSES
    )
    assert rec.error is not None and "Oslo" in rec.error and not rec.ok
    assert rec.to_json()["answer_valid"] is False and rec.to_json()["tool_calls"] == 1
    free = _feed("chat", bad, None)  # nothing asked: the same stream is ok, its call still counted
    assert (free.status, free.tool_calls, free.answer_check, free.answer_valid) == ("ok", 1, None, None)


def test_a_failed_stream_keeps_its_class_and_is_not_a_valid_answer() -> None:
    st = StreamState(t_send=0.0, shape=AnswerShape(JSON_OBJECT), answer=[])
    st.feed_block(1.0, b'data: {"choices":[{"index":0,"delta":{"content":"{\\"a\\""}}]}\n\n')
    rec = st.finish(2.0, RequestRecord(target="t"))
    assert (rec.status, rec.answer_valid) == ("truncated", False)


def _resp(kind: str, **fields: object) -> dict[str, object]:
    return {"type": kind, "sequence_number": 0, **fields}


def _completed(output: int, reasoning: int, status: str = "completed") -> dict[str, object]:
    usage = {
        "input_tokens": 7,
        "output_tokens": output,
        "output_tokens_details": {"reasoning_tokens": reasoning},
    }
    return _resp("response.completed", response={"id": "r", "status": status, "usage": usage})


def test_responses_events_are_timed_as_chat_chunks_with_the_servers_usage() -> None:
    events = [
        _resp("response.created", response={"id": "r", "status": "in_progress"}),
        _resp("response.output_item.added", output_index=0, item={"type": "reasoning"}),
        _resp("response.reasoning_text.delta", output_index=0, delta="let"),
        _resp("response.reasoning_text.delta", output_index=0, delta=" me"),
        _resp("response.output_item.added", output_index=1, item={"type": "message"}),
        _resp("response.output_text.delta", output_index=1, delta='{"a"'),
        _resp("response.output_text.delta", output_index=1, delta=": 1}"),
        _completed(5, 2),
    ]
    rec = _feed("responses", events, AnswerShape(JSON_OBJECT), names=True)
    assert (rec.status, rec.finish_reason, rec.chunks, rec.output_tokens, rec.prompt_tokens) == (
        "ok",
        "stop",
        4,
        5,
        7,
    )
    assert (rec.ttft_s, rec.ttfo_s, rec.reasoning_tokens, rec.answer_tokens) == (3.0, 6.0, 2, 3)
    assert (
        rec.reasoning_tokens_source == "usage" and rec.answer_valid is True and rec.itl_s == [1.0, 2.0, 1.0]
    )


def test_responses_function_calls_incomplete_and_failed_streams() -> None:
    call = [
        _resp(
            "response.output_item.added",
            output_index=0,
            item={"type": "function_call", "name": "get_weather"},
        ),
        _resp("response.function_call_arguments.delta", output_index=0, delta='{"city": '),
        _resp("response.function_call_arguments.delta", output_index=0, delta='"Paris"}'),
        _completed(2, 0),
    ]
    rec = _feed("responses", call, TOOL_SHAPE)
    assert (rec.status, rec.tool_calls, rec.finish_reason, rec.ttfo_s) == ("ok", 1, "tool_calls", 2.0)
    assert (rec.chunks, rec.empty_chunks) == (2, 0)
    cut = [*call[:2], _completed(1, 0, status="incomplete")]
    rec = _feed("responses", cut, TOOL_SHAPE)
    assert (rec.status, rec.finish_reason) == ("invalid_output", "length") and "cut at max_tokens" in str(
        rec.error
    )
    failed = [
        call[0],
        call[1],
        _resp("response.failed", response={"status": "failed", "error": {"message": "boom"}}),
    ]
    rec = _feed("responses", failed, None)
    assert (rec.status, rec.error) == ("stream_error", "boom")
    no_end = _feed("responses", call[:2], None)
    assert no_end.status == "truncated"


def test_the_responses_request_speaks_its_own_dialect() -> None:
    wl = SyntheticWorkload.model_validate(
        {
            "reasoning_effort": "low",
            "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}}],
            "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
        }
    )
    req = build_request(
        api="responses",
        model="m",
        prompt="hi",
        max_tokens=9,
        ignore_eos=True,
        min_tokens=3,
        seed=1,
        extra_body={"reasoning_effort": "low", **wl.body_fields()},
    )
    body = json.loads(req.body)
    assert req.path == "/v1/responses" and req.api == "responses"
    assert body["input"] == [{"role": "user", "content": "hi"}] and body["max_output_tokens"] == 9
    assert body["reasoning"] == {"effort": "low"} and body["tool_choice"] == {
        "type": "function",
        "name": "get_weather",
    }
    assert body["tools"] == [{"type": "function", "name": "get_weather", "parameters": WEATHER}]
    assert not {"ignore_eos", "min_tokens", "seed", "stream_options", "max_tokens"} & set(body)
    fmt = SyntheticWorkload.model_validate(
        {"response_format": {"type": "json_schema", "json_schema": {"name": "w", "schema": WEATHER}}}
    )
    body = json.loads(
        build_request(
            api="responses", model="m", prompt="hi", max_tokens=9, extra_body=fmt.body_fields()
        ).body
    )
    assert body["text"] == {"format": {"type": "json_schema", "name": "w", "schema": WEATHER}}
    chat = json.loads(
        build_request(api="chat", model="m", prompt="hi", max_tokens=9, extra_body=fmt.body_fields()).body
    )
    assert chat["response_format"] == {"type": "json_schema", "json_schema": {"name": "w", "schema": WEATHER}}


TOOLS = """  tools:
    - type: function
      function:
        name: get_weather
        parameters: {type: object, properties: {city: {type: string}}}
"""
BAD = [
    (
        "tool_choice names no tool",
        TOOLS + "  tool_choice: {type: function, function: {name: get_time}}\n",
        "tool_choice names get_time, not among the tools ['get_weather']",
    ),
    ("tool_choice without tools", "  tool_choice: required\n", "workload: tool_choice needs tools"),
    (
        "tool schema invalid",
        TOOLS.replace("type: string", "type: text"),
        "s.yaml:14: workload.tools[0].function.parameters: not a valid JSON Schema",
    ),
    (
        "json_schema without schema",
        "  response_format: {type: json_schema}\n",
        "s.yaml:10: workload.response_format: type json_schema needs json_schema",
    ),
    ("unknown response_format", "  response_format: {type: yaml}\n", "workload.response_format.type"),
    ("unknown api", None, "targets[0].api: Input should be 'chat', 'completions' or 'responses'"),
    (
        "agent on multiturn",
        "  kind: multiturn\n" + TOOLS + "  agent: {rounds: 3}\n",
        "agent: its turns follow",
    ),
    ("agent without tools", "  agent: {rounds: 3}\n", "workload: agent needs tools the model may call"),
    (
        "agent of one round",
        TOOLS + "  agent: {rounds: 1}\n",
        "workload.agent.rounds: Input should be greater than or equal to 2",
    ),
    ("tools on completions", None, "need api chat or responses; target(s) a use api completions"),
]


@pytest.mark.parametrize(("name", "extra", "expected"), BAD, ids=[b[0] for b in BAD])
def test_a_bad_answer_shape_is_one_line_and_exit_2(
    tmp_path: Path, name: str, extra: str | None, expected: str
) -> None:
    text = GOOD.replace("  output_tokens: 10\n", "  output_tokens: 10\n" + (extra or ""))
    if name == "unknown api":
        text = GOOD.replace("    model: m\n", "    model: m\n    api: messages\n")
    elif name == "tools on completions":
        text = GOOD.replace("    model: m\n", "    model: m\n    api: completions\n").replace(
            "  output_tokens: 10\n", "  output_tokens: 10\n" + TOOLS
        )
    run_bad_input(tmp_path, (name, text, {}, "validate", [], expected))
