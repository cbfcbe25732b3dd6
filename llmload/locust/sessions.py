"""Closed-loop sessions: a multiturn workload's scripted conversations, and an agent's loop, whose
turns follow the model's own tool calls (workload ``agent``, llmload/config/answer_spec.py).

An agent's session starts with the workload's prompt. While an answer calls tools and turns remain,
the session waits ``tool_latency`` (the tool's time), answers every call with ``tool_result``, and
sends the conversation back: the assistant's calls and one tool message per call, as OpenAI's chat
API writes them (llmload/client/openai_stream.py rewrites them for the Responses API). Each turn is
one request, timed on its own: its TTFT, E2E and tokens are the engine's; the wait in the tool is in
no latency (``tool_wait_s`` on the turn it preceded). ``session_end`` marks the turn that ended a
session: ``answered`` (no call), ``rounds`` (the last turn still called) or ``failed``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import gevent

from llmload.config.answer_spec import AgentLoop
from llmload.load.workload import RequestSpec, WorkloadSource
from llmload.measure.records import RequestRecord

Send = Callable[[RequestSpec], RequestRecord]


def mark_turn(rec: RequestRecord, spec: RequestSpec) -> None:
    """An agent turn's place in its session, on its record before it is counted."""
    if not spec.agent_rounds:
        return
    rec.turn, rec.tool_wait_s = spec.turn, spec.tool_wait_s
    if not rec.ok:
        rec.session_end = "failed"
    elif not rec.tool_calls:
        rec.session_end = "answered"
    elif spec.turn + 1 >= spec.agent_rounds:
        rec.session_end = "rounds"


def multiturn_session(source: WorkloadSource, session: int, send: Send, going: Callable[[], bool]) -> None:
    """A multiturn workload's session: its scripted turns, with the think time between them."""
    turns = source.session_turns(session)
    for turn in range(turns):
        if not going():
            return
        spec = source.get(session * source.turns_max + turn)
        send(spec)
        if spec.think_time and turn < turns - 1:
            gevent.sleep(spec.think_time)


def agent_session(first: RequestSpec, loop: AgentLoop, send: Send, going: Callable[[], bool]) -> None:
    """An agent's session from the workload's request ``first``: turn indexes are
    ``first.index * rounds + turn``, so each turn pairs with the same turn of another target."""
    messages: list[dict[str, Any]] = list(first.messages)
    base = first.index * loop.rounds
    spec = replace(first, index=base, turn=0, agent_rounds=loop.rounds)
    for turn in range(loop.rounds):
        rec = send(spec)
        if rec.session_end is not None or not going():
            return
        messages = [*messages, *answered(rec.calls, loop.tool_result)]
        gevent.sleep(loop.tool_latency)
        spec = replace(
            spec, index=base + turn + 1, turn=turn + 1, messages=messages, tool_wait_s=loop.tool_latency
        )


def answered(calls: list[dict[str, str]], result: str) -> list[dict[str, Any]]:
    """The assistant's tool calls, then one tool message per call with its result."""
    ids = [c["id"] or f"call_{i}" for i, c in enumerate(calls)]
    assistant = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": i, "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
            for i, c in zip(ids, calls, strict=True)
        ],
    }
    return [assistant, *({"role": "tool", "tool_call_id": i, "content": result} for i in ids)]
