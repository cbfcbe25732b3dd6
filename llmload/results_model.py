"""The results directory as typed models: requests.jsonl lines, timeseries.jsonl rows, summary.json's run.

    RequestLine.model_validate(json.loads(line))     # a reader gets typed fields, or a clear error
    python -m llmload.results_model docs/schemas     # writes the published JSON Schemas

Writers build these shapes (records.RequestRecord.to_json, the conductor's interval rows, finish.py's
run block) and readers parse them (rebuild.py); docs/schemas/ holds the JSON Schemas generated from
these models, and tests/test_results_model.py checks that a real run's files match them and that the
published schemas are the models' own. Per-target figures (summary.json's ``targets``) stay a mapping
of documented blocks (docs/results.md) for now.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
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
    "aborted",
]
RunStatus = Literal["ok", "invalid", "degraded", "interrupted", "incomplete"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RequestLine(_Model):
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
    finish_reason: str | None = None
    error: str | None = None
    retry_after_s: float | None = None


class TimeseriesRow(_Model):
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


class LostWorker(_Model):
    worker: str
    t: float
    last_report: float
    reason: str
    unaccounted: dict[str, int]


class RunBlock(BaseModel):
    """summary.json's ``run``: what ran, how it ended, and why (docs/results.md)."""

    model_config = ConfigDict(extra="allow")  # sections owned elsewhere (telemetry, influx, steps)

    run_id: str
    scenario_name: str
    scenario_file: str | None
    started_at: str
    ended_at: str
    duration_s: float
    mode: Literal["local", "distributed"]
    workers: list[str]
    status: RunStatus
    reasons: list[str]
    stop_reason: str | None = None
    verdict: str | None = None
    exit_code: int | None = None
    lost_workers: list[LostWorker] = []


SCHEMAS: dict[str, type[BaseModel]] = {
    "requests-line": RequestLine,
    "timeseries-row": TimeseriesRow,
    "summary-run": RunBlock,
}


def schema_text(model: type[BaseModel]) -> str:
    return json.dumps(model.model_json_schema(), indent=2, sort_keys=True) + "\n"


def write_schemas(out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, model in SCHEMAS.items():
        p = out_dir / f"{name}.schema.json"
        p.write_text(schema_text(model))
        paths.append(p)
    return paths


if __name__ == "__main__":
    for path in write_schemas(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/schemas")):
        print(path)
