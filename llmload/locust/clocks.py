"""Worker clocks against the master's: the round trips (the arithmetic: llmload/measure/clock_offset.py).

A worker asks as soon as its run arrives (PROBES round trips, PROBE_GAP_S apart, before its readiness
check, so the offset is known before the master's first step comes), then every PERIOD_S while that
run is its run; the master answers each at once with its own wall clock. The worker places the
master's step times on its own clock and its reports on the master's (llmload/locust/distribution.py).
"""

from __future__ import annotations

import logging
import time
from typing import Any

import gevent

from llmload.locust.state import ProcessState, state_of

log = logging.getLogger("llmload")
MSG_CLOCK = "llmload_clock"  # worker -> master: {"t0": the worker's wall clock at the send}
MSG_CLOCK_BACK = "llmload_clock_back"  # master -> worker: {"t0", "t1": the master's wall clock}
PROBES = 8
PROBE_GAP_S = 0.02
PERIOD_S = 10.0  # clocks drift by parts per million: a probe now and then keeps the estimate fresh


def register_master(runner: Any) -> None:
    runner.register_message(MSG_CLOCK, _answer)


def register_worker(runner: Any) -> None:
    runner.register_message(MSG_CLOCK_BACK, _answered)


def _answer(environment: Any, msg: Any, **_: Any) -> None:
    data = {"t0": msg.data["t0"], "t1": time.time()}
    environment.runner.send_message(MSG_CLOCK_BACK, data, client_id=msg.node_id)


def _answered(environment: Any, msg: Any, **_: Any) -> None:
    t3 = time.time()
    state_of(environment).clock.sample(float(msg.data["t0"]), float(msg.data["t1"]), t3)


def probe(runner: Any, st: ProcessState, run: Any) -> None:
    """Round trips for as long as ``run`` is this worker's run (a greenlet: spawned with the run)."""
    n = 0
    while st.run is run:
        try:
            runner.send_message(MSG_CLOCK, {"t0": time.time()})
        except Exception as e:  # noqa: BLE001 - a master that is gone is the watch's business (orphan.py)
            log.debug("llmload worker: clock probe not sent: %s", e)
        n += 1
        gevent.sleep(PROBE_GAP_S if n < PROBES else PERIOD_S)
