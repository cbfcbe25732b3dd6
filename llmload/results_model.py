"""The results directory as typed models: requests.jsonl lines, timeseries.jsonl rows, summary.json's run.

    RequestLine.model_validate(json.loads(line))     # a reader gets typed fields, or a clear error
    python -m llmload.schemas docs/schemas           # writes the published JSON Schemas (schemas.py)

Writers build these shapes (records.RequestRecord.to_json, the conductor's interval rows, finish.py's
run block) and readers parse them (rebuild.py); docs/schemas/ holds the JSON Schemas generated from
these models, and tests/test_results_model.py checks that a real run's files match them and that the
published schemas are the models' own. The whole summary.json is a :class:`Summary`: summary.py
builds one, finish.py completes its run block, and every reader (the report layer, the terminal
table, the web UI, the InfluxDB summary points) reads its typed attributes.

A key that a writer leaves out stays out: summary.json is written with ``exclude_unset``, so a
block that is present only sometimes (``server_agreement``, a level's ``rate``, the open-loop
latencies, ``histograms`` in levels) is a field with a default that the writer sets when it has it.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

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
SUMMARY_SCHEMA = "llmload.summary/1"
RunStatus = Literal["ok", "invalid", "degraded", "interrupted", "incomplete"]


class _Model(BaseModel):
    # A reader ignores keys it does not know: a newer llmload may add some within llmload.summary/1
    # (a compare against an older baseline must still read it). What the writers put in is checked
    # by round trips in tests/test_results_model.py: validate, dump, get the file back key for key.
    model_config = ConfigDict(extra="ignore")


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


class TelemetryRow(_Model):
    """One row of telemetry.jsonl: one engine or GPU sample, scraped during the run (llmload/scrape.py)."""

    t: float
    target: str
    source: Literal["engine", "gpu"]
    metric: str  # the normalised name (docs/telemetry.md)
    value: float
    gpu: str | None = None  # source gpu: the DCGM gpu id


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


class LoopLag(_Model):
    count: int | None
    p50: float | None
    p99: float | None
    max: float | None


class CpuPercent(_Model):
    mean: float | None
    max: float | None


class ClientDelay(_Model):
    count: int | None
    p50: float | None
    p99: float | None
    max: float | None


class ReadTimestamps(_Model):
    """One target's body reads: how they were stamped (llmload/stamps.py)."""

    source: Literal["kernel", "user", "mixed"]
    kernel_reads: int
    user_reads: int
    coalesced_reads: int
    first_tokens: int = 0
    user_first_tokens: int = 0  # first tokens whose read had no kernel stamp (user-space stamp)
    coalesced_first_tokens: int = 0  # first tokens whose read brought later tokens too (one stamp)
    client_delay_ms: ClientDelay


class FigureFlag(_Model):
    """A figure the stamps cannot fully correct (llmload/client_health.py)."""

    target: str
    metric: Literal["ttft", "itl"]
    why: str


class SelfTest(_Model):
    """The capacity self-test before the run (llmload/selftest.py): this machine's cost per chunk
    through llmload's own stream client, against the scenario's expected chunk rate per process."""

    mode: Literal["auto", "on"]
    chunks: int  # token-bearing chunks the self-test read
    cpu_s: float  # the client thread's CPU time spent reading them
    chunk_cost_us: float
    capacity_chunks_per_s: float  # one core at 100%: 1 / chunk cost
    expected_chunks_per_s: float  # the scenario's peak, every target together
    processes: int  # load processes sharing it (local: 1; --workers N: N)
    expected_per_process: float
    load_percent: float  # expected_per_process / capacity_chunks_per_s, in %
    limit_percent: float
    warning: str | None = None


class ClientHealth(_Model):
    """The load generator's own health (llmload/client_health.py): timings are only as good as it is."""

    loop_lag_ms: LoopLag
    cpu_percent: CpuPercent
    timestamps: dict[str, ReadTimestamps] = {}
    unreliable: bool
    unreliable_reasons: list[str] = []
    notes: list[str] = []
    flags: list[FigureFlag] = []
    selftest: SelfTest | None = None  # set when the self-test ran (client.selftest)


