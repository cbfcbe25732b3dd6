"""The end of a run judged: one pure function from what the run was, how it ended and what it
measured, to summary.json's figures, its verdict and its exit code (llmload/base/exitcodes.py).

    summary, code = finalize(run, outcome, agg, observed, allow_worker_loss=False)

SLOs are judged here, from the Summary itself (llmload/report/judge.py), so the verdict does not
depend on whether the reports are written: an SLO missed with ``--no-reports`` exits 1 as it does
with them. An SLO resting on a figure the run flagged (llmload/report/flagged.py) is inconclusive:
exit 3 unless another was missed (exit 1) or the scenario judges flagged figures anyway. The
verdict line is llmload/results/verdict.py's. The caller writes summary.json and then the reports; a report that fails to render is
said as such and exits 4 when the run was otherwise ok (``reports_failed``), never "ok".
The capacity search judges each probe with the same function, through ``llmload run``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from llmload.base.exitcodes import EXIT_INVALID, EXIT_OK, EXIT_REPORTS, EXIT_SLO, exit_code_for_signal
from llmload.config.resolved import ResolvedRun
from llmload.measure.client_health import client_health
from llmload.measure.clock_offset import disagreement
from llmload.measure.metrics import TargetStats
from llmload.measure.runstate import Aggregator
from llmload.report.judge import judge
from llmload.report.slo import set_goodput
from llmload.results.run_outcome import RunOutcome
from llmload.results.summary import build_summary
from llmload.results.verdict import verdict
from llmload.schema.results_model import (
    ClientHealth,
    RequestLine,
    RunStatus,
    Summary,
    TelemetryInfo,
    TelemetryRow,
    WorkerClock,
)


@dataclass(frozen=True)
class Observed:
    """What the process measured beside the records, read before the run is judged."""

    cpu_samples: list[float]  # the client's CPU at each interval (the max over workers)
    telemetry: list[TelemetryRow]  # telemetry.jsonl (the scraper has stopped)
    open_streams: dict[tuple[str, str, str], int] | None  # most streams open per (phase, level, target)
    requests: list[RequestLine] = field(default_factory=list)  # requests.jsonl, read when goodput needs it


def finalize(
    run: ResolvedRun, outcome: RunOutcome, agg: Aggregator, observed: Observed, *, allow_worker_loss: bool
) -> tuple[Summary, int]:
    """summary.json's model with its verdict, and the exit code. Reads and writes nothing."""
    sc = run.scenario
    end = outcome.ended_at if outcome.ended_at is not None else outcome.started_at
    health = client_health(sc.client, agg.loop_lag, observed.cpu_samples, agg.stamps, outcome.selftest)
    status, code, reasons = _judge(run, outcome, agg, health, allow_worker_loss)
    summary = build_summary(
        scenario=sc,
        agg=agg,
        run_id=run.run_id,
        started_at=outcome.started_at,
        ended_at=end,
        measure_start=(outcome.run_t0 or outcome.started_at) + sc.load.warmup,
        measure_end=end,
        mode=run.mode,
        workers=sorted(agg.last_seen) or ["local"],
        status=status,
        reasons=reasons,
        client=health,
        extra_run={
            "telemetry": TelemetryInfo(
                scrape_interval_s=sc.client.scrape_interval,
                scrapes=len({r.t for r in observed.telemetry}),  # the baseline and the final one included
            ),
            "lost_workers": list(outcome.lost_workers),
            "stop_reason": outcome.stop_reason,
            "results_dir": str(run.results_dir),
            "influx": None,
            "steps": list(outcome.steps),
        },
        telemetry=observed.telemetry,
        open_streams=observed.open_streams,
    )
    set_goodput(summary, observed.requests)  # per-request SLOs: each request's own figures
    _clocks(summary, agg)
    judged = judge(summary)
    if code == EXIT_OK and judged.missed:  # an interrupted or invalid run keeps its own code
        code = EXIT_SLO
    elif code == EXIT_OK and judged.inconclusive:  # an SLO it could not judge is never "ok"
        code = EXIT_INVALID
    summary.run.verdict = verdict(summary, judged, code)
    summary.run.exit_code = code
    return summary, code


def _clocks(summary: Summary, agg: Aggregator) -> None:
    """Distributed: each worker's clock against the master's, and a note when they may disagree."""
    if not agg.clocks:
        return
    summary.run.clocks = {w: WorkerClock.model_validate(c) for w, c in sorted(agg.clocks.items())}
    note = disagreement(agg.clocks)
    if note is not None:
        summary.run.client.notes.append(note)


