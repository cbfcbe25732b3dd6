"""Distributed readiness: every worker reaches every target before the first request is sent.

    check_from_worker(environment, scenario, sims)   # a worker, on the master's scenario message
    WorkerReadiness(timeout_s).wait_line(workers)     # the master's conductor, each tick before step 0

The master checks its targets before the run is built (targets.wait_ready), but the workers send
the requests, from other hosts: a ``base_url`` that resolves or routes on the master's host may not
on a worker's (measured: a master-started simulator on the master's loopback left the master
waiting with no message). Each worker runs the same check (/health, the model in /v1/models)
within the same ``client.ready_timeout`` and relays what it waits for; the master prints it, named
by worker, and starts the plan once every worker is ready. A worker that cannot reach a target in
time ends the run before anything is sent: one line, exit 2 (as a local run's readiness does).
"""

from __future__ import annotations

import time
from typing import Any

from llmload.config.scenario import Scenario
from llmload.hosts.targets import TargetNotReady, wait_ready
from llmload.locust.waits import Every, say

MSG_REACH = "llmload_reach"  # worker -> master: {"state": "waiting" | "ready" | "failed", "line": str}
REPORT_SLACK_S = 15.0  # a worker that said nothing this long after its own timeout is named


def sim_hint(sims: list[str], master_host: str) -> str:
    return (
        f" (a simulator the master started listens on its --master-bind-host; reached here through "
        f"--master-host {master_host}: start the master with --master-bind-host 0.0.0.0 or an address "
        f"this host routes to, or run `llmload sim` as a service and give its base_url)"
        if sims
        else ""
    )


def check_from_worker(environment: Any, scenario: Scenario, sims: list[str]) -> None:
    """A worker: wait for each target as the master did, and tell the master what it waits for."""
    runner = environment.runner
    master_host = environment.parsed_options.master_host

    def relay(line: str) -> None:
        say(line.replace("llmload: ", "llmload worker: ", 1))
        runner.send_message(MSG_REACH, {"state": "waiting", "line": line.removeprefix("llmload: ")})

    try:
        wait_ready(scenario.targets, timeout_s=scenario.client.ready_timeout, say=relay)
    except TargetNotReady as e:
        name = str(e).split(" ", 2)[1] if str(e).startswith("target ") else ""
        line = f"{e}" + sim_hint([s for s in sims if s == name], master_host)
        say(f"llmload worker: {line}")
        runner.send_message(MSG_REACH, {"state": "failed", "line": line})
        return
    runner.send_message(MSG_REACH, {"state": "ready", "line": ""})


class WorkerReadiness:
    """The master's view: each worker's last readiness report."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self.state: dict[str, str] = {}
        self.last_line: dict[str, str] = {}
        self.t0: float | None = None  # the first check (the scenario has just been sent)
        self.every = Every(first_s=5.0)

    def _since(self) -> float:
        if self.t0 is None:
            self.t0, self.every = time.monotonic(), Every(first_s=5.0)
        return time.monotonic() - self.t0

    def report(self, worker: str, data: dict[str, Any]) -> None:
        self.state[worker] = str(data.get("state"))
        line = str(data.get("line") or "")
        if line:
            self.last_line[worker] = line
            if self.state[worker] == "waiting":
                say(f"llmload: worker {worker}: {line}")

    def failure(self, workers: list[str]) -> str | None:
        """The line that ends the run: a worker that cannot reach a target, or that never said."""
        for w in workers:
            if self.state.get(w) == "failed":
                return f"worker {w}: {self.last_line.get(w, 'cannot reach a target')}"
        if self._since() > self.timeout_s + REPORT_SLACK_S:
            silent = [w for w in workers if self.state.get(w) != "ready"]
            if silent:
                return (
                    f"worker(s) {', '.join(silent)} did not report reaching the targets within "
                    f"{self.timeout_s:g} s (client.ready_timeout)"
                )
        return None

    def ready(self, workers: list[str]) -> bool:
        pending = [w for w in workers if self.state.get(w) != "ready"]
        if pending and self.every.due():
            say(
                f"llmload: waiting for {len(pending)} worker(s) to reach the targets: "
                + "; ".join(f"{w}: {self.last_line.get(w, 'checking')}" for w in pending)
            )
        return bool(workers) and not pending
