"""Ends streams silent for longer than their limit: one greenlet per event loop, not a timer per read.

A socket timeout makes gevent create and cancel a timer for every ``recv`` (~18% of the client's CPU
at 150 streams, and a fatter p99). Instead the sockets block without a timeout, each read stamps
the stream's last-read time, and this watchdog (checked twice a second) shuts down the socket of a
stream silent past its limit; its read then ends as ``TimedOut`` (llmload/client/transport.py).
"""

from __future__ import annotations

import time
from typing import Protocol

import gevent

from llmload.base.hub_local import per_hub

CHECK_S = 0.5


class Watched(Protocol):
    limit: float | None  # the silence allowed now, in seconds
    last_read: float  # perf_counter of the stream's last read

    def expire(self) -> None:
        """End the stream's read: it was silent for longer than ``limit``."""
        ...


class Watchdog:
    """The streams of one event loop that have a silence limit, and the greenlet that checks them."""

    def __init__(self) -> None:
        self.active: dict[int, Watched] = {}
        self._greenlet: gevent.Greenlet | None = None

    @classmethod
    def of_hub(cls) -> Watchdog:
        """This thread's watchdog (one per gevent hub), made at its first stream."""
        return per_hub("llmload_watchdog", cls)

    def add(self, r: Watched) -> None:
        self.active[id(r)] = r
        if self._greenlet is None or self._greenlet.dead:
            self._greenlet = gevent.spawn(self._loop)

    def remove(self, r: Watched) -> None:
        self.active.pop(id(r), None)

    def _loop(self) -> None:
        while self.active:
            gevent.sleep(CHECK_S)
            now = time.perf_counter()
            for r in list(self.active.values()):
                if r.limit is not None and now - r.last_read > r.limit:
                    r.expire()
        self._greenlet = None