def _nothing_measured(agg: Aggregator, window: dict[str, TargetStats]) -> str | None:
    """Why the run measured nothing, or None: no request succeeded in ``window`` (the whole run), or
    none after the warm-up (every figure of summary.json is that window's)."""
    ok_total = sum(st.ok for st in window.values())
    if ok_total == 0:
        return f"no request succeeded ({sum(st.requests for st in window.values())} sent)"
    if not sum(st.ok for st in agg.window(exclude_warmup=True).values()):
        return (
            f"no request succeeded after the warm-up ({ok_total} did in it): nothing was measured"
            " (a request longer than the load's duration less its warm-up?)"
        )
    return None


def _judge(
    run: ResolvedRun, outcome: RunOutcome, agg: Aggregator, health: ClientHealth, allow_worker_loss: bool
) -> tuple[RunStatus, int, list[str]]:
    """The run's status, exit code and reasons, before its SLOs."""
    reasons = list(outcome.reasons)
    status: RunStatus = "ok"
    code = EXIT_OK
    window = agg.window(exclude_warmup=False)
    lost = outcome.lost_workers
    if health.unreliable:
        reasons.extend(health.unreliable_reasons)
        status, code = "invalid", EXIT_INVALID
    empty = _nothing_measured(agg, window)
    if empty is not None:
        reasons.append(empty)
        status, code = "invalid", EXIT_INVALID
    if lost:
        status = "degraded" if status == "ok" else status
        code = code if allow_worker_loss else EXIT_INVALID
    if outcome.unreported:  # their records never came: the figures leave them out
        n = sum(outcome.unreported.values())
        reasons.append(
            f"{n} request(s) sent and never reported when the run ended {outcome.unreported}: "
            "their records had not reached the master when its drain gave up (llmload/locust/drain.py)"
        )
        status = "degraded" if status == "ok" else status
        code = EXIT_INVALID
    if outcome.quit_early:
        # Never ok: the plan did not run to its end and nothing the user set stopped it (Locust
        # stops a distributed test itself when its last worker goes missing: a partition).
        more = f" ({len(lost)} worker(s) lost)" if lost else ""
        reasons.append(f"the plan ended early: the test stopped before the plan's end{more}")
        if status == "ok":
            status = "degraded" if lost else "invalid"
        code = EXIT_INVALID
    aborted = sum(st.by_class.get("aborted", 0) for st in window.values())
    if aborted:
        # No signal, no web UI Stop: stop_grace ran out, whether llmload's tick or Locust's own
        # stop_timeout (the same stop_grace) cut them first.
        why = outcome.cut_why or f"stop grace of {run.scenario.load.stop_grace:g} s ran out"
        reasons.append(
            f"{aborted} in-flight stream(s) were cut: {why} (status aborted, partial figures kept in requests.jsonl)"
        )
    if outcome.results_error:
        reasons.append(outcome.results_error)
    if outcome.interrupted:
        if not outcome.plan_complete:
            reasons.append(f"interrupted by {outcome.interrupted}: load stopped before the plan's end")
        else:  # the drain after the last step: every request of the plan was sent
            reasons.append(
                f"interrupted by {outcome.interrupted} while in-flight streams drained after the plan completed"
            )
        status, code = "interrupted", exit_code_for_signal(outcome.interrupted)
    elif outcome.results_error:  # the directory lacks lines the run measured: never ok
        status, code = "interrupted", EXIT_INVALID
    elif outcome.stop_reason and outcome.stop_reason != "plan complete":
        reasons.append(f"stopped early: {outcome.stop_reason}")
    return status, code, reasons


def signalled_while_writing(summary: Summary, code: int, name: str) -> int:
    """A signal came after the load ended, while the results were written: they were finished first
    (complete, the figures unchanged), and the run exits as a signal ends a process (130 / 143)."""
    code = exit_code_for_signal(name)
    run = summary.run
    run.reasons.append(
        f"{name} received while the results were written (the load had ended): figures complete"
    )
    run.verdict = f"{run.verdict}; {name} while writing the results: exit {code}"
    run.exit_code = code
    return code


def reports_failed(summary: Summary, code: int, error: str) -> int:
    """The reports could not be written: the run keeps its figures and verdict, and says so.

    A run that was ok exits 4 (EXIT_REPORTS); a missed SLO, an invalid or interrupted run keeps
    its own code. Returns the exit code; ``summary.run`` carries the note and the code.
    """
    if code == EXIT_OK:
        code = EXIT_REPORTS
    run = summary.run
    run.reasons.append(f"the reports could not be written: {error}")
    run.verdict = f"{run.verdict}; reports not written ({error}): exit {code}"
    run.exit_code = code
    return code
