"""The per-request record: what one streamed request measured.

This is the contract between the stream client (which fills it), the metrics
(which fold it into histograms), and every sink (results dir, InfluxDB, reports).
It imports nothing from the load side or from Locust.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

# Status classes. "ok" is success; every other value is a failure class.
OK = "ok"
FAILURE_CLASSES: tuple[str, ...] = (
    "connect",  # could not connect / connection reset before the response headers
    "timeout",  # no byte within the read timeout, or total time limit exceeded
    "http_4xx",  # HTTP 4xx other than 429
    "http_429",  # rate limited
    "http_5xx",  # HTTP 5xx
    "stream_error",  # error object inside the stream after HTTP 200
    "truncated",  # the stream ended without [DONE] and without a finish_reason
    "malformed",  # a data line that is not valid JSON / not a completion chunk
    "empty",  # the stream completed but the server generated no token (usage 0, or no token chunk)
    "no_answer",  # reasoning tokens and not one answer token (reasoning used the whole budget)
    "invalid_output",  # the answer is not the JSON or tool call the request asked for (config/answer_check.py)
    "aborted",  # cut by llmload itself (test stopped and the grace time ran out)
)
STATUS_CLASSES: tuple[str, ...] = (OK, *FAILURE_CLASSES)


@dataclass
class RequestRecord:
    """One request sent by llmload, successful or not.

    Times are seconds. ``start_time`` and ``intended_time`` are wall-clock epoch
    seconds (for joining with server-side data); durations are measured on a
    monotonic clock.
    """

    target: str
    status: str = OK
    index: int = -1  # position in the workload sequence (pairs requests across targets)
    worker: str = "local"
    phase: str = ""  # executor phase name ("" when the scenario has one phase)
    level: str = ""  # sweep level label, when the phase is a sweep
    start_time: float = 0.0  # epoch seconds of the actual send
    intended_time: float | None = None  # epoch seconds of the scheduled send (open loop)
    http_status: int | None = None
    ttft_s: float | None = None  # actual send -> first token-bearing chunk
    e2e_s: float | None = None  # actual send -> end of stream
    itl_s: list[float] = field(default_factory=list)  # one gap per pair of token-bearing chunks
    itl_tokens: list[int] = field(default_factory=list)  # tokens in the later chunk of each gap, when known
    prompt_tokens: int | None = None  # the server's usage.prompt_tokens (chat template included)
    prompt_tokens_client: int = 0  # llmload's count of the prompt text (tokenizer, else estimate)
    output_tokens: int = 0
    output_tokens_approx: bool = False  # True when not from the server's usage
    output_tokens_source: str = "chunks"  # usage | tokenizer | chunks (token-bearing chunks)
    chunks: int = 0  # token-bearing chunks
    empty_chunks: int = 0  # of which carried empty text (a token decoding to "": still a token)
    coalesced_reads: int = 0  # reads that brought several token-bearing chunks (llmload/measure/stamps.py)
    first_coalesced: bool = False  # the first token came in one of those reads (TTFT may be late by a gap)
    ttfo_s: float | None = None  # actual send -> first answer chunk (content or tool call): TTFO
    reasoning_tokens: int = 0  # of output_tokens (docs/metrics.md: reasoning models)
    answer_tokens: int = 0  # output_tokens - reasoning_tokens
    reasoning_tokens_source: str = "chunks"  # usage (completion_tokens_details) | chunks
    reasoning_chunks: int = 0  # token-bearing chunks whose token was reasoning
    reasoning_end_s: float | None = None  # actual send -> the last reasoning chunk
    answer_split: int | None = None  # token chunks before the first answer chunk (ITL by phase)
    tool_calls: int = 0  # tool calls streamed (chat tool_calls deltas, Responses function calls)
    answer_check: str | None = None  # json_object | json_schema | tool_call: what the answer was judged as
    answer_valid: bool | None = None  # it parsed and fit its schema (None: nothing asked of it)
    calls: list[dict[str, str]] = field(
        default_factory=list
    )  # the tool calls (id, name, arguments): an agent's next turn
    turn: int | None = None  # an agent loop's turn (0: the user's prompt; llmload/locust/sessions.py)
    session_end: str | None = None  # the turn that ended its session: answered | rounds | failed
    tool_wait_s: float = 0.0  # time in the tool before this turn was sent (not charged to the engine)
    finish_reason: str | None = None
    error: str | None = None  # short, secret-free description of the failure
    retry_after_s: float | None = None  # the server's Retry-After on an HTTP error (429, 503)

    @property
    def ok(self) -> bool:
        return self.status == OK

    @property
    def schedule_lag_s(self) -> float | None:
        if self.intended_time is None:
            return None
        return max(0.0, self.start_time - self.intended_time)

    @property
    def ttft_from_intended_s(self) -> float | None:
        if self.ttft_s is None:
            return None
        lag = self.schedule_lag_s
        return self.ttft_s + (lag or 0.0)

    @property
    def e2e_from_intended_s(self) -> float | None:
        if self.e2e_s is None:
            return None
        lag = self.schedule_lag_s
        return self.e2e_s + (lag or 0.0)

    @property
    def tpot_s(self) -> float | None:
        """(E2E - TTFT) / (output_tokens - 1), for requests with at least two tokens."""
        if self.ttft_s is None or self.e2e_s is None or self.output_tokens < 2:
            return None
        return (self.e2e_s - self.ttft_s) / (self.output_tokens - 1)

    @property
    def has_reasoning(self) -> bool:
        return self.reasoning_tokens > 0 or self.reasoning_chunks > 0

    @property
    def reasoning_tpot_s(self) -> float | None:
        """(last reasoning chunk - TTFT) / (reasoning_tokens - 1), with at least two reasoning tokens."""
        if self.ttft_s is None or self.reasoning_end_s is None or self.reasoning_tokens < 2:
            return None
        return (self.reasoning_end_s - self.ttft_s) / (self.reasoning_tokens - 1)

    @property
    def answer_tpot_s(self) -> float | None:
        """(E2E - TTFO) / (answer_tokens - 1), with at least two answer tokens."""
        if self.ttfo_s is None or self.e2e_s is None or self.answer_tokens < 2:
            return None
        return (self.e2e_s - self.ttfo_s) / (self.answer_tokens - 1)

    def phase_gaps(self) -> tuple[list[float], list[float]]:
        """ITL within each phase: (gaps between reasoning chunks, gaps between answer chunks); the
        gap from the last reasoning chunk to the first answer chunk belongs to neither."""
        split = self.answer_split
        if split is None:
            return self.itl_s, []
        return self.itl_s[: max(0, split - 1)], self.itl_s[split:]

    def to_json(self) -> dict[str, Any]:
        """The requests.jsonl line (milliseconds; ITL summarised, not listed)."""

        def ms(v: float | None) -> float | None:
            return None if v is None else round(v * 1000.0, 3)

        itl = self.itl_s
        out: dict[str, Any] = {
            "target": self.target,
            "index": self.index,
            "worker": self.worker,
            "phase": self.phase,
            "level": self.level,
            "status": self.status,
            "http_status": self.http_status,
            "start_time": round(self.start_time, 6),
            "intended_time": None if self.intended_time is None else round(self.intended_time, 6),
            "schedule_lag_ms": ms(self.schedule_lag_s),
            "ttft_ms": ms(self.ttft_s),
            "e2e_ms": ms(self.e2e_s),
            "tpot_ms": ms(self.tpot_s),
            "ttft_from_intended_ms": ms(self.ttft_from_intended_s),
            "e2e_from_intended_ms": ms(self.e2e_from_intended_s),
            "itl_mean_ms": ms(sum(itl) / len(itl)) if itl else None,
            "itl_max_ms": ms(max(itl)) if itl else None,
            "prompt_tokens": self.prompt_tokens,
            "prompt_tokens_client": self.prompt_tokens_client,
            "output_tokens": self.output_tokens,
            "output_tokens_approx": self.output_tokens_approx,
            "output_tokens_source": self.output_tokens_source,
            "chunks": self.chunks,
            "empty_chunks": self.empty_chunks,
            "finish_reason": self.finish_reason,
            "error": self.error,
            "retry_after_s": self.retry_after_s,
        }
        if self.has_reasoning:  # reasoning requests only: a classic run's lines stay as they were
            out.update(
                ttfo_ms=ms(self.ttfo_s),
                reasoning_tokens=self.reasoning_tokens,
                answer_tokens=self.answer_tokens,
                reasoning_tokens_source=self.reasoning_tokens_source,
                reasoning_chunks=self.reasoning_chunks,
                reasoning_tpot_ms=ms(self.reasoning_tpot_s),
                answer_tpot_ms=ms(self.answer_tpot_s),
            )
        if self.answer_check is not None or self.tool_calls:  # shaped answers only, as above
            out.update(
                tool_calls=self.tool_calls, answer_check=self.answer_check, answer_valid=self.answer_valid
            )
        if self.turn is not None:  # agent loops only
            out.update(turn=self.turn, session_end=self.session_end, tool_wait_ms=ms(self.tool_wait_s))
        return out

    def to_wire(self) -> dict[str, Any]:
        """Full record as a plain dict (for shipping between processes)."""
        return asdict(self)

    @classmethod
    def from_wire(cls, d: dict[str, Any]) -> RequestRecord:
        return cls(**d)
