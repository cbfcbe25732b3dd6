"""A worker watches its master: when the master is gone, the worker's load stops within seconds.

    watch = MasterWatch(environment, run=lambda: st.run).install()   # a worker, from events.init
    watch.joined(run_id, results_dir)                                  # each scenario from the master

Measured before (2026-12-04): after SIGKILL of ``llmload run --workers 2`` or of a master, the
workers went on loading the server for about 15 s (Locust's own check, its
``MASTER_HEARTBEAT_TIMEOUT`` then set to 15 s; Locust's default is 60 s): 28 requests that nobody
recorded, and manual workers then exited 0.

The master answers every worker heartbeat (one a second) with its own; Locust fires
``heartbeat_received`` on the worker for each. A worker decides that its master is gone when

- its ZeroMQ connection to the master broke and has not come back, and no heartbeat came for
  ``BROKEN_S`` (a killed master's kernel closes the connection: noticed at once);
- no heartbeat came for ``ACTIVE_S`` while it has load running (users, or streams open): a host that
  vanished or a cut link, where nothing closes the connection;
- no heartbeat came for ``IDLE_S`` (``LLMLOAD_MASTER_TIMEOUT``, 15 s) while it is idle between
  tests: a master busy writing its reports must not lose its workers, and an idle worker sends nothing.

Silence counts only while the worker is awake: a worker that was itself frozen (``STALL_S``) reads the
heartbeats that came meanwhile before it judges its master again. So does one whose message loop was
busy (``busy``): it builds its run from the master's scenario in that loop, and a large dataset takes
seconds (a 670 MB ShareGPT file: over 15 s with the worker on a shared core; it took its live master
for gone, 2026-12-07).

Then, at once: it takes no new request, cuts every open stream (each recorded ``aborted``: the
server got it, nobody waits for its end), writes its records to a spool (below), prints where, and
exits ``EXIT_MASTER_LOST`` (5). The spool holds every record the worker never reported plus those
of its last reports (a master killed between receiving lines and flushing requests.jsonl loses
them): ``RESULTS/orphans/WORKER.jsonl`` when the master's results directory is on this host (the
same host, a shared disk), else ``llmload-spool/RUN_ID/WORKER/requests.jsonl`` under the worker's
working directory. ``llmload report RESULTS`` folds ``RESULTS/orphans/*.jsonl`` into a run it
rebuilds, each request once (llmload/sinks/orphan_spool.py).
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import gevent
import zmq
from zmq.utils.monitor import recv_monitor_message

from llmload.base.exitcodes import EXIT_MASTER_LOST
from llmload.locust.controller import LLMRun
from llmload.sinks.orphan_spool import spool_path, write_spool

log = logging.getLogger("llmload")

BROKEN_S = 1.5  # connection broken and not back: this long without a heartbeat
ACTIVE_S = 3.0  # load running: the master heartbeats every second, three missed
CHECK_S = 0.25
# The watch woke this much later than CHECK_S: this worker itself was frozen (a starved or swapping
# host), and the master's heartbeats of that time still wait in the socket. Measured in CI (two test
# shards on 2 cores): a worker frozen about 4 s at a master's SIGTERM woke, found no heartbeat for 3.7 s
# before its message loop had read the queued ones, and left a live master (9 records spooled).
STALL_S = 1.0
WORKER_REPORT_S = 3.0  # Locust's WORKER_REPORT_INTERVAL


def idle_timeout() -> float:
    """Seconds an idle worker waits for a silent master (LLMLOAD_MASTER_TIMEOUT, default 15)."""
    try:
        return max(ACTIVE_S, float(os.environ.get("LLMLOAD_MASTER_TIMEOUT", "15")))
    except ValueError:
        return 15.0


class MasterWatch:
    """One worker's watch over its master, and what it does when the master is gone."""

    def __init__(self, environment: Any, *, run: Callable[[], LLMRun | None]) -> None:
        self.env = environment
        self.run = run
        self.last_heartbeat = time.monotonic()
        self.broken = False  # the connection to the master is down (ZeroMQ's monitor said so)
        self.gone: str | None = None  # why the master was given up on
        self.run_id = ""
        self.results_dir = ""  # the master's results directory, as the master names it
        self._recent: deque[tuple[float, list[dict[str, Any]]]] = deque()  # (when, lines) reported
        self._busy = False  # the message loop is busy (``busy``): no heartbeat can be read

    def install(self) -> MasterWatch:
        self.env.events.heartbeat_received.add_listener(self._heartbeat)
        self.env.events.report_to_master.add_listener(self._reported)  # after distribution.py's
        gevent.spawn(self._monitor_connection)
        gevent.spawn(self._loop)
        return self

    def joined(self, run_id: str, results_dir: str) -> None:
        """A scenario from the master: the run it belongs to, and where the master writes it."""
        self.run_id, self.results_dir = run_id, results_dir
        self._recent.clear()

    @contextmanager
    def busy(self) -> Iterator[None]:
        """This worker's message loop is busy meanwhile, and the master's heartbeats wait in its socket:
        the master's silence counts from the end."""
        self._busy = True
        try:
            yield
        finally:
            self._busy = False
            self.last_heartbeat = max(self.last_heartbeat, time.monotonic())

    def _heartbeat(self, **_: Any) -> None:
        self.last_heartbeat = time.monotonic()

    def _reported(self, data: dict[str, Any], **_: Any) -> None:
        """Keep the lines of the last reports: the master may die before it writes them."""
        lines = (data.get("llmload") or {}).get("lines") or []
        now = time.monotonic()
        run = self.run()
        keep_s = 2 * ((run.sc.client.report_interval if run is not None else 2.0) + WORKER_REPORT_S)
        if lines:
            self._recent.append((now, list(lines)))
        while self._recent and self._recent[0][0] < now - keep_s:
            self._recent.popleft()

    def _monitor_connection(self) -> None:
        """Follow the worker's connection to the master (ZeroMQ socket events), while it lasts."""
        try:
            mon = self.env.runner.client.socket.get_monitor_socket(
                zmq.EVENT_CONNECTED | zmq.EVENT_DISCONNECTED
            )
            while self.gone is None:
                ev = recv_monitor_message(mon)
                self.broken = ev["event"] == zmq.EVENT_DISCONNECTED
        except Exception as e:  # noqa: BLE001 - heartbeats alone still find a master that is gone
            log.debug("llmload worker: no connection monitor: %s", e)

    def active(self) -> bool:
        """Load is running here: users spawned, or streams open."""
        run = self.run()
        state = str(getattr(self.env.runner, "worker_state", ""))
        return state in ("spawning", "running") or (run is not None and run.streams_open() > 0)

    def why_gone(self, now: float) -> str | None:
        """Why the master counts as gone now, or None."""
        silent = now - self.last_heartbeat
        if self.broken and silent > BROKEN_S:
            return f"the connection to the master broke ({silent:.1f} s without a heartbeat)"
        limit = ACTIVE_S if self.active() else idle_timeout()
        if silent > limit:
            return f"no heartbeat from the master for {silent:.1f} s"
        return None

    def _loop(self) -> None:
        last = time.monotonic()
        while self.gone is None:
            gevent.sleep(CHECK_S)
            now = time.monotonic()
            late, last = now - last - CHECK_S, now
            if late > STALL_S:
                self.frozen_for(late)  # judge again once the message loop has read what came meanwhile
                continue
            if self._busy:
                continue
            why = self.why_gone(now)
            if why is not None:
                self.orphaned(why)

    def frozen_for(self, seconds: float) -> None:
        """This worker was frozen ``seconds``: a silence of the master counts only while it was awake."""
        self.last_heartbeat += seconds
        say(
            f"llmload worker: this process was frozen {seconds:.1f} s (a busy host?); not counted as the master's silence"
        )

    def orphaned(self, why: str) -> None:
        """The master is gone: stop sending, cut the streams, spool the records, exit 5."""
        self.gone = why
        opts = self.env.parsed_options
        where = f"{getattr(opts, 'master_host', '?')}:{getattr(opts, 'master_port', '?')}"
        run = self.run()
        n = run.streams_open() if run is not None else 0
        say(f"llmload worker: master at {where} is gone: {why}; stopping now, cutting {n} open stream(s)")
        self.env.process_exit_code = EXIT_MASTER_LOST
        if run is not None:
            run.start_draining()  # no new request from here on
            run.abort_inflight()  # each open stream recorded as aborted
            self._spool(run)
        gevent.spawn(self.env.runner.quit)  # Locust's main then exits with process_exit_code

    def _spool(self, run: LLMRun) -> None:
        unreported = run.collector.drain()["lines"]
        reported = [x for _, lines in self._recent for x in lines]
        if not unreported and not reported:
            return
        me = str(getattr(self.env.runner, "client_id", run.worker_id))
        path = spool_path(Path(self.results_dir) if self.results_dir else None, self.run_id, me)
        try:
            write_spool(path, reported + unreported)
        except OSError as e:
            say(f"llmload worker: could not spool {len(unreported)} unreported record(s) to {path}: {e}")
            return
        say(
            f"llmload worker: {len(unreported)} record(s) never reported (and {len(reported)} of the last "
            f"reports) spooled to {path}; `llmload report RESULTS_DIR` folds RESULTS_DIR/orphans/ in"
        )


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
