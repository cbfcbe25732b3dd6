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

from llmload.base.exitcodes import EXIT_INPUT, EXIT_INVALID, exit_code_for_signal
from llmload.locust.conductor import Conductor
from llmload.locust.fleet import LOCUST_LIVENESS
from llmload.locust.hooks import on
from llmload.locust.state import ProcessState, state_of
from llmload.locust.telemetry_hook import close_sink, target_tags, write_summary_points
from llmload.measure.concurrency import max_open_streams
from llmload.report.levels import summary_text
from llmload.report.results import BadResults, load_run_lines
from llmload.results.finish import Observed, finalize, reports_failed, signalled_while_writing
from llmload.results.merge import aggregate_data
from llmload.results.rebuild import RUN_INFO
from llmload.results.shard import AGGREGATE
from llmload.schema.results_model import RequestLine, Summary
from llmload.sinks.results import read_telemetry
from llmload.sinks.terminal import render_table

MAIN_EXITS_S = 60.0  # the main greenlet's exit, after the results are written, takes well under this


@on(events.quitting)
def finish_run(environment: Any, **_: Any) -> None:
    """Locust's quitting: write the run once. Locust's own SIGTERM handler fires quitting again and then
    exits with ``process_exit_code``: a second call waits here until the first has written everything,
    so no exit (0 above all) can come before the results and the code are set."""
    st = state_of(environment)
    c = st.conductor
    if st.run is not None:
        st.run.stop_lag_monitor()
    if c is None:
        close_sink(st.sink)  # a worker's llm_request points
        return
    if not c.begin_finish():  # the web UI's Stop, or a second signal's shutdown: the first one writes
        c.written.wait()
        if st.exit_code is not None:
            environment.process_exit_code = st.exit_code
        if getattr(environment.parsed_options, "headless", False) and gevent.getcurrent() is not _main():
            # Locust's SIGTERM handler: its main greenlet exits with this code; an exit from here
            # would come after it, at interpreter shutdown, with a traceback: let main exit first
            gevent.sleep(MAIN_EXITS_S)
        return
    try:
        if c.state == "init":  # built, never started (the web UI quit before a test): nothing to write
            if (
                getattr(environment.parsed_options, "headless", False)
                and environment.process_exit_code is None
            ):
                _ended_before_the_start(environment, c)
            discard_unstarted(st, c)
            st.forget_run()
            return
        # Until the results are written, any exit says they are not: 128 + N once a signal came, else 3.
        o = c.outcome
        pending = o.interrupted or o.late_signal
        environment.process_exit_code = exit_code_for_signal(pending) if pending else EXIT_INVALID
        c.finish_drain()  # the web UI quitting mid-test: in-flight streams end within stop_grace
        opts = environment.parsed_options
        summary, code, ending = conclude(st, c, write_reports=not getattr(opts, "llm_no_reports", False))
        st.summary, st.exit_code = summary, code
        environment.process_exit_code = code
        _say_verdict(summary, c, ending)
    finally:
        c.written.set()
        stop_prepared(st)


def _ended_before_the_start(environment: Any, c: Conductor) -> None:
    """A headless run that Locust quit before its start with no exit code set (no signal, no target
    or worker found not ready). Locust quits a headless master when its last worker quits (one
    stopped during the readiness check), and when its last worker misses its heartbeats (one frozen,
    or starved on a busy host: tests/test_hosts.py saw it twice at Locust's 3 s; fleet.LOCUST_LIVENESS
    now, after llmload's own silence limit). That exited 0 with no line; now one line says why, and
    exit 2, as a worker that cannot reach a target."""
    why = c.fleet.why_not_ready() if c.distributed else None
    if why is None and c.distributed:  # Locust dropped or gave up on the worker before llmload did
        clients = getattr(environment.runner, "clients", {})
        clients = clients if hasattr(clients, "get") else {}
        live = c.fleet.live()
        gone = [w for w in live if clients.get(w) is None]
        missing = [w for w in live if getattr(clients.get(w), "state", None) == "missing"]
        if gone:
            why = f"every worker quit before the start ({', '.join(gone)})"
        elif missing:
            why = (
                f"every worker went missing before the start ({', '.join(missing)}: no heartbeat for "
                f"{LOCUST_LIVENESS} s, when Locust stops a test)"
            )
    print(
        f"llmload: {why or 'the run ended before its start'}; nothing was sent", file=sys.stderr, flush=True
    )
    environment.process_exit_code = EXIT_INPUT


def _main() -> Any:
    return gevent.get_hub().parent


def _say_verdict(summary: Summary, c: Conductor, ending: list[str]) -> None:
    """The table, a sweep's levels, then where the results are, who wins and where the report is, and
    last the verdict (README: the last line of every run)."""
    print("\n" + render_table(summary), flush=True)
    levels = summary_text(summary)  # a sweep: each level judged on its own figures
    if levels:
        print("\n" + levels, flush=True)
    print(f"results: {c.results.dir}", flush=True)
    for line in ending:
        print(line, flush=True)
    print(f"verdict: {summary.run.verdict}", flush=True)


