"""The Responses API's event stream as vLLM 0.32 writes it (``POST /v1/responses``, stream: true):
``response.created`` and ``response.in_progress``, then per output item an ``output_item.added``,
its deltas (``reasoning_text``, ``output_text`` or ``function_call_arguments``) and an
``output_item.done``, and last ``response.completed`` with the usage (status ``incomplete`` when
max_output_tokens cut it). No ``[DONE]``. Same methods as wire.StreamFormat, so the server's step
loop writes either.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field


def _event(kind: str, seq: int, fields: bytes) -> bytes:
    return b'event: %s\ndata: {"type":"%s","sequence_number":%d,%s}\n\n' % (
        kind.encode(),
        kind.encode(),
        seq,
        fields,
    )


@dataclass
class ResponsesFormat:
    request_id: str
    model: str
    created: int
    prompt_tokens: int
    reasoning_tokens: int | None = None
    tool: str = ""  # the answer is a call of this function
    shaped: bool = False  # unused: every delta is escaped here
    chat: bool = True  # the server sends role() first: here, the created events
    _seq: int = 0
    _item: str = ""  # the open output item: reasoning | message | function_call
    _index: int = -1
    _items: list[str] = field(default_factory=list)

    def _next(self, kind: str, fields: bytes) -> bytes:
        out = _event(kind, self._seq, fields)
        self._seq += 1
        return out

    def _response(self, status: str, usage: bytes = b"null") -> bytes:
        return (
            b'"response":{"id":%s,"object":"response","created_at":%d,"model":%s,"status":"%s","usage":%s}'
            % (
                json.dumps(self.request_id).encode(),
                self.created,
                json.dumps(self.model).encode(),
                status.encode(),
                usage,
            )
        )

    def role(self) -> bytes:
        return self._next("response.created", self._response("in_progress")) + self._next(
            "response.in_progress", self._response("in_progress")
        )

    def _open(self, item: str) -> bytes:
        """Close the open item and open ``item`` when the kind of token changes."""
        if item == self._item:
            return b""
        out = self._close()
        self._item, self._index = item, self._index + 1
        extra = b',"name":%s,"arguments":"","call_id":"call_%d"' % (
            json.dumps(self.tool).encode(),
            self._index,
        )
        fields = b'"output_index":%d,"item":{"id":"%s_%d","type":"%s"%s}' % (
            self._index,
            item.encode(),
            self._index,
            item.encode(),
            extra if item == "function_call" else b"",
        )
        return out + self._next("response.output_item.added", fields)

    def _close(self) -> bytes:
        if not self._item:
            return b""
        fields = b'"output_index":%d,"item":{"id":"%s_%d","type":"%s"}' % (
            self._index,
            self._item.encode(),
            self._index,
            self._item.encode(),
        )
        return self._next("response.output_item.done", fields)

    def _delta(self, kind: str, item: str, text: str) -> bytes:
        fields = b'"item_id":"%s_%d","output_index":%d,"content_index":0,"delta":%s' % (
            item.encode(),
            self._index,
            self._index,
            json.dumps(text).encode(),
        )
        return self._next(kind, fields)

    def content(self, text: str, completion: int) -> bytes:
        if self.tool:
            opened = self._open("function_call")
            return opened + self._delta("response.function_call_arguments.delta", "function_call", text)
        return self._open("message") + self._delta("response.output_text.delta", "message", text)

    def reasoning(self, text: str, completion: int) -> bytes:
        return self._open("reasoning") + self._delta("response.reasoning_text.delta", "reasoning", text)

    def final(self, text: str, completion: int, finish_reason: str, reasoning: bool = False) -> bytes:
        last = self.reasoning(text, completion) if reasoning else self.content(text, completion)
        usage = (
            b'{"input_tokens":%d,"output_tokens":%d,"total_tokens":%d,"output_tokens_details":{"reasoning_tokens":%d}}'
            % (
                self.prompt_tokens,
                completion,
                self.prompt_tokens + completion,
                self.reasoning_tokens or 0,
            )
        )
        status = "incomplete" if finish_reason == "length" else "completed"
        return last + self._close() + self._next("response.completed", self._response(status, usage))
