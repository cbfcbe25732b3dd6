"""Event-loop lag: a greenlet that sleeps ``period_s`` and records how much later than that it woke.

Every stream's read waits on the same loop, so this lag is how late any read can be stamped in user
space (kernel receive stamps do not include it). It corrupts TTFT and ITL long before Locust's 90%
CPU warning (DESIGN.md), which is why every load process measures it.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import gevent


class LoopLag:
    def __init__(self, record: Callable[[float], None]) -> None:
        self.record = record  # seconds late, one sample per wake-up
        self._greenlet: gevent.Greenlet | None = None

    def start(self, period_s: float = 0.01) -> bool:
        """Start sampling; False when it already runs."""
        if self._greenlet is not None:
            return False

        def loop() -> None:
            clock = time.perf_counter
            while True:
                t = clock()
                gevent.sleep(period_s)
                self.record(max(0.0, clock() - t - period_s))

        self._greenlet = gevent.spawn(loop)
        return True

    def stop(self) -> None:
        if self._greenlet is not None:
            self._greenlet.kill(block=False)
            self._greenlet = None
