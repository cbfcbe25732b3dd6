"""Request validation for the live simulator: a completion request's JSON body checked into one
``CompletionRequest``, or a ``BadRequest`` with the status and message the HTTP surface answers.

The checks run in a fixed order: a body with several faults gets the first.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from llmload.sim.shapes import Ask, ask_of
from llmload.sim.tokens import chat_token_ids, prompt_token_ids

DEFAULT_MAX_TOKENS = 256


class BadRequest(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class CompletionRequest:
    """A valid completion request: its prompt's token ids, the key its answer is derived from, and
    the options the simulator honours."""

    ids: list[int]
    key: bytes  # the prompt as JSON: with max_tokens, it picks the answer (content_digest)
    stream: bool
    stream_options: dict[str, Any] | None
    max_tokens: int
    min_tokens: int
    seed: int | None
    ignore_eos: bool
    reasoning_effort: str | None = None  # low | medium | high (profiles with reasoning)
    thinking_budget: int | None = None  # vLLM's thinking_token_budget: reasoning tokens at most
    ask: Ask | None = None  # JSON or a tool call asked for (llmload/sim/shapes.py)


def _int_field(body: dict[str, Any], name: str, default: int | None) -> int | None:
    v = body.get(name, default)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        raise BadRequest(400, f"{name} must be an integer")
    return v


def _text_of(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    raise BadRequest(400, "messages: content must be a string or a list of parts")


_ITEMS = {"function_call": "assistant", "function_call_output": "tool"}


def _messages(msgs: Any, field: str) -> tuple[list[int], bytes]:
    if not isinstance(msgs, list) or not msgs:
        raise BadRequest(400, f"{field}: a non-empty list of messages is required")
    pairs = []
    for m in msgs:
        if isinstance(m, dict) and m.get("type") in _ITEMS:  # the Responses API's call and result items
            m = {"role": _ITEMS[m["type"]], "content": m.get("output", m.get("arguments"))}
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise BadRequest(400, f"{field}: each message needs a string role")
        pairs.append((m["role"], _text_of(m.get("content"))))
    return chat_token_ids(pairs), json.dumps(pairs).encode()


def _parse(
    raw: bytes, chat: bool, model_name: str, responses: bool = False
) -> tuple[dict[str, Any], list[int], bytes]:
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise BadRequest(400, "request body is not valid JSON") from None
    if not isinstance(body, dict):
        raise BadRequest(400, "request body must be a JSON object")
    model = body.get("model")
    if model is not None and model != model_name:
        raise BadRequest(404, f"The model `{model}` does not exist.")
    if responses:  # the Responses API: input is a string or a list of messages
        inp = body.get("input")
        ids, key = _messages([{"role": "user", "content": inp}] if isinstance(inp, str) else inp, "input")
    elif chat:
        ids, key = _messages(body.get("messages"), "messages")
    else:
        prompt = body.get("prompt")
        if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
            prompt = prompt[0]
        if isinstance(prompt, str):
            ids = prompt_token_ids(prompt)
        elif isinstance(prompt, list) and prompt and all(isinstance(x, int) for x in prompt):
            ids = list(prompt)  # token ids
        else:
            raise BadRequest(400, "prompt: one string (or one list of token ids) is required")
        key = json.dumps(prompt).encode()
    return body, ids, key


def _max_tokens(body: dict[str, Any], chat: bool, prompt_len: int, max_model_len: int) -> int:
    max_tokens = _int_field(
        body, "max_completion_tokens" if chat and "max_completion_tokens" in body else "max_tokens", None
    )
    if max_tokens is None:
        max_tokens = max(1, min(DEFAULT_MAX_TOKENS, max_model_len - prompt_len))
    if max_tokens <= 0:
        raise BadRequest(400, f"max_tokens must be at least 1, got {max_tokens}.")
    return max_tokens


def parse_completion(
    raw: bytes, *, chat: bool, model: str, max_model_len: int, responses: bool = False
) -> CompletionRequest:
    """The request in ``raw`` (a chat or a text completion, or ``responses``: a Responses API
    request, its fields read in chat's names), or BadRequest with the engines' message."""
    body, ids, key = _parse(raw, chat, model, responses)
    if responses:
        reasoning = body.get("reasoning")
        body = {
            **body,
            "max_tokens": body.get("max_output_tokens"),
            "reasoning_effort": reasoning.get("effort") if isinstance(reasoning, dict) else None,
            "stream_options": {"include_usage": True} if body.get("stream") else None,
        }
    n = _int_field(body, "n", 1)
    if n != 1:
        raise BadRequest(400, "n: only n=1 is supported by the simulator")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise BadRequest(400, "stream must be a boolean")
    opts = body.get("stream_options")
    if opts is not None and not stream:
        raise BadRequest(400, "Stream options can only be defined when `stream=True`.")
    if opts is not None and not isinstance(opts, dict):
        raise BadRequest(400, "stream_options must be an object")
    max_tokens = _max_tokens(body, chat, len(ids), max_model_len)
    min_tokens = _int_field(body, "min_tokens", 0) or 0
    if min_tokens < 0 or min_tokens > max_tokens:
        raise BadRequest(400, f"min_tokens must be between 0 and max_tokens={max_tokens}, got {min_tokens}")
    temp = body.get("temperature", 1.0)
    if temp is not None and (isinstance(temp, bool) or not isinstance(temp, (int, float)) or temp < 0):
        raise BadRequest(400, "temperature must be a non-negative number")
    seed = _int_field(body, "seed", None)
    ignore_eos = bool(body.get("ignore_eos", False))
    if len(ids) + max_tokens > max_model_len:
        raise BadRequest(
            400,
            f"This model's maximum context length is {max_model_len} tokens. However, you requested "
            f"{len(ids) + max_tokens} tokens ({len(ids)} in the messages, {max_tokens} in the completion). "
            "Please reduce the length of the messages or completion.",
        )
    effort = body.get("reasoning_effort")
    if effort is not None and effort not in ("low", "medium", "high"):
        raise BadRequest(400, "reasoning_effort must be one of low, medium, high")
    budget = _int_field(body, "thinking_token_budget", None)
    if budget is not None and budget < 0:
        raise BadRequest(400, f"thinking_token_budget must be at least 0, got {budget}")
    try:
        ask = ask_of(body, responses) if chat or responses else None
    except ValueError as e:
        raise BadRequest(400, str(e)) from None
    return CompletionRequest(
        ids, key, stream, opts, max_tokens, min_tokens, seed, ignore_eos, effort, budget, ask
    )
