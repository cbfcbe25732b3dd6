"""The results directory as typed models: requests.jsonl lines, timeseries.jsonl rows, summary.json's run.

    RequestLine.model_validate(json.loads(line))     # a reader gets typed fields, or a clear error
    python -m llmload.schema.schemas docs/schemas           # writes the published JSON Schemas (schemas.py)
Writers build these shapes (records.RequestRecord.to_json, the conductor's interval rows, finish.py's
run block) and readers parse them (rebuild.py); docs/schemas/ holds the JSON Schemas generated from
these models, and tests/test_results_model.py checks that a real run's files match them and that the
published schemas are the models' own. The whole summary.json is a :class:`Summary`: summary.py
builds one, finish.py completes its run block, and every reader (the report layer, the terminal
table, the web UI, the InfluxDB summary points) reads its typed attributes.

A key that a writer leaves out stays out (summary.json is written with ``exclude_unset``): a block
present only sometimes (``server_agreement``, a level's ``rate``) is a field with a default.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

# The lines (results_lines.py), the client's health (client_model.py) and the scraped blocks
# (scrape_model.py) are named here too: this module
# stays the one place a reader imports the results models from.
from llmload.schema.answers_model import Answers as Answers
from llmload.schema.answers_model import ReasoningTokens as ReasoningTokens
from llmload.schema.answers_model import Sessions as Sessions
from llmload.schema.client_model import ClientDelay as ClientDelay
from llmload.schema.client_model import ClientHealth as ClientHealth
from llmload.schema.client_model import CpuPercent as CpuPercent
from llmload.schema.client_model import FigureFlag as FigureFlag
from llmload.schema.client_model import LoopLag as LoopLag
from llmload.schema.client_model import ReadTimestamps as ReadTimestamps
from llmload.schema.client_model import SelfTest as SelfTest
from llmload.schema.client_model import SelfTestLevel as SelfTestLevel
from llmload.schema.client_model import WorkerClock as WorkerClock
from llmload.schema.results_lines import LenientModel
from llmload.schema.results_lines import RequestLine as RequestLine
from llmload.schema.results_lines import Status as Status
from llmload.schema.results_lines import TelemetryRow as TelemetryRow
from llmload.schema.results_lines import TimeseriesRow as TimeseriesRow
from llmload.schema.scrape_model import EngineFigures as EngineFigures
from llmload.schema.scrape_model import ScrapeCost as ScrapeCost

SUMMARY_SCHEMA = "llmload.results.summary/1"
RunStatus = Literal["ok", "invalid", "degraded", "interrupted", "incomplete"]


class LostWorker(LenientModel):
    worker: str
    t: float
    last_report: float
    reason: str
    unaccounted: dict[str, int]


class TelemetryInfo(LenientModel):
    scrape_interval_s: float | None  # None: scraped before and after the load only (the default)
    scrapes: int | None


class Step(LenientModel):
    """One plan step entered (the conductor's level_meta): when, for which targets, at what load."""

    phase: str
    level: str
    targets: list[str]
    start: float
    end: float | None
    target_rate: float | None
    users: int | None
    planned_s: float | None = None  # the step's scheduled length (None: until its request count)


class InfluxCounts(LenientModel):
    """What ``run.influx`` counts: this process's InfluxDB points (sinks/influx.py InfluxSink.counts,
    docs/telemetry.md). spooled = resent + replayed + remaining."""

    written: int = 0  # accepted on their first write
    spooled: int = 0  # went to influx-spool/ (an outage, a rejected batch)
    resent: int = 0  # re-sent from the spool by the sink itself once the server answered again
    replayed: int = 0  # re-sent by `llmload influx replay` (during or after the run)
    remaining: int | None = None  # still in influx-spool/ (None in summaries older than the catch-up)
    dropped: int = 0  # lost: the spool itself could not be written
    spool_dir: str | None = None
    error: str | None = None

    @classmethod
    def of(cls, run: RunBlock) -> InfluxCounts | None:
        return None if run.influx is None else cls.model_validate(run.influx)

    def line(self) -> str:
        """One line for the terminal and the reports."""
        if self.error:
            return f"InfluxDB: the sink failed at close: {self.error}"
        text = f"InfluxDB: {self.written:,} points written"
        if self.spooled:
            left = self.spooled - self.resent - self.replayed if self.remaining is None else self.remaining
            text += f"; {self.spooled:,} spooled, {self.resent:,} re-sent by the catch-up"
            text += f", {self.replayed:,} by llmload influx replay" if self.replayed else ""
            text += f", {left:,} remaining" + (f" (llmload influx replay {self.spool_dir})" if left else "")
        else:
            text += ", none spooled"
        if self.dropped:
            text += f"; {self.dropped:,} dropped (the spool could not be written)"
        return text


class Shard(LenientModel):
    """One results directory a merged run was built from (``llmload merge``, llmload/results/merge.py)."""

    results_dir: str
    run_id: str
    targets: list[str]
    workers: list[str]
    exit_code: int | None


class RunBlock(LenientModel):
    """summary.json's ``run``: what ran, how it ended, and why (docs/results.md)."""

    run_id: str
    scenario_name: str
    scenario_file: str | None
    scenario: dict[str, Any]  # the validated scenario, secrets removed (scenario.py owns its shape)
    started_at: str
    ended_at: str
    duration_s: float
    measure_start: float
    measure_end: float
    versions: dict[str, str | None]
    argv: list[str] = []
    mode: Literal["local", "distributed"]
    workers: list[str]
    status: RunStatus
    reasons: list[str]
    client: ClientHealth
    slo: dict[str, Any] | None = None  # the SLOs that are set (slo_spec.SloSpec, validated on reading)
    telemetry: TelemetryInfo | None = None
    lost_workers: list[LostWorker] = []
    stop_reason: str | None = None
    results_dir: str | None = None
    influx: dict[str, Any] | None = Field(
        default=None,
        description="what the InfluxDB sink recorded (sinks/influx.py close; read it as InfluxCounts): "
        "written, spooled, resent (by the sink's own catch-up), replayed (by llmload influx replay), "
        "remaining (still spooled), dropped, spool_dir, preflight",
    )  # fmt: skip
    steps: list[Step] = []
    verdict: str | None = None
    exit_code: int | None = None
    clocks: dict[str, WorkerClock] = {}  # distributed: each worker's clock against the master's
    shards: list[Shard] = []  # a merged run (llmload merge): the shards' directories, in the order given


class Latency(LenientModel):
    """One latency metric over a window, in ms (metrics.Histogram.summary_ms); null percentiles when count is 0."""

    count: int
    mean: float | None
    p50: float | None
    p90: float | None
    p95: float | None
    p99: float | None
    max: float | None


class LevelRequests(LenientModel):
    """Requests of one target over one level: every class counted (docs/metrics.md)."""

    sent: int
    ok: int
    failed: int
    by_class: dict[Status, int]
    answers: Answers | None = None  # only when answers were judged or tools called


class Requests(LevelRequests):
    """Requests of one target over the run: warm-up included in ``sent``, and what the plan held back."""

    in_window: int  # started inside the measurement window
    warmup: int
    dropped: int  # arrivals an open-loop executor could not send (no free user)
    delayed: int
    backoffs: int  # closed-loop pauses after failures
    backoff_s: float


class Tokens(LenientModel):
    prompt: int  # the server's usage (chat template included)
    prompt_client: int  # llmload's own count of the prompt text it sent
    output: int
    output_approx: bool
    reasoning: ReasoningTokens | None = None  # only when the window had reasoning


class Throughput(LenientModel):
    """llmload/measure/throughput.py's one definition: tokens received inside the window over its span."""

    output_tok_s: float
    req_s: float
    window_s: float
    window_tokens: int
    window_requests: float
    levels: int


class HistogramSnapshot(LenientModel):
    """metrics.Histogram.to_dict: sorted microsecond values and their counts; merge by addition."""

    unit: Literal["us"]
    keys: list[int]
    counts: list[int]


class AgreementRow(LenientModel):
    figure: str
    unit: str
    client: float | None
    server: float | None
    diff_pct: float | None = None  # when both are known and the server's is not 0
    verdict: Literal["agrees", "differs", "n/a"]
    basis: str | None = None  # output tok/s: which scrapes the server's rate comes from


class Agreement(LenientModel):
    """llmload's figures beside the server's own /metrics deltas (llmload/measure/agreement.py)."""

    scrapes: int
    rows: list[AgreementRow]
    agrees: bool | None
    targets: list[str] = []  # targets sharing one server (one metrics_url): its counters against their sum


class TargetBlock(LenientModel):
    """One target over the run (warm-up excluded from every figure but ``requests``)."""

    kind: str
    model: str | None
    base_url: str | None
    labels: dict[str, str]
    cost_per_hour: float | None
    requests: Requests
    tokens: Tokens
    latency_ms: dict[str, Latency]  # metrics.LATENCY_METRICS; the open-loop ones only when measured
    throughput: Throughput
    histograms: dict[str, HistogramSnapshot] = {}
    server_agreement: Agreement | None = None  # when the target has a metrics_url
    scrape: ScrapeCost | None = None  # when its metrics_url answered at least once
    gpu_scrape: ScrapeCost | None = None  # when its gpu_metrics_url answered at least once
    engine: EngineFigures | None = None  # likewise, when its /metrics was scraped
    goodput_req_s: float | None = None  # ok requests a second that met every per-request SLO (report/slo.py)


class LevelRate(LenientModel):
    target: float | None
    achieved: float
    level_duration_s: float


class LevelTarget(LenientModel):
    """One target over one plan level: the run's figures without histograms, plus the load it got."""

    requests: LevelRequests
    tokens: Tokens
    latency_ms: dict[str, Latency]
    throughput: Throughput
    rate: LevelRate | None = None
    users: int | None = None  # closed loop
    max_open: int | None = None  # the most streams open at one moment (llmload/measure/concurrency.py)


Figures = TargetBlock | LevelTarget  # what an SLO or a chart reads from, a run's or a level's
NOT_MEASURED = Latency(count=0, mean=None, p50=None, p90=None, p95=None, p99=None, max=None)


def latency(block: Figures, metric: str) -> Latency:
    """One metric's latency block; an empty one (count 0) where it was not measured (open loop only)."""
    return block.latency_ms.get(metric) or NOT_MEASURED


class Level(LenientModel):
    phase: str
    level: str
    value: float | None  # the number in ``c=8``, when the label has one
    targets: dict[str, LevelTarget]


class Summary(LenientModel):
    """summary.json (schema ``llmload.results.summary/1``, docs/results.md)."""

    schema_: Literal["llmload.results.summary/1"] = Field(alias="schema")
    run: RunBlock
    targets: dict[str, TargetBlock]
    levels: list[Level] = []

    def dump(self) -> dict[str, Any]:
        """The JSON form written to summary.json: only the keys its writer set."""
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True)
