"""Scenario files: YAML -> validated, typed, immutable model.

Every error names the file, the line and the field, in one line, and maps to
exit code 2 (``InputError``). Unknown keys are rejected, so a typo never passes
silently. See docs/scenarios.md for every field.

The models are frozen: what validation resolves (a target's metrics_url from its base_url, the
``users``/``duration`` shorthand as a phase, ``simulate: true`` as sim targets) is settled inside
the validators, and nothing after validation edits a scenario. A changed scenario (a ``--targets``
subset, the simulators' addresses) is a new one: a copy, or data validated again.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from llmload.base.strict import settle
from llmload.config.cost_spec import CostSpec
from llmload.config.durations import Duration, Span, Timeout
from llmload.config.executors import Phase, Sweep, longest_s, phases_from_shorthand
from llmload.config.influx_config import InfluxConfig
from llmload.config.limits import MAX_RATE_PER_S, MAX_USERS
from llmload.config.scenario_errors import check_unique_names, field_error, input_error
from llmload.config.secrets import redact
from llmload.config.slo_spec import SloSpec
from llmload.config.spec import Spec
from llmload.config.target_spec import SAFE_NAME, SAFE_NAME_RULE, Target
from llmload.config.workload_spec import Workload, default_workload, foreign_field
from llmload.config.yamlsrc import InputError, apply_overrides, load_yaml, parse_yaml

MIN_SCRAPE_INTERVAL_S = 1.0  # a vLLM CPU front-end stalled its streams 10-230 ms per scrape here


class Client(Spec):
    ready_timeout: Timeout = Field(
        600.0, description="how long to wait for every target's /health and /v1/models before exit 2"
    )
    connect_timeout: Timeout = 10.0
    first_byte_timeout: Timeout = Field(
        300.0,
        description="longest wait for the response headers and the first token (queueing and prefill "
        "of a long prompt)",
    )
    read_timeout: Timeout = Field(120.0, description="longest silence between chunks once tokens flow")
    request_timeout: Timeout = 600.0
    failure_pause: Duration = Field(
        0.5,
        description="closed loop: pause after a failed request, doubled for each failure in a row "
        "(0: none); a Retry-After from the server replaces it, kept within failure_pause and "
        "failure_pause_max",
    )
    failure_pause_max: Duration = Field(
        10.0, description="the longest pause after a failure, whatever a Retry-After asks"
    )
    report_interval: Timeout = 2.0
    scrape_interval: Duration | None = Field(
        None,
        description="seconds between scrapes of each target's /metrics during the load (at least 1 s); "
        "off (the default): once before the load and once after it only, which is all the server "
        "agreement needs. Every scrape costs the server's front end time that lands on the streams it "
        "serves: bench/bench_scrape_cost.py measures it (docs/telemetry.md)",
    )
    timestamps: Literal["kernel", "user"] = Field(
        "kernel",
        description="stamp each read with the kernel's receive time where the socket gives it (plain "
        "HTTP on Linux), or always with the client's clock when the read returns (docs/metrics.md)",
    )
    reader: Literal["batched", "greenlet"] = Field(
        "batched",
        description="how a process reads its streams: batched, one loop that reads every ready stream "
        "with no greenlet switch per chunk (plain HTTP); greenlet, one greenlet per stream (TLS "
        "targets always read so) (docs/metrics.md)",
    )
    loop_lag_threshold_ms: float = Field(
        25.0,
        gt=0,
        description="loop-lag p99 above this makes the run invalid where its figures rest on user-space "
        "stamps (a note with kernel stamps)",
    )
    cpu_threshold_percent: float = Field(90.0, gt=0, le=100)
    selftest: Literal["auto", "on", "off"] = Field(
        "auto",
        description="a 3-6 s loopback self-test of this machine's cost per chunk before the run, with a "
        "warning when the expected chunk rate per process passes 80% of one core or the rate at which its "
        "reads coalesced (llmload/client/selftest.py): auto runs it from 2,000 expected chunks/s per process",
    )
    stream_tokens_per_s: float = Field(
        50.0,
        gt=0,
        description="the decode speed one stream is expected to get, for the self-test's estimate of the "
        "chunk rate: closed loop, users x targets x this; open loop, at most max_vus x targets x this",
    )

    @field_validator("selftest", mode="before")
    @classmethod
    def _yaml_on_off(cls, v: Any) -> Any:
        """YAML 1.1 reads a bare on/off as true/false: take them back as the words."""
        return {True: "on", False: "off"}.get(v, v) if isinstance(v, bool) else v

    bool_words = frozenset({"scrape_interval"})

    @field_validator("scrape_interval", mode="before")
    @classmethod
    def _scrape_off(cls, v: Any) -> Any:
        """``off`` (YAML 1.1 reads a bare off as false) is the default: no scrape during the load."""
        if v is True:  # ``on``: read as 1 s before (llmload/config/spec.py)
            raise ValueError("expected an interval such as 5s, or off")
        return None if v is False or v == "off" else v

    @field_validator("scrape_interval")
    @classmethod
    def _scrape(cls, v: float | None) -> float | None:
        if v is not None and v < MIN_SCRAPE_INTERVAL_S:
            raise ValueError(f"must be at least {MIN_SCRAPE_INTERVAL_S:g} s")
        return v

    @model_validator(mode="after")
    def _pause_range(self) -> Client:
        if self.failure_pause > self.failure_pause_max:
            raise ValueError(
                f"failure_pause ({self.failure_pause:g} s) is longer than failure_pause_max "
                f"({self.failure_pause_max:g} s): every pause lies between them"
            )
        return self


class Load(Spec):
    users: int | None = Field(
        None, ge=1, le=MAX_USERS, description="concurrent streams per target (constant-vus shorthand)"
    )
    spawn_rate: float | None = Field(
        None, gt=0, le=MAX_RATE_PER_S, description="users started per second (shorthand)"
    )
    duration: Span | None = Field(None, description="shorthand phase duration")
    max_requests: int | None = Field(None, ge=1, description="stop each target after this many requests")
    warmup: Duration = Field(
        0.0, description="excluded from the figures at the start of the run: shorter than the load"
    )
    stop_grace: Duration = Field(60.0, description="in-flight streams may finish this long after the end")
    mode: Literal["parallel", "sequential"] = "parallel"
    stop_on_failures: int | None = Field(None, ge=1, description="stop when this many requests have failed")
    stop_on_failure_ratio: float | None = Field(None, gt=0, le=1, description="stop above this failure ratio")
    stop_on_slo_miss: bool = Field(
        False,
        description="end a step as soon as its requests can no longer meet slo ttft_p99_ms, e2e_p99_ms "
        "or error_rate, however the rest go (capacity probes, a sweep's top levels)",
    )
    phases: list[Phase] = Field(default_factory=list)

    @model_validator(mode="after")
    def _shorthand(self) -> Load:
        short = self.users is not None or self.duration is not None
        if short and self.phases:
            raise ValueError("give either users/duration (one constant-vus phase) or phases, not both")
        if not self.phases:
            phases = phases_from_shorthand(self.users or 1, self.spawn_rate, self.duration, self.max_requests)
            # The shorthand now lives in the phase; clearing it keeps a dumped scenario re-loadable.
            settle(self, phases=phases, users=None, spawn_rate=None, duration=None, max_requests=None)
        return self

    @model_validator(mode="after")
    def _warmup(self) -> Load:
        """The warm-up runs from the run's start (each target's, sequential): as long as the load, it
        leaves nothing measured. A load bounded by requests is not known to end; a capacity search
        adds each probe's warm-up to its hold (llmload/capacity/probe.py)."""
        sends = longest_s(self.phases)
        if self.warmup and sends is not None and self.warmup >= sends:
            raise field_error(
                "warmup",
                f"the warm-up ({self.warmup:g} s) must be shorter than the load's duration ({sends:g} s): "
                "every request would fall in it",
            )
        first = self.phases[0] if self.phases else None
        if self.warmup and isinstance(first, Sweep) and first.hold is not None and self.warmup >= first.hold:
            raise field_error(
                "warmup",
                f"the warm-up ({self.warmup:g} s) must be shorter than the sweep's hold ({first.hold:g} s): "
                "its first level would measure nothing",
            )
        return self


