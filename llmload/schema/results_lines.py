"""The results directory's line files as typed models: a requests.jsonl line, a telemetry.jsonl row and
a timeseries.jsonl row, and the base every results model shares (results_model.py names them all).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

Status = Literal[
    "ok",
    "http_4xx",
    "http_429",
    "http_5xx",
    "connect",
    "timeout",
    "stream_error",
    "truncated",
    "malformed",
    "empty",
    "no_answer",
    "invalid_output",
    "aborted",
]


class LenientModel(BaseModel):
    # A reader ignores keys it does not know: a newer llmload may add some within llmload.results.summary/1
    # (a compare against an older baseline must still read it). What the writers put in is checked
    # by round trips in tests/test_results_model.py: validate, dump, get the file back key for key.
    model_config = ConfigDict(extra="ignore")


class RequestLine(LenientModel):
    """One line of requests.jsonl: one request sent, whatever its outcome (milliseconds)."""

    target: str
    index: int
    worker: str
    phase: str
    level: str
    status: Status
    start_time: float
    http_status: int | None = None
    intended_time: float | None = None
    schedule_lag_ms: float | None = None
    ttft_ms: float | None = None
    e2e_ms: float | None = None
    tpot_ms: float | None = None
    ttft_from_intended_ms: float | None = None
    e2e_from_intended_ms: float | None = None
    itl_mean_ms: float | None = None
    itl_max_ms: float | None = None
    prompt_tokens: int | None = None
    prompt_tokens_client: int = 0
    output_tokens: int = 0
    output_tokens_approx: bool = False
    output_tokens_source: Literal["usage", "tokenizer", "chunks"] = "chunks"
    chunks: int = 0
    empty_chunks: int = 0
    ttfo_ms: float | None = None  # reasoning requests only (the lines of a classic run leave them out)
    reasoning_tokens: int | None = None
    answer_tokens: int | None = None
    reasoning_tokens_source: Literal["usage", "chunks"] | None = None
    reasoning_chunks: int | None = None
    reasoning_tpot_ms: float | None = None
    answer_tpot_ms: float | None = None
    tool_calls: int | None = None  # shaped answers only (tools or response_format asked)
    answer_check: Literal["json_object", "json_schema", "tool_call"] | None = None
    answer_valid: bool | None = None
    turn: int | None = None  # agent loops only: the turn, how the session ended, time in the tool before it
    session_end: Literal["answered", "rounds", "failed"] | None = None
    tool_wait_ms: float | None = None
    finish_reason: str | None = None
    error: str | None = None
    retry_after_s: float | None = None


class TelemetryRow(LenientModel):
    """One row of telemetry.jsonl: one engine or GPU sample, scraped during the run (llmload/hosts/scrape.py)."""

    t: float
    target: str
    source: Literal["engine", "gpu", "scrape"]  # scrape: the cost of one scrape (seconds, bytes)
    metric: str  # the normalised name (docs/telemetry.md)
    value: float
    gpu: str | None = None  # source gpu: the DCGM gpu id


class TimeseriesRow(LenientModel):
    """One row of timeseries.jsonl: one target over one reporting interval."""

    t: float
    target: str
    interval_s: float
    requests: int
    failures: int
    output_tokens: int  # of the requests that completed in the interval
    streamed_tokens: int  # received during the interval, as they streamed
    output_tok_s: float
    req_s: float
    in_flight: int
    users: int
    ttft_p50_ms: float | None
    ttft_p99_ms: float | None
    itl_p50_ms: float | None
    itl_p99_ms: float | None
    loop_lag_p99_ms: float | None
    cpu_percent: float
