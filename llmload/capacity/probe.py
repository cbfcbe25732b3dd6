"""One capacity probe: a run of its own at one load, for one target, and what it measured.

A probe is ``llmload run`` on the user's scenario with its load replaced by one phase
(``--set load=...``): a constant-arrival-rate phase at the probe's rate, held for its warm-up plus
``(requests + margin) / rate`` seconds (at most ``hold_max``), or a constant-vus phase of the
probe's streams ending after ``requests + margin`` requests plus one per stream (the first wave,
sent in a warm-up no longer than one request) or its warm-up plus ``hold_max`` seconds. The margin,
``2 sqrt(requests) + 2``, keeps the measured count at ``requests`` or more. Probes run without the
self-test (a probe beside another target's probe would measure that one's load) and with
``load.stop_on_slo_miss``.
``load.stop_on_slo_miss`` ends a probe early once its SLOs are missed for good
(llmload/measure/slo_watch.py). Each probe writes a full results directory, so every request it sent is
accounted for there; its console output goes next to it (``<probe>.log``).

Paired: every target's probe at the same load and repeat sends the same requests (same seed, same
salt), and no probe reuses another's prompts (the salt names the probe), so one probe cannot warm
the server's prefix cache for the next.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llmload.base.children import spawn
from llmload.config.executors import Capacity
from llmload.config.scenario import Scenario

SEED_STEP = 7919  # a repeat's seed: the scenario's seed plus this times the repeat number


@dataclass(frozen=True)
class ProbeSpec:
    number: int  # 1-based, over the whole search
    target: str
    value: float
    repeat: int
    vary: str = "rate"

    @property
    def level(self) -> str:
        return f"rate={self.value:g}" if self.vary == "rate" else f"c={int(self.value)}"

    def dirname(self) -> str:
        again = f"-r{self.repeat}" if self.repeat else ""
        return f"{self.number:02d}-{self.target}-{self.level}{again}"


def probe_load(sc: Scenario, settings: Capacity, spec: ProbeSpec) -> dict[str, Any]:
    """The probe's ``load:`` mapping."""
    warmup = settings.warmup if settings.warmup is not None else sc.load.warmup
    # Arrivals fall on either side of the warm-up's end by chance: a margin of two standard
    # deviations (and two) keeps the measured count at ``requests`` or more.
    margin = int(2 * math.sqrt(settings.requests)) + 2
    if settings.vary == "rate":
        hold = min((settings.requests + margin) / spec.value, settings.hold_max)
        phase: dict[str, Any] = {
            "executor": "constant-arrival-rate",
            "name": spec.level,
            "rate": spec.value,
            "duration": warmup + hold,
            "arrival": settings.arrival,
            "max_vus": settings.max_vus,
        }
    else:
        phase = {
            "executor": "constant-vus",
            "name": spec.level,
            "vus": int(spec.value),
            "duration": warmup + settings.hold_max,
            "max_requests": settings.requests + margin + int(spec.value),  # the first wave: warm-up
        }
    return {"warmup": warmup, "stop_grace": sc.load.stop_grace, "stop_on_slo_miss": True, "phases": [phase]}


def probe_command(
    scenario: str,
    sets: list[str],
    sc: Scenario,
    settings: Capacity,
    spec: ProbeSpec,
    results: Path,
    salt: str | None,
    *,
    sim: bool,
    workers: int,
) -> list[str]:
    """``llmload run`` for one probe (the user's ``--set`` edits first, the probe's after them)."""
    cmd = [sys.executable, "-m", "llmload", "run", scenario]
    for s in sets:
        cmd += ["--set", s]
    cmd += ["--set", "load=" + json.dumps(probe_load(sc, settings, spec))]
    cmd += ["--set", f"workload.seed={sc.workload.seed + SEED_STEP * spec.repeat}"]
    if salt is not None:
        key = f"{settings.vary[0]}{spec.value:g}r{spec.repeat}"
        cmd += ["--set", f"workload.salt={salt}-{key}"]
    cmd += ["--set", "client.selftest=off"]
    cmd += ["--targets", spec.target, "--results", str(results), "--quiet", "--no-reports"]
    if sim:
        cmd.append("--sim")
    if workers:
        cmd += ["--workers", str(workers)]
    return cmd


def start_probe(cmd: list[str], log: Path) -> subprocess.Popen[bytes]:
    """Start the probe in a session of its own: a signal reaches it only as the search forwards it."""
    log.parent.mkdir(parents=True, exist_ok=True)
    return spawn(cmd, own_session=True, log=log)


def last_line(log: Path) -> str:
    """The probe's last console line that says something (a bad input's one line, a verdict)."""
    try:
        lines = [x.strip() for x in log.read_text(errors="replace").splitlines() if x.strip()]
    except OSError:
        return ""
    return lines[-1] if lines else ""