class Output(Spec):
    dir: str = Field("results", description="parent folder of the run's results directory")


class Scenario(Spec):
    name: str = "scenario"
    description: str = ""
    targets: list[Target] = Field(min_length=1)
    workload: Workload = Field(default_factory=default_workload)
    load: Load = Field(default_factory=Load)
    client: Client = Field(default_factory=Client)
    slo: SloSpec | None = None
    cost: CostSpec | None = Field(None, description="what self-hosting is weighed against (docs/reports.md)")
    influx: InfluxConfig | None = None
    output: Output = Field(default_factory=Output)
    simulate: bool = Field(
        False, description="run every target against its `sim:` stand-in (try a GPU scenario without GPUs)"
    )
    source: str = Field("", exclude=True)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not SAFE_NAME.fullmatch(v):
            raise ValueError(f"{SAFE_NAME_RULE}: it names the results directory")
        return v

    @model_validator(mode="before")
    @classmethod
    def _trace_load(cls, data: Any) -> Any:
        """A trace workload with no load of its own is replayed: one trace phase."""
        if not isinstance(data, dict) or not isinstance(data.get("workload"), dict):
            return data
        load = data.get("load")
        if data["workload"].get("kind") == "trace" and (load is None or load == {}):
            return {**data, "load": {"phases": [{"executor": "trace"}]}}
        return data

    @model_validator(mode="after")
    def _trace_pairs(self) -> Scenario:
        traced = [p.executor == "trace" for p in self.load.phases]
        if any(traced) and self.workload.kind != "trace":
            raise field_error("load", "a trace phase replays `workload: {kind: trace, path: ...}`")
        if self.workload.kind == "trace" and not all(traced):
            raise field_error(
                "load",
                "a trace workload is replayed by trace phases only (load: {phases: [{executor: trace}]})",
            )
        return self

    @model_validator(mode="after")
    def _capacity_alone(self) -> Scenario:
        if len(self.load.phases) > 1 and any(p.executor == "capacity" for p in self.load.phases):
            raise field_error(
                "load", "a capacity phase is a search of its own: make it the scenario's only phase"
            )
        return self

    @model_validator(mode="after")
    def _shapes_need_chat(self) -> Scenario:
        wl = self.workload
        if wl.tools is None and wl.response_format is None:
            return self
        text = [t.name for t in self.targets if t.api == "completions"]
        if text:
            raise ValueError(
                f"workload tools/response_format need api chat or responses; "
                f"target(s) {', '.join(text)} use api completions"
            )
        return self

    @model_validator(mode="after")
    def _simulate(self) -> Scenario:
        if not self.simulate:
            return self
        missing = [t.name for t in self.targets if t.kind != "sim" and t.sim is None]
        if missing:
            raise ValueError(f"simulate: true needs a `sim:` stand-in on target(s) {', '.join(missing)}")
        stand_ins = [
            t
            if t.kind == "sim"
            else t.model_copy(
                update={
                    "labels": {"simulated_kind": t.kind, **t.labels},
                    "kind": "sim",
                    "base_url": None,
                    "metrics_url": None,
                    "gpu_metrics_url": None,
                    "api_key_env": None,
                }
            )
            for t in self.targets
        ]
        settle(self, targets=stand_ins, simulate=False)  # a dumped scenario re-validates as sim targets
        return self

    def target(self, name: str) -> Target:
        for t in self.targets:
            if t.name == name:
                return t
        raise KeyError(name)

    def public_dict(self) -> dict[str, Any]:
        """The scenario as data with secrets removed (for results and reports)."""
        public: dict[str, Any] = redact(self.model_dump(mode="json"))
        return public


