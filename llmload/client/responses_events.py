"""The Responses API's typed stream events (``POST /v1/responses``), read into what a chat chunk
would have said: a token (answer or reasoning), a tool call's name or argument delta, the end with
its usage, or a failure. llmload/client/sse.py times them exactly as it times chat chunks.

Read from vLLM 0.32's serving code (entrypoints/openai/responses, 2026-12-06) and OpenAI's spec:
- each event is ``event: <type>`` then ``data: {"type": <type>, ...}``; there is no ``[DONE]``: the
  stream ends with ``response.completed`` (vLLM sends it also when ``status`` is ``incomplete``,
  cut at ``max_output_tokens``; OpenAI sends ``response.incomplete`` then) or ``response.failed``;
- text arrives as ``response.output_text.delta``, reasoning as ``response.reasoning_text.delta``
  (older servers: ``response.reasoning.delta``, ``response.reasoning_summary_text.delta``), tool-call
  arguments as ``response.function_call_arguments.delta`` after an ``output_item.added`` naming the
  function; every delta event is one chunk (vLLM emits one per engine step, like chat);
- usage is ``{input_tokens, output_tokens, output_tokens_details: {reasoning_tokens}}`` on the
  final response only, so tokens per gap are not known (ITL is per chunk, as for chat without
  continuous usage).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

TEXT = "response.output_text.delta"
REASONING = (
    "response.reasoning_text.delta",
    "response.reasoning.delta",
    "response.reasoning_summary_text.delta",
)
ARGUMENTS = "response.function_call_arguments.delta"
ITEM_ADDED = "response.output_item.added"
ENDS = ("response.completed", "response.incomplete")
FAILED = ("response.failed", "error")


@dataclass(frozen=True)
class Event:
    """One event, read: ``token`` (``text``, ``reasoning``, ``call``: the output index of the tool call
    it adds to), ``call`` (a tool call named), ``end`` (``usage`` as chat writes it, ``finish_reason``),
    ``error`` (``message``), or ``other`` (nothing timed)."""

    kind: str
    text: str = ""
    reasoning: bool = False
    call: int | None = None
    name: str = ""
    call_id: str = ""
    usage: dict[str, Any] | None = None
    finish_reason: str | None = None
    message: str = ""


OTHER = Event("other")


def _delta(obj: dict[str, Any]) -> str:
    d = obj.get("delta")
    if isinstance(d, dict):  # an older vLLM sent {"content": "..."} for reasoning deltas
        d = d.get("content") or d.get("text")
    return d if isinstance(d, str) else ""


def _index(obj: dict[str, Any]) -> int:
    i = obj.get("output_index")
    return i if isinstance(i, int) else 0


def _chat_usage(usage: Any) -> dict[str, Any] | None:
    """The final usage in chat's words (the state reads one form)."""
    if not isinstance(usage, dict):
        return None
    out: dict[str, Any] = {
        "prompt_tokens": usage.get("input_tokens"),
        "completion_tokens": usage.get("output_tokens"),
    }
    details = usage.get("output_tokens_details")
    if isinstance(details, dict) and isinstance(details.get("reasoning_tokens"), int):
        out["completion_tokens_details"] = {"reasoning_tokens": details["reasoning_tokens"]}
    return out


def _end(obj: dict[str, Any], called: bool) -> Event:
    resp = obj.get("response")
    resp = resp if isinstance(resp, dict) else {}
    status = resp.get("status")
    if obj.get("type") == "response.incomplete" or status == "incomplete":
        reason = "length"  # max_output_tokens, the only cause vLLM reports
    elif status in (None, "completed"):
        reason = "tool_calls" if called else "stop"
    else:
        return Event("error", message=f"response ended with status {status}")
    return Event("end", usage=_chat_usage(resp.get("usage")), finish_reason=reason)


def _error(obj: dict[str, Any]) -> str:
    err = obj.get("error")
    resp = obj.get("response")
    if not err and isinstance(resp, dict):
        err = resp.get("error")
    if isinstance(err, dict):
        return str(err.get("message") or err.get("code") or "error event in stream")
    return str(obj.get("message") or err or "error event in stream")


def read(obj: dict[str, Any], called: bool) -> Event:
    """One event's meaning; ``called``: a tool call came before (the end's finish_reason)."""
    kind = obj.get("type")
    if kind == TEXT:
        return Event("token", text=_delta(obj))
    if kind in REASONING:
        return Event("token", text=_delta(obj), reasoning=True)
    if kind == ARGUMENTS:
        return Event("token", text=_delta(obj), call=_index(obj))
    if kind == ITEM_ADDED:
        item = obj.get("item")
        if isinstance(item, dict) and item.get("type") == "function_call":
            call_id = str(item.get("call_id") or item.get("id") or "")
            return Event("call", call=_index(obj), name=str(item.get("name") or ""), call_id=call_id)
        return OTHER
    if kind in ENDS:
        return _end(obj, called)
    if kind in FAILED or (kind is None and (obj.get("error") or obj.get("object") == "error")):
        return Event("error", message=_error(obj))  # a chat-style error object counts too
    return OTHER
