"""Bytes on the wire, as vLLM and Aphrodite send them: SSE chunks, final bodies and error objects.

Chunks are assembled from pre-built byte fragments (no JSON encoder per token): the hot path is one
``b"".join`` per chunk.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

DONE = b"data: [DONE]\n\n"

_ERROR_TYPES = {
    400: "BadRequestError",
    404: "NotFoundError",
    405: "MethodNotAllowed",
    500: "InternalServerError",
}


def error_body(status: int, message: str) -> bytes:
    """vLLM's ErrorResponse: ``{"object": "error", "message", "type", "param", "code"}``."""
    body = {
        "object": "error",
        "message": message,
        "type": _ERROR_TYPES.get(status, "BadRequestError"),
        "param": None,
        "code": status,
    }
    return json.dumps(body).encode()


def stream_error(message: str, code: int = 500) -> bytes:
    """An error after HTTP 200: an error event, then [DONE]."""
    err = {
        "error": {
            "object": "error",
            "message": message,
            "type": _ERROR_TYPES.get(code, "InternalServerError"),
            "param": None,
            "code": code,
        }
    }
    return b"data: " + json.dumps(err).encode() + b"\n\n" + DONE


def _usage(prompt: int, completion: int, reasoning: int | None = None) -> bytes:
    """vLLM's usage; with ``reasoning``, OpenAI's ``completion_tokens_details.reasoning_tokens``."""
    details = (
        b"" if reasoning is None else b',"completion_tokens_details":{"reasoning_tokens":%d}' % reasoning
    )
    return b'"usage":{"prompt_tokens":%d,"total_tokens":%d,"completion_tokens":%d%s}' % (
        prompt,
        prompt + completion,
        completion,
        details,
    )


@dataclass
class StreamFormat:
    """Pre-built fragments of one request's chunks."""

    chat: bool
    request_id: str
    model: str
    created: int
    prompt_tokens: int
    include_usage: bool
    continuous_usage: bool
    reasoning_tokens: int | None = None  # a reasoning profile's request: its usage says how many
    tool: str = ""  # a tool-call answer (chat): its tokens go out as tool_calls deltas of this function
    shaped: bool = False  # a JSON answer: its texts hold quotes, escaped into the chunk's string

    def __post_init__(self) -> None:
        self._called = False
        obj = "chat.completion.chunk" if self.chat else "text_completion"
        self._head = b'data: {"id":%s,"object":"%s","created":%d,"model":%s,"choices":[' % (
            json.dumps(self.request_id).encode(),
            obj.encode(),
            self.created,
            json.dumps(self.model).encode(),
        )
        self._open_reasoning = b'{"index":0,"delta":{"reasoning_content":"'
        if self.chat:
            self._open = b'{"index":0,"delta":{"content":"'
            self._close_mid = b'"},"logprobs":null,"finish_reason":null}]'
        else:
            self._open = b'{"index":0,"text":"'
            self._close_mid = b'","logprobs":null,"finish_reason":null,"stop_reason":null}]'

    def _tail(self, completion: int) -> bytes:
        if self.continuous_usage:
            return b"," + _usage(self.prompt_tokens, completion) + b"}\n\n"
        return b"}\n\n"

    def role(self) -> bytes:
        """vLLM's first chat chunk: the role and empty content (chat only)."""
        return (
            self._head
            + b'{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]'
            + self._tail(0)
        )

    def content(self, text: str, completion: int) -> bytes:
        """A chunk carrying ``text``; ``completion`` is the token count so far (for continuous usage)."""
        if self.tool:
            return b"".join(
                (self._head, self._tool_open(), _esc(text), _TOOL_CLOSE_MID, self._tail(completion))
            )
        body = _esc(text) if self.shaped else text.encode()
        return b"".join((self._head, self._open, body, self._close_mid, self._tail(completion)))

    def _tool_open(self) -> bytes:
        """vLLM's tool-call delta: the first names the call and its function, the rest add arguments."""
        if self._called:
            return b'{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"'
        self._called = True
        return (
            b'{"index":0,"delta":{"tool_calls":[{"index":0,"id":"chatcmpl-tool-%s","type":"function",'
            % (self.request_id.encode()[-12:])
            + b'"function":{"name":%s,"arguments":"' % json.dumps(self.tool).encode()
        )

    def reasoning(self, text: str, completion: int) -> bytes:
        """A chat chunk carrying reasoning ``text`` (vLLM with a reasoning parser: ``reasoning_content``)."""
        return b"".join(
            (self._head, self._open_reasoning, text.encode(), self._close_mid, self._tail(completion))
        )

    def final(self, text: str, completion: int, finish_reason: str, reasoning: bool = False) -> bytes:
        """The last content (or, ``reasoning``, reasoning) chunk with finish_reason, the usage chunk
        when asked, and [DONE]."""
        tool = bool(self.tool) and not reasoning
        if tool and finish_reason == "stop":
            finish_reason = "tool_calls"
        fin = b'","logprobs":null,"finish_reason":"%s","stop_reason":null}]' % finish_reason.encode()
        if self.chat:
            fin = (b'"}}]}' if tool else b'"}') + fin[1:]
        opening = (
            self._open_reasoning if reasoning and self.chat else self._tool_open() if tool else self._open
        )
        body = _esc(text) if self.shaped and not reasoning else text.encode()
        out = [self._head, opening, body, fin, self._tail(completion)]
        if self.include_usage:
            usage = _usage(self.prompt_tokens, completion, self.reasoning_tokens)
            out += [self._head, b"]," + usage + b"}\n\n"]
        out.append(DONE)
        return b"".join(out)


_TOOL_CLOSE_MID = b'"}}]},"logprobs":null,"finish_reason":null}]'


def _esc(text: str) -> bytes:
    """``text`` as the inside of a JSON string."""
    return json.dumps(text)[1:-1].encode()


def full_body(
    *,
    chat: bool,
    request_id: str,
    model: str,
    created: int,
    text: str,
    prompt_tokens: int,
    completion: int,
    finish_reason: str,
) -> bytes:
    """A non-streamed response."""
    usage = {
        "prompt_tokens": prompt_tokens,
        "total_tokens": prompt_tokens + completion,
        "completion_tokens": completion,
    }
    if chat:
        choice = {
            "index": 0,
            "message": {"role": "assistant", "content": text, "tool_calls": []},
            "logprobs": None,
            "finish_reason": finish_reason,
            "stop_reason": None,
        }
        obj = "chat.completion"
    else:
        choice = {
            "index": 0,
            "text": text,
            "logprobs": None,
            "finish_reason": finish_reason,
            "stop_reason": None,
        }
        obj = "text_completion"
    body = {
        "id": request_id,
        "object": obj,
        "created": created,
        "model": model,
        "choices": [choice],
        "usage": usage,
    }
    return json.dumps(body).encode()


def models_body(model: str, created: int, max_model_len: int, owner: str) -> bytes:
    card = {
        "id": model,
        "object": "model",
        "created": created,
        "owned_by": owner,
        "root": model,
        "parent": None,
        "max_model_len": max_model_len,
    }
    return json.dumps({"object": "list", "data": [card]}).encode()
