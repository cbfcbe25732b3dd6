"""The resolved run: the validated scenario with what llmload found out, as one frozen value.

Built once per run on the process that owns it (a local runner or a master), after the simulators
are up and the targets answer:

    run = resolve_run(scenario, run_id=..., results_dir=..., mode=..., sims=..., models=..., salt=...)

What it adds to the scenario (the simulators' addresses, each target's default model, a drawn salt)
is set on the typed models with ``model_copy``: nothing goes back through ``--set`` strings or a
``model_dump(exclude_none=True)`` round trip, which lost values (``temperature: null`` came back as
0.0, ``influx.password_env: null`` as INFLUX_PASSWORD). A master sends ``scenario_payload(run)`` to
each worker, which validates it once (``scenario_from_payload``): the dump keeps every null.
"""

from __future__ import annotations

import pickle
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from llmload.config.scenario import Scenario, validate_data
from llmload.config.target_spec import Target

Mode = Literal["local", "distributed"]


@dataclass(frozen=True)
class SimAddress:
    """Where the simulator llmload started for one target listens (base URL, as this host reaches it)."""

    base_url: str


@dataclass(frozen=True)
class ResolvedRun:
    scenario: Scenario
    run_id: str
    results_dir: Path
    mode: Mode
    sim_targets: tuple[str, ...] = ()  # targets whose simulator this process started

    @property
    def distributed(self) -> bool:
        return self.mode == "distributed"


def with_sims(scenario: Scenario, sims: Mapping[str, SimAddress]) -> Scenario:
    """The scenario with each started simulator's address (and its /metrics, DCGM pages when unset)."""
    if not sims:
        return scenario
    return _targets(scenario, {name: _sim_urls(scenario.target(name), a) for name, a in sims.items()})


def with_found(scenario: Scenario, models: Mapping[str, str], salt: str | None) -> Scenario:
    """The scenario with the models the servers named (targets that set none) and a drawn salt."""
    out = _targets(scenario, {name: {"model": m} for name, m in models.items()})
    if salt is not None:
        out = out.model_copy(update={"workload": out.workload.model_copy(update={"salt": salt})})
    return out


def _sim_urls(t: Target, a: SimAddress) -> dict[str, Any]:
    update: dict[str, Any] = {"base_url": a.base_url}
    if not t.metrics_url:
        update["metrics_url"] = f"{a.base_url}/metrics"
    if not t.gpu_metrics_url:
        update["gpu_metrics_url"] = f"{a.base_url}/dcgm/metrics"
    return update


def _targets(scenario: Scenario, updates: Mapping[str, dict[str, Any]]) -> Scenario:
    targets = [t.model_copy(update=updates[t.name]) if t.name in updates else t for t in scenario.targets]
    return scenario.model_copy(update={"targets": targets})


def scenario_payload(scenario: Scenario) -> dict[str, Any]:
    """The scenario as a worker gets it: every field, nulls included (a null is a choice)."""
    payload: dict[str, Any] = scenario.model_dump(mode="json")
    return payload


def scenario_from_payload(data: dict[str, Any], source: str) -> Scenario:
    """A worker's one validation of the scenario its master sent."""
    return validate_data(data, {}, source)


@dataclass(frozen=True)
class Handoff:
    """``llmload run | ui | master`` to the Locust plugin in the same process: the scenario it
    validated (``--sim``, ``--targets`` and ``--influx`` applied as typed updates), so the plugin
    does not validate the file again. Passed as a file (Locust's argv carries its path); used only
    while the plugin's options still name the same file, ``--set`` edits and targets (the web UI's
    form may choose another scenario, which the plugin then loads itself).
    """

    key: tuple[str, tuple[str, ...], str]  # scenario file, --set edits, --targets
    scenario: Scenario

    def save(self, path: Path) -> None:
        path.write_bytes(pickle.dumps(self))

    @staticmethod
    def load(path: Path) -> Handoff | None:
        try:
            obj = pickle.loads(path.read_bytes())  # noqa: S301 - written by this process, just now
        except (OSError, pickle.UnpicklingError, EOFError):
            return None
        return obj if isinstance(obj, Handoff) else None
