"""Every wait says what it waits for: the master for its workers, a worker for its master.

    watch_workers(environment, expect=2, headless=True, started=lambda: ...)   # master, at init
    watch_master(environment, started=lambda: ...)                              # worker, at init

A master or worker that waits silently looks hung: a user who ran ``llmload master`` without
``--headless`` saw nothing for ten minutes (the web UI waited for Start), and a worker whose master
never started a test printed nothing at all. Each wait prints one line at once and repeats it at
5, 10, 20, 40 s and then every 60 s while it lasts, naming what it waits for and what would end
it. Reaching the targets from each worker (readiness) is conductor.py's wait, with the same rhythm.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import gevent

from llmload.base.children import RUN_WORKER

FIRST_REPEAT_S = 5.0
MAX_REPEAT_S = 60.0


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def repeats() -> Iterator[float]:
    """Seconds between repeats of a waiting line: 5, 10, 20, 40, then every 60."""
    gap = FIRST_REPEAT_S
    while True:
        yield gap
        gap = min(MAX_REPEAT_S, gap * 2)


class Every:
    """Due after ``first_s``, then after each of ``repeats()``'s gaps (for loops that poll faster)."""

    def __init__(self, first_s: float = 0.0) -> None:
        self._gaps = repeats()
        self._next = time.monotonic() + first_s

    def due(self) -> bool:
        now = time.monotonic()
        if now < self._next:
            return False
        self._next = now + next(self._gaps)
        return True


def _repeat(line: Callable[[], str | None]) -> gevent.Greenlet:
    """Print ``line()`` now and at each repeat, until it returns None."""

    def loop() -> None:
        for gap in repeats():
            text = line()
            if text is None:
                return
            say(text)
            gevent.sleep(gap)

    return gevent.spawn(loop)


def watch_workers(
    environment: Any, *, expect: int, headless: bool, started: Callable[[], bool]
) -> gevent.Greenlet:
    """Master: which workers have connected, and what starts the test."""
    opts = environment.parsed_options
    runner = environment.runner
    where = f"{opts.master_bind_host}:{opts.master_bind_port}"
    if not headless:
        host = opts.web_host if opts.web_host not in ("", "*", "0.0.0.0") else "127.0.0.1"
        say(
            f"llmload: web UI at http://{host}:{opts.web_port}: press Start there "
            f"(or run with --headless to start once {expect} worker(s) are connected)"
        )

    def line() -> str | None:
        if started():
            return None
        ready = sorted(runner.clients.keys())
        names = f": {', '.join(ready)}" if ready else ""
        if len(ready) >= expect and not headless:
            return f"llmload: {len(ready)} worker(s) connected{names}; waiting for Start in the web UI"
        if len(ready) >= expect:
            return None
        return (
            f"llmload: waiting for {expect} worker(s) at {where} ({len(ready)} connected{names}); "
            f"start them with: llmload worker --master-host HOST --master-port {opts.master_bind_port}"
        )

    return _repeat(line)


def watch_master(environment: Any, *, started: Callable[[], bool]) -> gevent.Greenlet:
    """Worker: connected (Locust's runner connects before init), waiting for the master's test."""
    opts = environment.parsed_options
    me = environment.runner.client_id
    quiet = bool(os.environ.get(RUN_WORKER))  # a worker of llmload run: its master speaks for it
    if not quiet:
        say(f"llmload worker: connected to the master at {opts.master_host}:{opts.master_port} as {me}")

    def line() -> str | None:
        if started() or quiet:
            return None
        return "llmload worker: waiting for the master to start a test"

    return _repeat(line)
