"""The probes of a capacity search, run and judged: one thread per target (or one after the other),
each waiting on its probe runs, and a signal passed on to the probes that are running.
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llmload.base.exitcodes import EXIT_INPUT, EXIT_INVALID
from llmload.capacity.judge import GOODPUT_SHARE, Verdict, judge
from llmload.capacity.outcome import ProbeFigure, ProbeRow
from llmload.capacity.probe import ProbeSpec, last_line, probe_command, start_probe
from llmload.capacity.search import Outcome, next_probe
from llmload.config.executors import Capacity
from llmload.config.scenario import Scenario
from llmload.report.results import BadResults, load_run
from llmload.report.slo import fmt
from llmload.schema.results_model import Level, latency


@dataclass
class Search:
    """One capacity search: its settings, the probes so far, and how to stop it."""

    a: argparse.Namespace
    sc: Scenario
    settings: Capacity
    results: Path
    salt: str | None
    rows: list[ProbeRow] = field(default_factory=list)
    outcomes: dict[str, list[Outcome]] = field(default_factory=dict)
    running: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    issued: int = 0  # probes started so far (their numbers)
    signalled: str | None = None
    failed: str | None = None  # why the search stopped short: a probe could not start, or gave no result
    failed_code: int = EXIT_INPUT
    workers: int = 0  # each probe's worker processes
    # re-entrant: a signal's handler (forward) may run on the main thread while it holds the lock
    lock: threading.RLock = field(default_factory=threading.RLock)

    def stopped(self) -> bool:
        return self.signalled is not None or self.failed is not None

    def target(self, name: str) -> None:
        """Probe one target until its search is done or stopped."""
        mine = self.outcomes.setdefault(name, [])
        while not self.stopped():
            nxt = next_probe(mine, self.settings)
            if nxt is None:
                return
            with self.lock:
                self.issued += 1
                number = self.issued
            spec = ProbeSpec(number, name, nxt[0], nxt[1], self.settings.vary)
            row = self.probe(spec)
            with self.lock:
                self.rows.append(row)
            if not self.a.quiet:
                print(progress(row, self.settings.vary), flush=True)
            if row.verdict in ("interrupted", "no result"):
                # Not a verdict on the load: a probe that crashed must not cap the capacity. It is
                # tried once more; a second one stops the search (exit 3) with its reason.
                lost = sum(
                    1 for r in self.rows if r.target == name and r.verdict in ("no result", "interrupted")
                )
                if not self.stopped() and lost >= 2:
                    self.failed = (
                        f"probe {spec.number} ({name}, {spec.level}) gave no result twice: {row.note}"
                    )
                    self.failed_code = EXIT_INVALID
                continue
            passed = row.verdict in ("pass", "marginal pass")
            mine.append(Outcome(spec.value, spec.repeat, passed, row.verdict in ("pass", "fail")))

    def probe(self, spec: ProbeSpec) -> ProbeRow:
        out = self.results / "probes" / spec.dirname()
        cmd = probe_command(
            self.a.scenario,
            self.a.set,
            self.sc,
            self.settings,
            spec,
            out,
            self.salt,
            sim=self.a.sim,
            workers=self.workers,
        )
        log = out.with_name(out.name + ".log")
        key = f"{spec.target}#{spec.number}"
        with self.lock:
            if self.stopped():
                return ProbeRow(**_row_base(spec, out, self.results), exit_code=-1, verdict="interrupted")
            proc = self.running[key] = start_probe(cmd, log)
        code = proc.wait()
        with self.lock:
            self.running.pop(key, None)
        return self.judged(spec, out, code, log)

    def judged(self, spec: ProbeSpec, out: Path, code: int, log: Path) -> ProbeRow:
        base = _row_base(spec, out, self.results)
        if code == EXIT_INPUT:
            self.failed = f"probe {spec.number} ({spec.target}, {spec.level}): {last_line(log)}"
            return ProbeRow(**base, exit_code=code, verdict="no result", note=last_line(log))
        try:
            run = load_run(out)
        except BadResults as e:
            if self.signalled:  # stopped before it sent anything: the probe says so and writes nothing
                return ProbeRow(**base, exit_code=code, verdict="interrupted", note=last_line(log))
            return ProbeRow(**base, exit_code=code, verdict="no result", note=str(e))
        block = run.targets.get(spec.target)
        if block is None:
            return ProbeRow(**base, exit_code=code, verdict="no result", note="no figures for the target")
        assert self.sc.slo is not None
        v: Verdict = judge(run, spec.target, self.sc.slo, self.settings.at, self.settings.attainment)
        verdict = v.word if run.status not in ("invalid", "interrupted") else run.status
        note = "; ".join(run.run.reasons)[:300] if run.status == "invalid" else ""
        return ProbeRow(
            **base,
            exit_code=code,
            verdict=verdict,
            ended_early=any(e.get("kind") == "slo_missed" for e in run.events),
            note=note,
            requests=block.requests.sent,
            achieved_rate=_achieved(run.levels, spec),
            output_tok_s=block.throughput.output_tok_s,
            tpot_p50_ms=latency(block, "tpot").p50,
            ttft_p99_ms=latency(block, "ttft").p99,
            itl_p99_ms=latency(block, "itl").p99,
            e2e_p99_ms=latency(block, "e2e").p99,
            figures={
                f.slo: ProbeFigure(
                    measured=f.measured, threshold=f.threshold, low=f.low, high=f.high, passed=f.passed
                )
                for f in v.figures
            },
        )

    def forward(self, signum: int) -> None:
        self.signalled = self.signalled or signal.Signals(signum).name
        with self.lock:
            procs = list(self.running.values())
        for p in procs:
            if p.poll() is None:
                p.send_signal(signum)


def _achieved(levels: list[Level], spec: ProbeSpec) -> float | None:
    """Requests sent per second over the probe's level (its rate block)."""
    for lv in levels:
        got = lv.targets.get(spec.target) if lv.level == spec.level else None
        if got is not None and got.rate is not None:
            return got.rate.achieved
    return None


def _row_base(spec: ProbeSpec, out: Path, results: Path) -> dict[str, Any]:
    return {
        "number": spec.number,
        "target": spec.target,
        "value": spec.value,
        "repeat": spec.repeat,
        "dir": str(out.relative_to(results)),
    }


def _op(floor: bool, passed: bool) -> str:
    if floor:
        return ">=" if passed else "<"
    return "<=" if passed else ">"


def progress(row: ProbeRow, vary: str) -> str:
    load = f"{fmt(row.value)}/s" if vary == "rate" else f"{int(row.value)} streams"
    figs = ", ".join(
        f"{k} {fmt(f.measured)} {_op(k == GOODPUT_SHARE, f.passed)} {fmt(f.threshold)}"
        for k, f in row.figures.items()
    )
    again = f" repeat {row.repeat}" if row.repeat else ""
    early = ", ended early" if row.ended_early else ""
    return (
        f"[{row.target}] probe {row.number} {load}{again}: {row.verdict}{early} ({figs}) {row.note}".rstrip()
    )
