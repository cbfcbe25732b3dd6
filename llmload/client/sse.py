"""The SSE reader and timer of one streamed completion: lines in, token times and counts out.

``StreamState`` takes each socket read's bytes with the time of that read (``feed_block``),
stamps every complete line in it with that time, and keeps what the record needs: the first
token's time, the gaps between token-bearing chunks, usage, finish_reason and the first failure.
Which chunk bears a token, and why text is not a token count: docs/metrics.md. Used by
``openai_stream.stream_request``; no I/O here.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from llmload.client.failures import not_a_stream
from llmload.config.secrets import Masker, clip
from llmload.measure.records import RequestRecord


@dataclass
class StreamState:
    """Incremental SSE reader and timer for one request."""

    t_send: float
    api: str = "chat"
    done: bool = False
    finish_reason: str | None = None
    error: str | None = None
    status: str | None = None  # set on the first failure seen
    first_text_t: float | None = None
    last_text_t: float | None = None
    gaps: list[float] = field(default_factory=list)
    gap_tokens: list[int] = field(default_factory=list)
    per_chunk_usage: bool = True  # stays True while every text chunk carried usage
    text_chunks: int = 0
    completion_tokens: int | None = None
    prompt_tokens: int | None = None
    empty_chunks: int = 0  # token-bearing chunks whose text was empty
    coalesced_reads: int = (
        0  # reads that brought more than one token-bearing chunk (llmload/measure/stamps.py)
    )
    first_coalesced: bool = False  # the first token's read brought later ones too: its stamp is theirs
    last_chunk_empty_finish: bool = False  # the last token chunk had no text and a finish_reason
    texts: list[str] | None = None  # generated text, kept only when a tokenizer counts the output
    mask: Masker | None = None  # the run's secrets, masked in every error text before it is cut
    _prev_completion: int = 0
    _partial: bytes = b""
    _saw_data: bool = False  # a data: line came (an SSE stream, whatever else it holds)
    _body: bytes = b""  # lines that are not SSE fields, before any data line (up to 4 KB)

    @property
    def streamed_tokens(self) -> int:
        """Tokens received so far: from usage when it comes on every chunk, else text chunks."""
        if self.completion_tokens is not None and self.per_chunk_usage:
            return self.completion_tokens
        return self.text_chunks

    def feed_block(self, t: float, data: bytes) -> None:
        """Feed one read's bytes; every complete line in it is stamped with ``t``."""
        if self._partial:
            data = self._partial + data
            self._partial = b""
        lines = data.split(b"\n")
        self._partial = lines.pop()  # an incomplete last line waits for the next read
        before = self.text_chunks
        for line in lines:
            self.feed_line(t, line)
        if self.text_chunks - before > 1:
            self.coalesced_reads += 1
            if before == 0:
                self.first_coalesced = True

    def discard_partial(self) -> None:
        self._partial = b""

    def flush(self, t: float) -> None:
        if self._partial:
            line, self._partial = self._partial, b""
            self.feed_line(t, line)

    def feed_line(self, t: float, line: bytes) -> None:
        if line.endswith(b"\r"):
            line = line[:-1]
        if not line or line[0] == 58:  # empty line (event boundary) or ":" comment / keep-alive
            return
        if line.startswith(b"data:"):
            payload = line[5:]
            if payload[:1] == b" ":
                payload = payload[1:]
        elif line.startswith(b"error:"):  # old llama.cpp
            self._fail("stream_error", clip(line[6:].strip().decode("utf-8", "replace"), self.mask))
            return
        else:
            # event:, id:, retry: and unknown fields carry nothing we time; a line that is no SSE
            # field at all is kept: a 200 whose body is a JSON error or an HTML page is no stream
            if not self._saw_data and not _SSE_FIELD.match(line) and len(self._body) < 4096:
                self._body += line + b"\n"
            return
        self._saw_data = True
        if payload == b"[DONE]":
            self.done = True
            return
        try:
            obj = orjson.loads(payload)
        except orjson.JSONDecodeError:
            self._fail(
                "malformed", "invalid JSON in data line: " + clip(repr(payload[:16384]), self.mask, 80)
            )
            return
        if not isinstance(obj, dict):
            self._fail("malformed", "data line is not a JSON object")
            return
        self.feed_event(t, obj)

    def feed_event(self, t: float, obj: dict[str, Any]) -> None:
        err = obj.get("error")
        if err or obj.get("object") == "error":
            msg = err.get("message") if isinstance(err, dict) else (err if isinstance(err, str) else None)
            self._fail(
                "stream_error", clip(str(msg or obj.get("message") or "error object in stream"), self.mask)
            )
            return
        usage = obj.get("usage")
        chunk_tokens: int | None = None
        if isinstance(usage, dict):
            ct = usage.get("completion_tokens")
            if isinstance(ct, int):
                chunk_tokens = ct - self._prev_completion
                self._prev_completion = ct
                self.completion_tokens = ct
            pt = usage.get("prompt_tokens")
            if isinstance(pt, int):
                self.prompt_tokens = pt
        choices = obj.get("choices")
        if not choices:
            return  # usage-only chunk (choices [] or absent)
        if not isinstance(choices, list) or not isinstance(choices[0], dict):
            self._fail("malformed", "choices is not a list of objects")
            return
        choice = choices[0]
        fr = choice.get("finish_reason")
        if fr:
            self.finish_reason = fr
        if chunk_tokens is not None:
            bearing = chunk_tokens > 0  # usage on this chunk says whether a token came with it
        else:
            bearing = _bears_token(choice)
        if not bearing:
            return
        self.text_chunks += 1
        if self.first_text_t is None:
            self.first_text_t = t
        else:
            self.gaps.append(t - (self.last_text_t or t))
            if chunk_tokens is not None and self.per_chunk_usage:
                self.gap_tokens.append(chunk_tokens)
            else:
                self.per_chunk_usage = False
        if chunk_tokens is None:
            self.per_chunk_usage = False
        self.last_text_t = t
        text = _choice_text(choice)
        if not text:
            self.empty_chunks += 1  # a token whose text is "" (part of a UTF-8 character, or a special)
        self.last_chunk_empty_finish = bool(fr) and not text
        if self.texts is not None and text:
            self.texts.append(text)

    def _fail(self, status: str, message: str) -> None:
        if self.status is None:
            self.status = status
            self.error = message

    def finish(
        self, t_end: float, rec: RequestRecord, count_tokens: Callable[[str], int] | None = None
    ) -> RequestRecord:
        """Fill ``rec`` from what was read; classify the outcome."""
        if (
            self.completion_tokens is not None
            and self.last_chunk_empty_finish
            and self.text_chunks == self.completion_tokens + 1
        ):
            # A closing chunk with no text and a finish_reason (OpenAI style), and usage says it
            # carried no token: it is not a token, and its gap is not an inter-token latency.
            self.text_chunks -= 1
            self.empty_chunks -= 1
            if self.gaps:
                self.gaps.pop()
            else:
                self.first_text_t = None
        rec.e2e_s = t_end - self.t_send
        if self.first_text_t is not None:
            rec.ttft_s = self.first_text_t - self.t_send
        rec.itl_s = self.gaps
        if self.per_chunk_usage and len(self.gap_tokens) == len(self.gaps):
            rec.itl_tokens = self.gap_tokens
        rec.chunks = self.text_chunks
        rec.empty_chunks = self.empty_chunks
        rec.coalesced_reads = self.coalesced_reads
        rec.first_coalesced = self.first_coalesced
        rec.finish_reason = self.finish_reason
        rec.prompt_tokens = self.prompt_tokens
        if self.completion_tokens is not None:
            rec.output_tokens, rec.output_tokens_source = self.completion_tokens, "usage"
        elif count_tokens is not None and self.texts is not None:
            rec.output_tokens, rec.output_tokens_source = count_tokens("".join(self.texts)), "tokenizer"
        else:
            rec.output_tokens, rec.output_tokens_source = self.text_chunks, "chunks"
        rec.output_tokens_approx = rec.output_tokens_source != "usage"
        generated = self.completion_tokens if self.completion_tokens is not None else self.text_chunks
        if self.status is not None:
            rec.status, rec.error = self.status, self.error
        elif not self._saw_data and self._body.strip():
            rec.status, rec.error = not_a_stream(self._body, self.mask)
        elif not self.done and self.finish_reason is None:
            rec.status, rec.error = "truncated", "stream ended without [DONE] or finish_reason"
        elif generated == 0:
            rec.status, rec.error = "empty", "the server generated no token"
        else:
            rec.status = "ok"
        return rec


_SSE_FIELD = re.compile(rb"^[A-Za-z][A-Za-z_-]*:")  # data:, event:, id:, retry:, error: (llama.cpp)
_TEXT_FIELDS = ("content", "reasoning_content", "reasoning")


def _bears_token(choice: dict[str, Any]) -> bool:
    """Whether a chunk without per-chunk usage carries a generated token (docs/metrics.md).

    A token's text can decode to "" (part of a UTF-8 character), and vLLM still sends its chunk:
    a text field that is present as a string, even empty, is a token. Not tokens: the role chunk
    (``role`` with empty or null content), deltas with no text field or only nulls (llama.cpp's
    ``content: null``, OpenAI's final ``delta: {}``).
    """
    delta = choice.get("delta")
    if isinstance(delta, dict):
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


def _choice_text(choice: dict[str, Any]) -> str | None:
    delta = choice.get("delta")
    if isinstance(delta, dict):
        return delta.get("content") or delta.get("reasoning_content") or delta.get("reasoning")
    text = choice.get("text")
    if text:
        return str(text)
    msg = choice.get("message")
    if isinstance(msg, dict):
        return msg.get("content")
    return None
