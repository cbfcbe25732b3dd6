"""Which targets of a run were llmload's simulator, and with which profile: the one answer every
surface shows (report.html, report.md, junit.xml, capacity pages, ``llmload compare``, the web UI's
LLM tab, the terminal's table and its "who wins" line), so a forwarded demo report cannot read as
real engines.

A target is simulated when its kind is ``sim``: a scenario's own sim target, or a real target that
``simulate: true`` / ``--sim`` turned into its ``sim:`` stand-in (config/scenario.py: kind ``sim``,
its former kind kept as the label ``simulated_kind``). The scenario is recorded in summary.json's
``run.scenario``; it is read here with a lenient model of the few fields needed, so an older run
(or a profile since renamed) still says what it was.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict

from llmload.schema.results_model import Summary


class _Recorded(BaseModel):
    """The fields of a recorded target that say whether, and as what, it was simulated."""

    model_config = ConfigDict(extra="ignore")

    class _Sim(BaseModel):
        model_config = ConfigDict(extra="ignore")
        profile: str | dict[str, Any] | None = None

    name: str
    kind: str = ""
    sim: _Sim | None = None
    labels: dict[str, str] = {}


@dataclass(frozen=True)
class Simulated:
    target: str
    profile: str | None  # a shipped profile's name, an inline profile's name; None: a sim at its own URL
    stands_in_for: str | None = None  # the engine kind it replaced (simulate: true), when it did

    @property
    def label(self) -> str:
        """``simulated engine (profile X)``, and the engine it stood in for when it did."""
        text = f"simulated engine (profile {self.profile or 'not recorded'})"
        return text + (f" standing in for {self.stands_in_for}" if self.stands_in_for else "")

    def line(self) -> str:
        """``target: simulated engine (profile X)``."""
        return f"{self.target}: {self.label}"


def _profile(p: str | dict[str, Any] | None) -> str | None:
    if isinstance(p, dict):
        name = p.get("name")
        return f"{name} (inline)" if name else "inline"
    return p


def simulated_targets(targets: Iterable[Mapping[str, Any]]) -> dict[str, Simulated]:
    """The simulated targets among scenario targets (dumped form), by name, in the scenario's order."""
    out: dict[str, Simulated] = {}
    for raw in targets:
        try:
            t = _Recorded.model_validate(raw)
        except ValueError:
            continue  # not a target this version can read: say nothing rather than guess
        if t.kind == "sim":
            profile = _profile(t.sim.profile if t.sim is not None else None)
            out[t.name] = Simulated(t.name, profile, t.labels.get("simulated_kind"))
    return out


def simulated_in(summary: Summary) -> dict[str, Simulated]:
    """The simulated targets of a finished run (summary.json's ``run.scenario``), by name."""
    targets = summary.run.scenario.get("targets")
    return simulated_targets(targets if isinstance(targets, list) else [])


def banner(sims: Mapping[str, Simulated], targets: Iterable[str] | None = None) -> str | None:
    """One sentence naming each simulated target (of ``targets``, when given), or None when none is."""
    wanted = None if targets is None else set(targets)
    chosen = [s for name, s in sims.items() if wanted is None or name in wanted]
    if not chosen:
        return None
    return (
        "Simulated: "
        + "; ".join(s.line() for s in chosen)
        + ": their figures (GPU telemetry included) come from llmload's simulator, not from a real engine."
    )
