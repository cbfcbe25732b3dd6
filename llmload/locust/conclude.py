"""The end of a run in one process, in order: stop measuring, judge (llmload/results/finish.py), publish to
InfluxDB, write summary.json, then the reports, which cannot change the verdict (a failure exits 4).
Also the end of a run that never started: its empty results are removed. ``finish_run`` listens on
Locust's ``quitting`` (every headless run) and is called by the web UI's Stop.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import gevent
from locust import events

from llmload.locust.conductor import Conductor
from llmload.locust.hooks import on
from llmload.locust.state import ProcessState, state_of
from llmload.locust.telemetry_hook import close_sink, target_tags, write_summary_points
from llmload.measure.concurrency import max_open_streams
from llmload.report.levels import summary_text
from llmload.results.finish import Observed, finalize, reports_failed
from llmload.results.rebuild import RUN_INFO
from llmload.schema.results_model import Summary
from llmload.sinks.results import read_telemetry
from llmload.sinks.terminal import render_table


@on(events.quitting)
def finish_run(environment: Any, **_: Any) -> None:
    st = state_of(environment)
    c = st.conductor
    if st.run is not None:
        st.run.stop_lag_monitor()
    if c is None:
        close_sink(st.sink)  # a worker's llm_request points
        return
    if c.finalized:  # the web UI's Stop wrote it already, or a second signal's shutdown
        return
    if c.state == "init":  # built, never started (the web UI quit before a test): nothing to write
        c.begin_finish()
        discard_unstarted(st, c)
        stop_prepared(st)
        st.forget_run()
        return
    c.finish_drain()  # the web UI quitting mid-test: in-flight streams end within stop_grace
    c.begin_finish()
    try:
        opts = environment.parsed_options
        summary, code = conclude(st, c, write_reports=not getattr(opts, "llm_no_reports", False))
        st.summary, st.exit_code = summary, code
        print("\n" + render_table(summary), flush=True)
        levels = summary_text(summary)  # a sweep: each level judged on its own figures
        if levels:
            print("\n" + levels, flush=True)
        print(f"results: {c.results.dir}", flush=True)
        print(f"verdict: {summary.run.verdict}", flush=True)
        environment.process_exit_code = code
    finally:
        stop_prepared(st)


def conclude(st: ProcessState, c: Conductor, *, write_reports: bool) -> tuple[Summary, int]:
    """The run's end, in order: stop measuring, judge (llmload/results/finish.py), publish to InfluxDB,
    write summary.json, then the reports, which cannot change the verdict (a failure exits 4)."""
    c.stop_intervals()
    c.end(time.time())
    c.pull()
    c.event("stop", "run finished")
    c.freeze()  # the reports are written off the event loop, while worker reports may arrive
    c.results.flush()  # every request line on disk: the open streams per level are counted from them
    observed = Observed(
        cpu_samples=list(c.intervals.cpu_samples),
        telemetry=read_telemetry(c.results.dir / "telemetry.jsonl"),
        open_streams=max_open_streams(c.results.dir / "requests.jsonl"),
    )
    summary, code = finalize(c.resolved, c.outcome, c.agg, observed, allow_worker_loss=st.allow_worker_loss)
    if st.sink is not None:
        write_summary_points(st.sink, summary, target_tags(c.sc))  # the same figures as summary.json
        closed = close_sink(st.sink)
        if closed is not None and st.preflight is not None:
            closed["preflight"] = st.preflight.model_dump()
        summary.run.influx = closed
    c.results.summary(summary)
    c.results.flush()
    if write_reports:
        error = write_reports_off_loop(c.results.dir)
        if error is not None:
            code = reports_failed(summary, code, error)
            c.results.summary(summary)
    c.results.close()
    return summary, code


def write_reports_off_loop(results_dir: Path) -> str | None:
    """report.html, report.md and junit.xml; None when written, else what went wrong (one line).

    In a thread of gevent's pool: plotly's import and the HTML take seconds of CPU, during which a
    master must keep answering its workers' heartbeats (they quit after 15 s without one) and the
    web UI its page.
    """
    error = gevent.get_hub().threadpool.apply(_write_reports, (results_dir,))
    if error is not None:
        print(f"llmload: writing the reports failed: {error}", file=sys.stderr, flush=True)
    return error if isinstance(error, str) else None


def _write_reports(results_dir: Path) -> str | None:
    """In the pool's thread: an error comes back as one line (gevent would print its traceback)."""
    from llmload.report import write_all  # the report layer (HTML, Markdown, JUnit); loads plotly

    try:
        write_all(results_dir)
    except Exception as e:  # noqa: BLE001 - a report failure must not lose the results
        return f"{type(e).__name__}: {e}".splitlines()[0]
    return None


def discard_unstarted(st: ProcessState, c: Conductor) -> None:
    """Drop a run that was built but never started: its scraper, its sink and its empty results."""
    c.stop_intervals()
    close_sink(st.sink)
    c.results.close()
    remove_unused_results(c.results.dir)


def remove_unused_results(d: Path) -> None:
    """A run built but never started leaves empty files only: remove them (and nothing else)."""
    names = {p.name for p in d.iterdir()} if d.is_dir() else set()
    if not names <= {"requests.jsonl", "timeseries.jsonl", "events.jsonl", "telemetry.jsonl", RUN_INFO}:
        return
    if "requests.jsonl" in names and (d / "requests.jsonl").stat().st_size:
        return  # something was sent (timeseries rows alone are the intervals of the wait: all zero)
    for n in names:
        (d / n).unlink()
    d.rmdir()


def stop_prepared(st: ProcessState) -> None:
    """Stop the simulators llmload started for this run, if any."""
    if st.prepared is not None:
        st.prepared.stop()
