"""OpenAI-compatible streaming client core: build a request, read the SSE stream, time it.

Transport-agnostic and Locust-free: a ``Transport`` sends the request and yields
the body as (monotonic time, bytes) blocks, one block per socket read. Every line
in a block is stamped with that read's time, so coalesced chunks show up as the
zero gaps they really are, and nothing waits for a buffer to fill.

Handles the quirks of real engines (../shared/engines.md): role-only first chunk,
empty or null content, reasoning fields, usage on every chunk (Aphrodite 0.6) or
only at the end with empty choices, multi-token chunks, errors after HTTP 200
(``data: {"error": ...}`` or the old flat ``{"object": "error"}``), old llama.cpp
``error:`` lines, keep-alive comments, ``data:`` without a space, missing [DONE].
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson

from llmload.records import RequestRecord


class ConnectFailed(Exception):
    """The connection could not be made (or broke before the response headers)."""


class TimedOut(Exception):
    """No byte arrived within the read timeout, or the request exceeded its time limit."""


class Response(Protocol):
    status: int

    def blocks(self) -> Iterator[tuple[float, bytes]]:
        """Yield (perf_counter time of the read, bytes read) until the body ends."""
        ...

    def read_body(self, limit: int = 65536) -> bytes: ...

    def token_arrived(self) -> None:
        """The first generated token came: the silence allowed drops to the read timeout."""
        ...

    @property
    def retry_after_s(self) -> float | None:
        """The response's Retry-After delay in seconds, when it has one."""
        ...

    def close(self, complete: bool) -> None:
        """Release the connection; ``complete`` False means the body was not fully read."""
        ...


class Transport(Protocol):
    def send(self, method: str, path: str, headers: dict[str, str], body: bytes) -> Response: ...


@dataclass
class PreparedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    api: str = "chat"  # chat | completions


def build_request(
    *,
    api: str,
    model: str,
    prompt: str | list[dict[str, str]],
    max_tokens: int,
    temperature: float | None = 0.0,
    ignore_eos: bool = False,
    min_tokens: int | None = None,
    seed: int | None = None,
    extra_body: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
    api_key: str | None = None,
    base_path: str = "",
) -> PreparedRequest:
    """Build a streaming chat or completions request asking for usage in the stream."""
    body: dict[str, Any] = {"model": model}
    if api == "chat":
        if isinstance(prompt, str):
            body["messages"] = [{"role": "user", "content": prompt}]
        else:
            body["messages"] = prompt
        path = base_path.rstrip("/") + "/v1/chat/completions"
    elif api == "completions":
        if not isinstance(prompt, str):
            prompt = "\n".join(m.get("content", "") for m in prompt)
        body["prompt"] = prompt
        path = base_path.rstrip("/") + "/v1/completions"
    else:
        raise ValueError(f"unknown api {api!r} (expected chat or completions)")
    body["max_tokens"] = max_tokens
    if temperature is not None:
        body["temperature"] = temperature
    if ignore_eos:
        body["ignore_eos"] = True
    if min_tokens is not None:
        body["min_tokens"] = min_tokens
    if seed is not None:
        body["seed"] = seed
    body["stream"] = True
    body["stream_options"] = {"include_usage": True}
    if extra_body:
        body.update(extra_body)
    hdrs = {"Content-Type": "application/json", "Accept": "text/event-stream"}
    if headers:
        hdrs.update(headers)
    if api_key:
        hdrs["Authorization"] = f"Bearer {api_key}"
    return PreparedRequest("POST", path, hdrs, orjson.dumps(body), api)


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
    last_chunk_empty_finish: bool = False  # the last token chunk had no text and a finish_reason
    texts: list[str] | None = None  # generated text, kept only when a tokenizer counts the output
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
        for line in lines:
            self.feed_line(t, line)

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
            self._fail("stream_error", line[6:].strip().decode("utf-8", "replace")[:200])
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
            self._fail("malformed", f"invalid JSON in data line: {payload[:80]!r}")
            return
        if not isinstance(obj, dict):
            self._fail("malformed", "data line is not a JSON object")
            return
        self.feed_event(t, obj)

    def feed_event(self, t: float, obj: dict[str, Any]) -> None:
        err = obj.get("error")
        if err or obj.get("object") == "error":
            msg = err.get("message") if isinstance(err, dict) else (err if isinstance(err, str) else None)
            self._fail("stream_error", str(msg or obj.get("message") or "error object in stream")[:200])
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
            rec.status, rec.error = not_a_stream(self._body)
        elif not self.done and self.finish_reason is None:
            rec.status, rec.error = "truncated", "stream ended without [DONE] or finish_reason"
        elif generated == 0:
            rec.status, rec.error = "empty", "the server generated no token"
        else:
            rec.status = "ok"
        return rec


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
        return text
    msg = choice.get("message")
    if isinstance(msg, dict):
        return msg.get("content")
    return None


def classify_http(status: int) -> str:
    if status == 429:
        return "http_429"
    if 400 <= status < 500:
        return "http_4xx"
    if status >= 500:
        return "http_5xx"
    return "http_4xx"  # 1xx/3xx where a stream was expected: treat as a client-side mismatch