def validate_data(
    data: Any, lines: dict[tuple[Any, ...], int], source: str, file_data: Any = None
) -> Scenario:
    """The validated scenario, or InputError naming the file's line and field.

    ``file_data`` is the data as the file had it before ``--set`` edits: a bad value that an edit
    put there is blamed on ``--set``, not on a line of the file (llmload/config/scenario_errors.py).
    """
    if not isinstance(data, dict):
        raise InputError(f"{source}:1: the scenario must be a mapping with at least `targets`")
    check_unique_names(data, lines, source)
    try:
        return Scenario.model_validate(data).model_copy(update={"source": source})
    except ValidationError as e:
        raise input_error(e, data, lines, source, file_data, foreign_field) from None


def load_scenario(path: str | Path, overrides: list[str] | None = None) -> Scenario:
    data, lines = load_yaml(path)
    file_data = data
    if overrides:
        data = apply_overrides(copy.deepcopy(data) if data is not None else {}, overrides, "--set")
    return validate_data(data, lines, str(path), file_data if overrides else None)


def parse_scenario(text: str, source: str = "<string>", overrides: list[str] | None = None) -> Scenario:
    data, lines = parse_yaml(text, source)
    if overrides:
        data = apply_overrides(data if data is not None else {}, overrides, "--set")
    return validate_data(data, lines, source)
