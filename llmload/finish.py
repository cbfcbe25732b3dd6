"""End of a run: judge it, write summary.json and the reports, choose the exit code.

Exit codes: 0 done (SLOs met), 1 an SLO was missed, 2 bad input or target not
ready, 3 run invalid (client overloaded, no request succeeded, or a worker lost
without --allow-worker-loss), 130 / 143 interrupted by SIGINT / SIGTERM (128 + the
signal's number, as a shell reports it; the results are complete up to the stop).
"""

from __future__ import annotations

import logging
import signal
import sys
from collections.abc import Callable
from typing import Any

import gevent

from llmload.client_health import client_health
from llmload.concurrency import max_open_streams
from llmload.results_model import RunBlock, Summary
from llmload.sinks.results import read_telemetry
from llmload.summary import build_summary

log = logging.getLogger("llmload")

EXIT_OK, EXIT_SLO, EXIT_INPUT, EXIT_INVALID = 0, 1, 2, 3
EXIT_SIGINT, EXIT_SIGTERM = 128 + signal.SIGINT, 128 + signal.SIGTERM


def exit_code_for_signal(name: str) -> int:
    """130 for SIGINT, 143 for SIGTERM: 128 + the signal's number."""
    return 128 + int(signal.Signals[name])


def finalize(
    conductor: Any,
    *,
    allow_worker_loss: bool,
    write_reports: bool = True,
    publish: Callable[[Summary], dict[str, Any] | None] | None = None,
) -> tuple[Summary, int]:
    """Judge the run and write summary.json (and the reports).

    ``publish`` gets the summary before it is written (the InfluxDB sink writes its final figures,
    then closes) and returns what summary.json records of it under ``run.influx``.
    """
    c = conductor
    c.frozen = True  # the reports are written off the event loop, while worker reports may arrive
    sc = c.sc
    agg = c.agg
    end = c.ended_at or __import__("time").time()
    health = client_health(sc.client, agg.loop_lag, c.intervals.cpu_samples, agg.stamps, c.selftest)
    reasons = list(c.reasons)
    status = "ok"
    code = EXIT_OK
    window = agg.window(exclude_warmup=False)
    ok_total = sum(st.ok for st in window.values())
    sent_total = sum(st.requests for st in window.values())
    if health.unreliable:
        reasons.extend(health.unreliable_reasons)
        status, code = "invalid", EXIT_INVALID
    if ok_total == 0:
        reasons.append(f"no request succeeded ({sent_total} sent)")
        status, code = "invalid", EXIT_INVALID
    if c.lost_workers:
        if status == "ok":
            status = "degraded"
        if not allow_worker_loss:
            code = EXIT_INVALID
    if c.quit_early:
        # Never ok: the plan did not run to its end and nothing the user set stopped it (Locust
        # stops a distributed test itself when its last worker goes missing: a partition).
        reasons.append(
            "the plan ended early: the test stopped before the plan's end"
            + (f" ({len(c.lost_workers)} worker(s) lost)" if c.lost_workers else "")
        )
        if status == "ok":
            status = "degraded" if c.lost_workers else "invalid"
        code = EXIT_INVALID
    aborted = sum(st.by_class.get("aborted", 0) for st in window.values())
    if aborted:
        # No signal, no web UI Stop: stop_grace ran out, whether llmload's tick or Locust's own
        # stop_timeout (the same stop_grace) cut them first.
        why = c.cut_why or f"stop grace of {sc.load.stop_grace:g} s ran out"
        reasons.append(
            f"{aborted} in-flight stream(s) were cut: {why} (status aborted, partial figures kept in requests.jsonl)"
        )
    if c.interrupted:
        reasons.append(f"interrupted by {c.interrupted}: load stopped before the plan's end")
        status, code = "interrupted", exit_code_for_signal(c.interrupted)
    elif c.stop_reason and c.stop_reason != "plan complete":
        reasons.append(f"stopped early: {c.stop_reason}")
    telemetry = read_telemetry(c.results.dir / "telemetry.jsonl")
    extra = {
        "telemetry": {
            "scrape_interval_s": sc.client.scrape_interval,
            "scrapes": len({r.t for r in telemetry}),  # the baseline and the final one included
        },
        "lost_workers": c.lost_workers,
        "stop_reason": c.stop_reason,
        "results_dir": str(c.results.dir),
        "influx": None,
        "steps": c.level_meta,
    }
    c.results.flush()  # every request line on disk: the open streams per level are counted from them
    summary = build_summary(
        scenario=sc,
        agg=agg,
        run_id=c.run_id,
        started_at=c.started_at,
        ended_at=end,
        measure_start=(c.run_t0 or c.started_at) + sc.load.warmup,
        measure_end=end,
        mode="distributed" if c.distributed else "local",
        workers=sorted(agg.last_seen) or ["local"],
        status=status,
        reasons=reasons,
        client=health,
        extra_run=extra,
        telemetry=telemetry,
        open_streams=max_open_streams(c.results.dir / "requests.jsonl"),
    )
    if publish is not None:
        summary.run.influx = publish(summary)
    c.results.summary(summary)
    c.results.flush()
    missed: list[str] = []
    if write_reports:
        missed = _reports(c)
        if code == EXIT_OK and missed:  # an interrupted or invalid run keeps its own code
            code = EXIT_SLO
    summary.run.verdict = verdict(summary.run, missed, code)
    summary.run.exit_code = code
    c.results.summary(summary)  # the reports read the figures above; the verdict comes from them
    return summary, code


def verdict(run: RunBlock, missed: list[str], code: int) -> str:
    """One line that says how the run ended, as the exit code says it (the terminal's last line)."""
    if run.status == "interrupted":
        return f"interrupted by {run.stop_reason} (exit {code}): figures cover the run up to the stop"
    if run.status == "invalid":
        return f"invalid (exit {code}): {run.reasons[0] if run.reasons else 'no reason given'}"
    head: str = "SLO missed" if missed else run.status
    if run.status == "degraded":
        head = "degraded" + (", SLO missed" if missed else "")
        head += f": {len(run.lost_workers)} worker(s) lost"
    line = f"{head} (exit {code})"
    return line + (": " + "; ".join(missed) if missed else "")


def _reports(c: Any) -> list[str]:
    """Write the reports; the SLOs missed, as ``ttft_p99_ms 2,310 > 2,000 ms (vllm-awq)``."""
    from llmload.report import write_all  # the report layer (HTML, Markdown, JUnit, SLOs); loads plotly
    from llmload.report.slo import fmt

    try:
        # In a thread of gevent's pool: plotly's import and the HTML take seconds of CPU, during
        # which a master must keep answering its workers' heartbeats (they quit after 15 s without
        # one) and the web UI its page.
        outcome = gevent.get_hub().threadpool.apply(write_all, (c.results.dir,))
    except Exception as e:  # noqa: BLE001 - a report failure must not lose the results
        log.error("llmload: writing the reports failed: %s", e)
        print(f"llmload: writing the reports failed: {e}", file=sys.stderr)
        return []
    missed = []
    for r in outcome.failed:
        unit = f" {r.unit}" if r.unit else ""
        bad = ">" if r.comparator == "<=" else "<"
        measured = (
            "not measured" if r.measured is None else f"{fmt(r.measured)} {bad} {fmt(r.threshold)}{unit}"
        )
        missed.append(f"{r.slo} {measured} ({r.target})")
    return missed
