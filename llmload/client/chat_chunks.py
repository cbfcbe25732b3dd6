"""What one chat or completions chunk's choice carries: whether it bears a token, its text and kind
(reasoning or answer), and its tool-call deltas. Pure functions of one choice, used by
llmload/client/sse.py; the Responses API's typed events are llmload/client/responses_events.py.
"""

from __future__ import annotations

from typing import Any

from llmload.config.answer_check import ToolCall

_TEXT_FIELDS = ("content", "reasoning_content", "reasoning")


def bears_token(choice: dict[str, Any]) -> bool:
    """Whether a chunk without per-chunk usage carries a generated token (docs/metrics.md).

    A token's text can decode to "" (part of a UTF-8 character), and vLLM still sends its chunk:
    a text field that is present as a string, even empty, is a token. Not tokens: the role chunk
    (``role`` with empty or null content), deltas with no text field or only nulls (llama.cpp's
    ``content: null``, OpenAI's final ``delta: {}``). A tool-call delta is an answer token.
    """
    delta = choice.get("delta")
    if isinstance(delta, dict):
        content = delta.get("content")
        if content and isinstance(content, str):
            return True  # most chunks: answer text, with or without a role; the list below is for the rest
        texts = [delta[k] for k in _TEXT_FIELDS if isinstance(delta.get(k), str)]
        if delta.get("tool_calls"):
            return True
        if not texts:
            return False
        if "role" in delta and not any(texts):
            return False  # the role-only first chunk
        return True
    if isinstance(choice.get("text"), str):
        return True  # completions: one chunk per token, text possibly ""
    msg = choice.get("message")
    return isinstance(msg, dict) and isinstance(msg.get("content"), str)


def choice_text(choice: dict[str, Any]) -> tuple[str | None, bool]:
    """A token chunk's text, and whether its token is reasoning: an answer is a non-empty
    ``content`` or a tool-call delta; else a ``reasoning_content`` / ``reasoning`` string (even "")
    makes it reasoning; else (``content: ""``, completions text) it is an answer token."""
    delta = choice.get("delta")
    if isinstance(delta, dict):
        content = delta.get("content")
        if content or delta.get("tool_calls"):
            return content, False
        r = delta.get("reasoning_content")
        if r is None:
            r = delta.get("reasoning")
        if isinstance(r, str):
            return r, True
        return content, False
    text = choice.get("text")
    if text:
        return str(text), False
    msg = choice.get("message")
    if isinstance(msg, dict):
        return msg.get("content"), False
    return None, False


def add_tool_deltas(choice: dict[str, Any], calls: dict[int, ToolCall]) -> str:
    """Fold a chunk's ``delta.tool_calls`` into ``calls`` by index: the first delta of a call names
    its function, later ones append to its arguments (OpenAI's and vLLM's streaming form). Returns
    the argument text this chunk brought (its token's text)."""
    delta = choice.get("delta")
    deltas = delta.get("tool_calls") if isinstance(delta, dict) else None
    brought = ""
    if not isinstance(deltas, list):
        return brought
    for d in deltas:
        if not isinstance(d, dict):
            continue
        index = d.get("index")
        call = calls.setdefault(index if isinstance(index, int) else len(calls), ToolCall())
        if isinstance(d.get("id"), str) and d["id"]:
            call.id = d["id"]
        fn = d.get("function")
        if isinstance(fn, dict):
            if isinstance(fn.get("name"), str) and fn["name"]:
                call.name = fn["name"]
            if isinstance(fn.get("arguments"), str):
                call.arguments.append(fn["arguments"])
                brought += fn["arguments"]
    return brought