def conclude(st: ProcessState, c: Conductor, *, write_reports: bool) -> tuple[Summary, int, list[str]]:
    """The run's end, in order: stop measuring, judge (llmload/results/finish.py), publish to InfluxDB,
    write summary.json, then the reports, which cannot change the verdict (a failure exits 4).
    Returns the summary, the exit code and the terminal's lines on the reports (who wins, where)."""
    c.stop_intervals()
    c.end(time.time())
    c.pull()
    c.event("stop", "run finished")
    c.freeze()  # the reports are written off the event loop, while worker reports may arrive
    if c.outcome.unreported:  # the drain gave up: what is still missing now the figures are final
        c.outcome.unreported = c.drain.unreported()
    c.results.flush()  # every request line on disk: the open streams per level are counted from them
    c.results_failed()  # the disk filled during the run, or with these last lines
    observed = Observed(
        cpu_samples=list(c.intervals.cpu_samples),
        telemetry=read_telemetry(c.results.dir / "telemetry.jsonl"),
        open_streams=max_open_streams(c.results.dir / "requests.jsonl"),
        requests=_goodput_lines(c),
    )
    summary, code = finalize(c.resolved, c.outcome, c.agg, observed, allow_worker_loss=st.allow_worker_loss)
    if st.sink is not None:
        write_summary_points(st.sink, summary, target_tags(c.sc))  # the same figures as summary.json
        closed = close_sink(st.sink)
        if closed is not None and st.preflight is not None:
            closed["preflight"] = st.preflight.model_dump()
        summary.run.influx = closed
    c.results.summary(summary)
    # what the figures were built from, for `llmload merge` of a sharded run (llmload/results/merge.py)
    c.results.write_json(
        AGGREGATE, aggregate_data(c.agg, c.outcome, observed.cpu_samples, st.allow_worker_loss)
    )
    c.results.flush()
    ending = [f"report: not written (--no-reports); llmload report {c.results.dir} writes it"]
    written = False
    if write_reports:
        error, who = write_reports_off_loop(c.results.dir)
        if error is not None:
            code = reports_failed(summary, code, error)
            c.results.summary(summary)
            ending = []
        else:
            written = True
            ending = ([who] if who else []) + [f"report: {c.results.dir / 'report.html'}"]
    late = c.outcome.late_signal
    c.written.set()  # from here a signal changes nothing: the results are complete
    if late is not None:
        code = signalled_while_writing(summary, code, late)
        c.results.summary(summary)
        if written:  # the reports show the verdict and the exit code: written again, with the signal
            error, _who = write_reports_off_loop(c.results.dir)
            if error is not None:
                code = reports_failed(summary, code, error)
                c.results.summary(summary)
    c.results.close()
    return summary, code, ending


def _goodput_lines(c: Conductor) -> list[RequestLine]:
    """requests.jsonl's lines when the scenario sets a per-request SLO (goodput), else none; a file
    that cannot be read (a torn line after a crash) gives none: the summary then holds no goodput."""
    slo = c.sc.slo
    if slo is None or not slo.has_per_request():
        return []
    try:
        return load_run_lines(c.results.dir / "requests.jsonl")
    except BadResults:
        return []


def write_reports_off_loop(results_dir: Path) -> tuple[str | None, str]:
    """report.html, report.md and junit.xml: (None, the "who wins" line, report/decision.py) when written,
    else (what went wrong in one line, "").

    In a thread of gevent's pool: plotly's import and the HTML take seconds of CPU, during which a
    master must keep answering its workers' heartbeats (they quit after 15 s without one) and the
    web UI its page.
    """
    error, who = gevent.get_hub().threadpool.apply(_write_reports, (results_dir,))
    if error is not None:
        print(f"llmload: writing the reports failed: {error}", file=sys.stderr, flush=True)
    return error, who


def _write_reports(results_dir: Path) -> tuple[str | None, str]:
    """In the pool's thread: an error comes back as one line (gevent would print its traceback)."""
    from llmload.report import write_all  # the report layer (HTML, Markdown, JUnit); loads plotly

    try:
        return None, write_all(results_dir).who_wins
    except Exception as e:  # noqa: BLE001 - a report failure must not lose the results
        return f"{type(e).__name__}: {e}".splitlines()[0], ""


def discard_unstarted(st: ProcessState, c: Conductor) -> None:
    """Drop a run that was built but never started: its scraper, its sink and its empty results."""
    c.stop_intervals()
    close_sink(st.sink)
    c.results.close()
    remove_unused_results(c.results.dir)
    c.written.set()


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
