"""The SSE reader and timer of one streamed completion: lines in, token times and counts out.

``StreamState`` takes each socket read's bytes with the time of that read (``feed_block``), stamps
every complete line in it with that time, and keeps what the record needs: the first token's time,
the gaps between token-bearing chunks, usage, finish_reason and the first failure. Which chunk bears a
token, and why text is not a token count: docs/metrics.md. Each token is reasoning or answer
(chat_chunks.py; the Responses API's events: responses_events.py); the state keeps TTFO, where the
answer began (ITL by phase), and the answer and tool calls a shape judges (config/answer_check.py).
One vLLM-shaped chunk a read through ``feed_block``: 3.1 us, 2.5 with the one-event path (timeit, 2026-12-07).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from llmload.client import responses_events
from llmload.client.chat_chunks import add_tool_deltas, bears_token, choice_text
from llmload.client.failures import not_a_stream
from llmload.config.answer_check import AnswerShape, ToolCall
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
    coalesced_reads: int = 0  # reads that brought more than one token chunk (llmload/measure/stamps.py)
    first_coalesced: bool = False  # the first token's read brought later ones too: its stamp is theirs
    last_chunk_empty_finish: bool = False  # the last token chunk had no text and a finish_reason
    reasoning_chunks: int = 0  # token-bearing chunks whose token is reasoning (docs/metrics.md)
    reasoning_tokens: int = 0  # of which tokens, from per-chunk usage where it comes (else one a chunk)
    reasoning_usage: int | None = None  # the server's usage.completion_tokens_details.reasoning_tokens
    first_answer_t: float | None = None  # the first answer token's read: TTFO
    last_reasoning_t: float | None = None  # the last reasoning token's read (reasoning TPOT)
    answer_split: int | None = None  # token chunks before the first answer chunk (splits ITL by phase)
    texts: list[str] | None = None  # generated text, kept only when a tokenizer counts the output
    shape: AnswerShape | None = None  # the answer's asked-for shape (llmload/config/answer_check.py)
    answer: list[str] | None = None  # the answer's text, kept only when a shape judges it
    calls: dict[int, ToolCall] = field(default_factory=dict)  # streamed tool calls by index
    mask: Masker | None = None  # the run's secrets, masked in every error text before it is cut
    _prev_completion: int = 0
    _last_reasoning: bool = False  # the last token chunk was reasoning
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
        elif data[-3:] == b"}\n\n" and data[:7] == b"data: {" and data.count(b"\n") == 2:
            # one whole event, the usual read (vLLM writes one a chunk): straight to its JSON (docstring)
            self._saw_data = True
            self._data(t, data[6:-2])
            return
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
        self._data(t, payload)

    def _data(self, t: float, payload: bytes) -> None:
        """A data line's JSON payload (not [DONE])."""
        try:
            obj = orjson.loads(payload)
        except orjson.JSONDecodeError:
            msg = "invalid JSON in data line: " + clip(repr(payload[:16384]), self.mask, 80)
            self._fail("malformed", msg)
            return
        if not isinstance(obj, dict):
            self._fail("malformed", "data line is not a JSON object")
            return
        self.feed_event(t, obj)

    def feed_event(self, t: float, obj: dict[str, Any]) -> None:
        if self.api == "responses":
            self._responses_event(t, obj)
            return
        err = obj.get("error")
        if err or obj.get("object") == "error":
            msg = err.get("message") if isinstance(err, dict) else (err if isinstance(err, str) else None)
            message = str(msg or obj.get("message") or "error object in stream")
            self._fail("stream_error", clip(message, self.mask))
            return
        usage = obj.get("usage")
        chunk_tokens = self._usage(usage) if isinstance(usage, dict) else None
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
            bearing = bears_token(choice)
        if not bearing:
            return
        text, reasoning = choice_text(choice)
        args = add_tool_deltas(choice, self.calls) if not text and not reasoning else ""
        self._token(t, chunk_tokens, text, reasoning, bool(fr), args)

    def _token(
        self,
        t: float,
        chunk_tokens: int | None,
        text: str | None,
        reasoning: bool,
        last: bool,
        args: str = "",
    ) -> None:
        """A token-bearing chunk read at ``t``: ``chunk_tokens`` from per-chunk usage (None: not said),
        its text and kind, or a tool call's argument text (``args``); ``last``: it has the finish_reason."""
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
        if reasoning:
            self.reasoning_chunks += 1
            self.reasoning_tokens += chunk_tokens if chunk_tokens is not None else 1
            self.last_reasoning_t = t
        elif self.first_answer_t is None:
            self.first_answer_t = t
            self.answer_split = self.text_chunks - 1
        if not text and not args:
            self.empty_chunks += 1  # a token whose text is "" (part of a UTF-8 character, or a special)
        self.last_chunk_empty_finish = last and not text and not args
        self._last_reasoning = reasoning
        if self.texts is not None and (text or args):
            self.texts.append(text or args)  # a local tokenizer counts a call's arguments too
        if self.answer is not None and text and not reasoning:
            self.answer.append(text)

    def _responses_event(self, t: float, obj: dict[str, Any]) -> None:  # timed as a chat chunk
        ev = responses_events.read(obj, bool(self.calls))
        if ev.kind == "token":
            if ev.call is not None:
                self.calls.setdefault(ev.call, ToolCall()).arguments.append(ev.text)
                self._token(t, None, None, False, False, ev.text)
            else:
                self._token(t, None, ev.text, ev.reasoning, False)
        elif ev.kind == "call" and ev.call is not None:
            call = self.calls.setdefault(ev.call, ToolCall())
            call.name, call.id = ev.name, ev.call_id
        elif ev.kind == "end":
            if ev.usage is not None:
                self._usage(ev.usage)
            self.finish_reason, self.done = ev.finish_reason, True
        elif ev.kind == "error":
            self._fail("stream_error", clip(ev.message, self.mask))

    def _usage(self, usage: dict[str, Any]) -> int | None:
        """A chunk's usage: the server's counts so far; returns the tokens this chunk added, if it says."""
        chunk_tokens = None
        ct = usage.get("completion_tokens")
        if isinstance(ct, int):
            chunk_tokens = ct - self._prev_completion
            self._prev_completion = ct
            self.completion_tokens = ct
        pt = usage.get("prompt_tokens")
        if isinstance(pt, int):
            self.prompt_tokens = pt
        details = usage.get("completion_tokens_details")
        rt = details.get("reasoning_tokens") if isinstance(details, dict) else None
        if isinstance(rt, int):
            self.reasoning_usage = rt
        return chunk_tokens

    def _unfirst_answer(self) -> None:
        """The closing chunk was dropped as no token: if it was the first answer chunk, there is none."""
        if not self._last_reasoning and self.answer_split == self.text_chunks:
            self.first_answer_t = self.answer_split = None

    def _phases(self, rec: RequestRecord) -> None:
        """Reasoning and answer tokens, TTFO and the phase split (docs/metrics.md: reasoning models).

        Reasoning tokens are the server's ``completion_tokens_details.reasoning_tokens`` when it sent
        them, else the reasoning chunks (weighted by per-chunk usage where it came); answer tokens are
        the output tokens less the reasoning ones. A server's 0 beside reasoning chunks is no count:
        vLLM 0.32 counts only tokens between a generated <think> and </think>, so a chat template
        that puts <think> in the prompt (DeepSeek-R1's) reads 0 there (tested on its CPU build,
        2026-12-04); the chunks count then."""
        if self.first_answer_t is not None:
            rec.ttfo_s = self.first_answer_t - self.t_send
        rec.reasoning_chunks = self.reasoning_chunks
        usage = self.reasoning_usage
        if usage is not None and self.completion_tokens is not None and (usage or not self.reasoning_chunks):
            rec.reasoning_tokens, rec.reasoning_tokens_source = usage, "usage"
        else:
            rec.reasoning_tokens, rec.reasoning_tokens_source = self.reasoning_tokens, "chunks"
        rec.answer_tokens = max(0, rec.output_tokens - rec.reasoning_tokens)
        if self.first_answer_t is None and rec.reasoning_tokens_source == "chunks":
            # not one answer chunk came: a token that sent no delta (vLLM streams none for </think>
            # and some others) was not an answer either
            rec.reasoning_tokens, rec.answer_tokens = max(rec.reasoning_tokens, rec.output_tokens), 0
        if self.last_reasoning_t is not None:
            rec.reasoning_end_s = self.last_reasoning_t - self.t_send
        rec.answer_split = self.answer_split

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
            self._unfirst_answer()
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
        self._phases(rec)
        if self.status is not None:
            rec.status, rec.error = self.status, self.error
        elif not self._saw_data and self._body.strip():
            rec.status, rec.error = not_a_stream(self._body, self.mask)
        elif not self.done and self.finish_reason is None:
            rec.status, rec.error = "truncated", "stream ended without [DONE] or finish_reason"
        elif generated == 0:
            rec.status, rec.error = "empty", "the server generated no token"
        elif rec.has_reasoning and (rec.ttfo_s is None or rec.answer_tokens == 0):
            why = f"{rec.reasoning_tokens} reasoning tokens and no answer token"
            rec.status, rec.error = "no_answer", f"{why} (finish_reason {self.finish_reason or 'none'})"
        else:
            rec.status = "ok"
        self._judge(rec)
        return rec

    def _judge(self, rec: RequestRecord) -> None:
        """Tool calls counted, and the answer against its asked-for shape: a usable stream whose
        answer is not is ``invalid_output`` (docs/metrics.md)."""
        rec.tool_calls = len(self.calls)
        rec.calls = [{"id": c.id, "name": c.name, "arguments": c.text} for c in self.calls.values()]
        if self.shape is None:
            return
        problem = self.shape.judge("".join(self.answer or ()), list(self.calls.values()), self.finish_reason)
        rec.answer_check, rec.answer_valid = self.shape.check, problem is None
        if problem is not None and rec.status == "ok":
            rec.status, rec.error = "invalid_output", clip(problem, self.mask)


_SSE_FIELD = re.compile(rb"^[A-Za-z][A-Za-z_-]*:")  # data:, event:, id:, retry:, error: (llama.cpp)