class TelemetryInfo(_Model):
    scrape_interval_s: float
    scrapes: int | None


class Step(_Model):
    """One plan step entered (the conductor's level_meta): when, for which targets, at what load."""

    phase: str
    level: str
    targets: list[str]
    start: float
    end: float | None
    target_rate: float | None
    users: int | None
    planned_s: float | None = None  # the step's scheduled length (None: until its request count)


class RunBlock(_Model):
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
    influx: dict[str, Any] | None = None  # what the InfluxDB sink recorded (sinks/influx.py close)
    steps: list[Step] = []
    verdict: str | None = None
    exit_code: int | None = None


class Latency(_Model):
    """One latency metric over a window, in ms (metrics.Histogram.summary_ms); null percentiles when count is 0."""

    count: int
    mean: float | None
    p50: float | None
    p90: float | None
    p95: float | None
    p99: float | None
    max: float | None


class LevelRequests(_Model):
    """Requests of one target over one level: every class counted (docs/metrics.md)."""

    sent: int
    ok: int
    failed: int
    by_class: dict[Status, int]


class Requests(LevelRequests):
    """Requests of one target over the run: warm-up included in ``sent``, and what the plan held back."""

    in_window: int  # started inside the measurement window
    warmup: int
    dropped: int  # arrivals an open-loop executor could not send (no free user)
    delayed: int
    backoffs: int  # closed-loop pauses after failures
    backoff_s: float


class Tokens(_Model):
    prompt: int  # the server's usage (chat template included)
    prompt_client: int  # llmload's own count of the prompt text it sent
    output: int
    output_approx: bool


class Throughput(_Model):
    """llmload/throughput.py's one definition: tokens received inside the window over its span."""

    output_tok_s: float
    req_s: float
    window_s: float
    window_tokens: int
    window_requests: float
    levels: int


class HistogramSnapshot(_Model):
    """metrics.Histogram.to_dict: sorted microsecond values and their counts; merge by addition."""

    unit: Literal["us"]
    keys: list[int]
    counts: list[int]


class AgreementRow(_Model):
    figure: str
    unit: str
    client: float | None
    server: float | None
    diff_pct: float | None = None  # when both are known and the server's is not 0
    verdict: Literal["agrees", "differs", "n/a"]
    basis: str | None = None  # output tok/s: which scrapes the server's rate comes from


class Agreement(_Model):
    """llmload's figures beside the server's own /metrics deltas (llmload/agreement.py)."""

    scrapes: int
    rows: list[AgreementRow]
    agrees: bool | None


class TargetBlock(_Model):
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


class LevelRate(_Model):
    target: float | None
    achieved: float
    level_duration_s: float


class LevelTarget(_Model):
    """One target over one plan level: the run's figures without histograms, plus the load it got."""

    requests: LevelRequests
    tokens: Tokens
    latency_ms: dict[str, Latency]
    throughput: Throughput
    rate: LevelRate | None = None
    users: int | None = None  # closed loop
    max_open: int | None = None  # the most streams open at one moment (llmload/concurrency.py)


Figures = TargetBlock | LevelTarget  # what an SLO or a chart reads from, a run's or a level's
NOT_MEASURED = Latency(count=0, mean=None, p50=None, p90=None, p95=None, p99=None, max=None)


def latency(block: Figures, metric: str) -> Latency:
    """One metric's latency block; an empty one (count 0) where it was not measured (open loop only)."""
    return block.latency_ms.get(metric) or NOT_MEASURED


class Level(_Model):
    phase: str
    level: str
    value: float | None  # the number in ``c=8``, when the label has one
    targets: dict[str, LevelTarget]


class Summary(_Model):
    """summary.json (schema ``llmload.summary/1``, docs/results.md)."""

    schema_: Literal["llmload.summary/1"] = Field(alias="schema")
    run: RunBlock
    targets: dict[str, TargetBlock]
    levels: list[Level] = []

    def dump(self) -> dict[str, Any]:
        """The JSON form written to summary.json: only the keys its writer set."""
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True)
