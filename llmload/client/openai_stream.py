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

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from llmload.client.failures import ConnectFailed, TimedOut, classify_http, error_message
from llmload.client.sse import StreamState
from llmload.config.answer_check import AnswerShape
from llmload.config.secrets import Masker, clip
from llmload.measure.records import RequestRecord


class Response(Protocol):
    status: int

    def consume(self, on_block: Callable[[float, bytes], bool]) -> bool:
        """Hand each block (perf_counter time of the read, bytes read) to ``on_block`` until it returns
        True (stopped: False) or the body ends (True), in whichever greenlet reads the socket."""
        ...

    def read_body(self, limit: int = 65536) -> bytes: ...

    def token_arrived(self) -> None:
        """The first generated token came: the silence allowed drops to the read timeout."""
        ...

    @property
    def sent_at(self) -> float | None:
        """When the kernel sent the request's last byte (the reads' clock), where it says so."""
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
    api: str = "chat"  # chat | completions | responses


def build_request(
    *,
    api: str,
    model: str,
    prompt: str | list[dict[str, Any]],
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
    """Build a streaming chat, completions or Responses request asking for usage in the stream."""
    if api == "responses":
        return _responses_request(
            model, prompt, max_tokens, temperature, extra_body, headers, api_key, base_path
        )
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
        raise ValueError(f"unknown api {api!r} (expected chat, completions or responses)")
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
    return PreparedRequest("POST", path, _headers(headers, api_key), orjson.dumps(body), api)


def _headers(headers: dict[str, str] | None, api_key: str | None) -> dict[str, str]:
    hdrs = {"Content-Type": "application/json", "Accept": "text/event-stream"}
    if headers:
        hdrs.update(headers)
    if api_key:
        hdrs["Authorization"] = f"Bearer {api_key}"
    return hdrs


def _responses_request(
    model: str,
    prompt: str | list[dict[str, Any]],
    max_tokens: int,
    temperature: float | None,
    extra_body: dict[str, Any] | None,
    headers: dict[str, str] | None,
    api_key: str | None,
    base_path: str,
) -> PreparedRequest:
    """``POST /v1/responses``, streamed. The workload's fields in the Responses API's spelling:
    ``reasoning: {effort}``, flat function tools, ``text: {format}`` for response_format. It has no
    ``ignore_eos``, ``min_tokens`` or ``seed`` (vLLM 0.32 ignores them there), so none is sent:
    each answer ends where the model ends it (docs/scenarios.md)."""
    messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else _items(prompt)
    body: dict[str, Any] = {"model": model, "input": messages, "max_output_tokens": max_tokens}
    if temperature is not None:
        body["temperature"] = temperature
    body["stream"] = True
    extra = dict(extra_body or {})
    effort = extra.pop("reasoning_effort", None)
    if effort is not None:
        body["reasoning"] = {"effort": effort}
    tools = extra.pop("tools", None)
    if tools is not None:
        body["tools"] = [{"type": "function", **t["function"]} for t in tools]
    choice = extra.pop("tool_choice", None)
    if choice is not None:
        body["tool_choice"] = (
            choice if isinstance(choice, str) else {"type": "function", **choice["function"]}
        )
    fmt = extra.pop("response_format", None)
    if fmt is not None:
        body["text"] = {"format": {"type": fmt["type"], **fmt.get("json_schema", {})}}
    body.update(extra)
    path = base_path.rstrip("/") + "/v1/responses"
    return PreparedRequest("POST", path, _headers(headers, api_key), orjson.dumps(body), "responses")


def _items(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Chat messages as Responses input items: an agent's tool calls become ``function_call`` items
    and their results ``function_call_output`` items (llmload/locust/sessions.py writes chat's form)."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.get("role") == "tool":
            out.append({"type": "function_call_output", "call_id": m["tool_call_id"], "output": m["content"]})
        elif m.get("tool_calls"):
            out += [
                {
                    "type": "function_call",
                    "call_id": c["id"],
                    "name": c["function"]["name"],
                    "arguments": c["function"]["arguments"],
                }
                for c in m["tool_calls"]
            ]
        else:
            out.append(m)
    return out


def stream_request(
    transport: Transport,
    req: PreparedRequest,
    rec: RequestRecord,
    *,
    total_timeout_s: float = 600.0,
    clock: Callable[[], float] = time.perf_counter,
    wall: Callable[[], float] = time.time,
    progress: Callable[[int], None] | None = None,
    first_token: Callable[[float], None] | None = None,
    count_tokens: Callable[[str], int] | None = None,
    mask: Masker | None = None,
    shape: AnswerShape | None = None,
) -> RequestRecord:
    """Send ``req`` and time its stream into ``rec`` (target/index/phase already set).

    Never raises for request failures: they become the record's status. A ``GreenletExit`` (the test
    stopping) propagates after the record is marked ``aborted``, so the caller can account for it.
    ``progress(n)`` (when given) is called with the tokens each read brought (live rate, window);
    ``first_token(ttft_s)`` once, when the first token arrives (the live TTFT, before the end);
    ``count_tokens`` (a local tokenizer) counts the output when the server sends no usage;
    ``mask`` (the run's secrets) masks every error text before it is cut (``secrets.clip``); ``shape``
    (the workload's JSON or tool-call ask) judges the answer (llmload/config/answer_check.py).
    """
    rec.start_time, t_send = wall(), clock()
    state = _state(t_send, req.api, count_tokens is not None, mask, shape)
    resp: Response | None = None
    complete = False
    try:
        try:
            resp = transport.send(req.method, req.path, req.headers, req.body)
        except (TimedOut, ConnectFailed) as e:
            rec.status = "timeout" if isinstance(e, TimedOut) else "connect"
            rec.error, rec.e2e_s = clip(str(e), mask), clock() - t_send
            return rec
        t_send, rec.http_status = _started_at_send(resp, rec, state, t_send), resp.status
        if resp.status != 200:
            complete = _refused(resp, rec, mask)
            rec.e2e_s = clock() - t_send
            return rec
        deadline = t_send + total_timeout_s
        t, complete = _read(resp, state, deadline, progress, first_token, mask)
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


def _started_at_send(resp: Response, rec: RequestRecord, state: StreamState, t_send: float) -> float:
    """The request's start, moved to when the kernel sent its last byte where the connection says:
    a connect, a wait for the pool or a greenlet switch before the send is not the server's time
    (bench/bench_stream.py: TTFT over the server's own, p99 3.8 ms from the client's clock, 1.1 ms
    from the kernel's send, at 4,300 chunks/s)."""
    sent = resp.sent_at
    if sent is None or sent < t_send:
        return t_send
    rec.start_time += sent - t_send
    state.t_send = sent
    return sent


def _state(
    t_send: float, api: str, tokenizer: bool, mask: Masker | None, shape: AnswerShape | None
) -> StreamState:
    """A request's state: its text kept for a tokenizer, its answer kept for a shape's judge."""
    texts: list[str] | None = [] if tokenizer else None
    answer: list[str] | None = [] if shape is not None else None
    return StreamState(t_send=t_send, api=api, texts=texts, mask=mask, shape=shape, answer=answer)


def _refused(resp: Response, rec: RequestRecord, mask: Masker | None) -> bool:
    """A status other than 200: the record's class, Retry-After and the body's error (masked, then
    cut). True when the body was read to its end (the connection can be reused)."""
    body = b""
    complete = False
    try:
        body = resp.read_body(4096)
        complete = True
    except (TimedOut, ConnectFailed):
        pass
    rec.status = classify_http(resp.status)
    rec.retry_after_s = resp.retry_after_s
    rec.error = clip(f"HTTP {resp.status}: {error_message(body, mask)}", mask)
    return complete


class _Consumer:
    """What each block of a stream does: the parser, the first token's timers and callbacks, the
    live token count. Called by whichever greenlet reads the socket (``Response.consume``)."""

    __slots__ = ("deadline", "first_token", "progress", "resp", "seen", "state", "t", "waiting_first")

    def __init__(
        self,
        resp: Response,
        state: StreamState,
        deadline: float,
        progress: Callable[[int], None] | None,
        first_token: Callable[[float], None] | None,
    ) -> None:
        self.resp, self.state, self.deadline = resp, state, deadline
        self.progress, self.first_token = progress, first_token
        self.t = state.t_send  # the last block's time
        self.seen = 0
        self.waiting_first = True

    def __call__(self, t: float, data: bytes) -> bool:
        """Take one block; True when the stream needs no more (ended, or past its deadline)."""
        self.t = t
        state = self.state
        state.feed_block(t, data)
        if self.waiting_first and state.first_text_t is not None:
            self.waiting_first = False
            self.resp.token_arrived()
            if self.first_token is not None:
                self.first_token(state.first_text_t - state.t_send)
        if self.progress is not None:
            now_tokens = state.streamed_tokens
            if now_tokens != self.seen:
                self.progress(now_tokens - self.seen)
                self.seen = now_tokens
        return state.done or t > self.deadline


def _read(
    resp: Response,
    state: StreamState,
    deadline: float,
    progress: Callable[[int], None] | None,
    first_token: Callable[[float], None] | None,
    mask: Masker | None,
) -> tuple[float, bool]:
    """Feed every block of the stream to ``state``: (the last block's time, whether the body ended)."""
    consumer = _Consumer(resp, state, deadline, progress, first_token)
    try:
        complete = resp.consume(consumer)
        return consumer.t, complete
    except TimedOut as e:
        state._fail("timeout", clip(str(e), mask))
    except ConnectFailed as e:
        # The connection broke: a last line without its newline was cut short, not malformed.
        state.discard_partial()
        state._fail("truncated", clip(f"connection lost mid-stream: {e}", mask))
    return consumer.t, False
