"""What llmload holds in one Locust process, attached to that process's Locust environment.

    st = state_of(environment)   # created on first use; every listener reaches it the same way

One object per process (a local runner, a master or a worker), no module globals: the current run
(its controller and, on a local runner or a master, its conductor), the simulators started for it,
its InfluxDB sink, and the web UI's memory of the last run. Locust hands every listener the
environment, so each finds the state there; the two events that carry no environment
(report_to_master, worker_report) are registered at init with the state bound.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from llmload.measure.clock_offset import ClockOffset

if TYPE_CHECKING:
    from llmload.hosts.targets import Prepared
    from llmload.locust.conductor import Conductor
    from llmload.locust.controller import LLMRun
    from llmload.locust.orphan import MasterWatch
    from llmload.locust.signals import RunSignals
    from llmload.schema.results_model import Summary
    from llmload.sinks.influx import InfluxSink
    from llmload.sinks.influx_preflight import Preflight


@dataclass
class ProcessState:
    run: LLMRun | None = None  # this process's share of the current run
    conductor: Conductor | None = None  # the plan and the results (a local runner or a master)
    prepared: Prepared | None = None  # simulators llmload started for the run
    allow_worker_loss: bool = False
    sink: InfluxSink | None = None  # the InfluxDB sink, when the scenario writes there
    preflight: Preflight | None = None  # what the InfluxDB check found at start (summary run.influx)
    pending_step: dict[str, Any] | None = None  # a worker: a step message that came before the scenario
    master_watch: MasterWatch | None = None  # a worker: its watch over the master (orphan.py)
    # a worker: its clock against the master's (clocks.py)
    clock: ClockOffset = field(default_factory=ClockOffset)
    exit_code: int | None = None
    summary: Summary | None = None
    signals: RunSignals | None = None
    # the web UI: the scenario the current run was built from, and the run the LLM tab shows
    web_loaded: tuple[str, str, tuple[str, ...]] | None = None
    web_last: Conductor | None = None
    web_last_verdict: str | None = None

    def forget_run(self) -> None:
        self.conductor = self.run = self.prepared = self.sink = self.preflight = None


def state_of(environment: Any) -> ProcessState:
    st = getattr(environment, "llmload_state", None)
    if st is None:
        st = ProcessState()
        environment.llmload_state = st
    return st