def stream_request(
    transport: Transport,
    req: PreparedRequest,
    rec: RequestRecord,
    *,
    total_timeout_s: float = 600.0,
    clock: Callable[[], float] = time.perf_counter,
    wall: Callable[[], float] = time.time,
    progress: Callable[[int], None] | None = None,
    count_tokens: Callable[[str], int] | None = None,
) -> RequestRecord:
    """Send ``req`` and time its stream into ``rec`` (target/index/phase already set).

    Never raises for request failures: they become the record's status. A
    ``GreenletExit`` (the test stopping) propagates after the record is marked
    ``aborted``, so the caller can account for it. ``progress(n)`` (when given) is
    called with the tokens each read brought (the live rate and the window throughput);
    ``count_tokens`` (a local tokenizer) counts the output when the server sends no usage.
    """
    rec.start_time = wall()
    t_send = clock()
    state = StreamState(t_send=t_send, api=req.api, texts=[] if count_tokens is not None else None)
    resp: Response | None = None
    complete = False
    try:
        try:
            resp = transport.send(req.method, req.path, req.headers, req.body)
        except TimedOut as e:
            rec.status, rec.error, rec.e2e_s = "timeout", str(e)[:200], clock() - t_send
            return rec
        except ConnectFailed as e:
            rec.status, rec.error, rec.e2e_s = "connect", str(e)[:200], clock() - t_send
            return rec
        rec.http_status = resp.status
        if resp.status != 200:
            body = b""
            try:
                body = resp.read_body(4096)
                complete = True
            except (TimedOut, ConnectFailed):
                pass
            rec.status = classify_http(resp.status)
            rec.retry_after_s = resp.retry_after_s
            rec.error = f"HTTP {resp.status}: {_error_message(body)}"[:200]
            rec.e2e_s = clock() - t_send
            return rec
        deadline = t_send + total_timeout_s
        t = t_send
        seen = 0
        waiting_first = True
        try:
            for t, data in resp.blocks():
                state.feed_block(t, data)
                if waiting_first and state.first_text_t is not None:
                    waiting_first = False
                    resp.token_arrived()
                if progress is not None:
                    now_tokens = state.streamed_tokens
                    if now_tokens != seen:
                        progress(now_tokens - seen)
                        seen = now_tokens
                if state.done or t > deadline:
                    break
            else:
                complete = True
        except TimedOut as e:
            state._fail("timeout", str(e)[:200])
        except ConnectFailed as e:
            # The connection broke: a last line without its newline was cut short, not malformed.
            state.discard_partial()
            state._fail("truncated", f"connection lost mid-stream: {e}"[:200])
        state.flush(t)
        if state.done:
            complete = True
        elif t > deadline and state.status is None:
            state._fail("timeout", f"request exceeded its {total_timeout_s:g} s limit")
        return state.finish(t if (state.done or complete) else clock(), rec, count_tokens)
    except BaseException:
        # The test is stopping (GreenletExit) or something unexpected happened: the
        # request was sent, so it is accounted for as aborted before propagating.
        state.finish(clock(), rec, count_tokens)
        rec.status, rec.error = "aborted", "cut by llmload (test stopped before the stream ended)"
        raise
    finally:
        if resp is not None:
            try:
                resp.close(complete)
            except Exception:  # noqa: BLE001 - releasing a broken socket must not mask the result
                pass


_SSE_FIELD = re.compile(rb"^[A-Za-z][A-Za-z_-]*:")  # data:, event:, id:, retry:, error: (llama.cpp)
_TAGS = re.compile(rb"<[^>]*>")
_TITLE = re.compile(rb"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)


def not_a_stream(body: bytes) -> tuple[str, str]:
    """(status, error) for an HTTP 200 whose body is not an SSE stream (docs/metrics.md).

    A JSON error object (``{"object": "error", "message": ...}``, ``{"error": {...}}``) is the
    server's own failure: ``stream_error`` with its message. An HTML page is a proxy's or a login
    gateway's: ``stream_error`` with its title. Anything else is ``malformed``.
    """
    text = body.strip()
    if text[:1] in (b"{", b"["):
        try:
            orjson.loads(text)
        except orjson.JSONDecodeError:
            return "malformed", f"HTTP 200 with no stream: {_excerpt(text)}"
        return "stream_error", f"HTTP 200 with no stream, a JSON body: {_error_message(text)}"[:200]
    if text[:1] == b"<":
        return "stream_error", f"HTTP 200 with no stream: {_error_message(text)}"[:200]
    return "malformed", f"HTTP 200 with no stream: {_excerpt(text)}"


def _excerpt(body: bytes, n: int = 120) -> str:
    return " ".join(body[:n].decode("utf-8", "replace").split())


def _error_message(body: bytes) -> str:
    """The server's message: a JSON error's ``message``, an HTML page's title, else the body's start."""
    if body.lstrip()[:1] == b"<":
        m = _TITLE.search(body)
        return f"HTML page {_excerpt(m.group(1))!r}" if m else f"HTML page: {_excerpt(_TAGS.sub(b' ', body))}"
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        return _excerpt(body) or "(empty body)"
    if isinstance(obj, dict):
        err = obj.get("error")
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
        if isinstance(err, str):
            return err
        if obj.get("message"):
            return str(obj["message"])
        if obj.get("detail"):
            return str(obj["detail"])
    return body[:120].decode("utf-8", "replace")
