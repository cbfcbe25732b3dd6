"""A worker that is told to stop (SIGTERM, Ctrl-C) leaves with every stream it sent accounted for.

    Departure(environment, run=lambda: STATE.run).install()   # from events.init, on a worker

A worker pod evicted, ``docker stop`` on one worker container, a scale-down: the worker gets
SIGTERM in the middle of a run. Locust's own worker quits at once: its quitting listener tells the
master "quit" and the runner kills the users, so the streams in flight were sent and never
reported, and the master, finding the worker gone, counted them as lost. llmload's worker instead:

1. tells the master it is leaving and why (``MSG_LEAVING``), and takes no new request;
2. lets its in-flight streams finish within ``load.stop_grace`` (a second signal cuts them now,
   each recorded as ``aborted``);
3. sends its last records in one final report, then ``MSG_LEFT``; only then does Locust's listener
   tell the master "quit". The worker exits 143 (SIGTERM) or 130 (SIGINT), as a local run does.

The order matters: Locust fires ``quitting`` in reverse order of registration, and this listener
is registered at init, after the worker runner's own, so it runs first. The master (conductor.py)
keeps every record the worker sent; a worker that left before the plan's end is a lost worker
(its share of the plan was never sent: degraded, exit 3 unless ``--allow-worker-loss``), one that
left while the master was already stopping is no loss.
"""

from __future__ import annotations

import logging
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

import gevent

from llmload.base.exitcodes import exit_code_for_signal
from llmload.locust.controller import LLMRun

log = logging.getLogger("llmload")

MSG_LEAVING = "llmload_leaving"  # worker -> master: {"reason": "SIGTERM", "in_flight": n}
MSG_LEFT = "llmload_left"  # worker -> master, after its final report: {"reason": "SIGTERM"}


class Departure:
    """The leaving protocol of one worker process."""

    def __init__(self, environment: Any, *, run: Callable[[], LLMRun | None]) -> None:
        self.env = environment
        self.run = run  # this worker's current run (a new one per test in the web UI), or None
        self.signal: str | None = None  # SIGTERM, noted by a watcher beside Locust's own handler
        self.state = "staying"  # staying | draining | left

    def install(self) -> None:
        gevent.signal_handler(signal.SIGTERM, self._note, "SIGTERM")
        self.env.events.quitting.add_listener(self.on_quitting)

    def _note(self, name: str) -> None:
        self.signal = self.signal or name

    def on_quitting(self, environment: Any, **_: Any) -> None:
        gevent.sleep(0)  # the SIGTERM watcher's greenlet notes the signal first
        if isinstance(sys.exc_info()[1], KeyboardInterrupt):  # Locust's shutdown() runs in its except
            self.signal = self.signal or "SIGINT"
        reason = self.signal or "quit"
        run = self.run()
        if self.state == "draining":  # a second signal while the first drains: cut now
            if run is not None:
                run.abort_inflight()
            self._finish(run, reason)
            return
        if self.state == "left" or run is None or run.run_t0 is None:
            return  # never started a run, or already gone
        if run.draining and not run.streams_open():
            return  # the master ended the run and this worker has nothing in flight
        self.state = "draining"
        if self.signal is not None:
            environment.process_exit_code = exit_code_for_signal(self.signal)
        grace = run.sc.load.stop_grace
        n = run.streams_open()
        print(
            f"llmload worker: {reason}: leaving; {n} in-flight stream(s) may finish within {grace:g} s "
            f"({reason} again cuts them now)",
            file=sys.stderr,
            flush=True,
        )
        self._send(MSG_LEAVING, {"reason": reason, "in_flight": n})
        run.start_draining()
        deadline = time.monotonic() + grace
        try:
            while run.streams_open() and time.monotonic() < deadline and self.state == "draining":
                gevent.sleep(0.05)
        except KeyboardInterrupt:  # a second Ctrl-C lands here, in the main greenlet
            print(f"llmload worker: {reason} again: cutting in-flight streams", file=sys.stderr, flush=True)
        if self.state == "draining":
            run.abort_inflight()  # stop_grace ran out: what is still open is recorded as aborted
            self._finish(run, reason)

    def _finish(self, run: LLMRun | None, reason: str) -> None:
        """The final report (every record this worker still holds), then MSG_LEFT."""
        if self.state == "left":
            return
        self.state = "left"
        runner = self.env.runner
        data: dict[str, Any] = {}
        self.env.events.report_to_master.fire(client_id=runner.client_id, data=data)
        runner.send_message("stats", data)  # as Locust's worker sends its periodic report
        self._send(MSG_LEFT, {"reason": reason})
        if run is not None:
            log.info("llmload worker: left after a final report (%s)", reason)

    def _send(self, kind: str, data: dict[str, Any]) -> None:
        try:
            self.env.runner.send_message(kind, data)
        except Exception as e:  # noqa: BLE001 - the master may be gone already; the exit goes on
            log.warning("llmload worker: could not tell the master (%s): %s", kind, e)
