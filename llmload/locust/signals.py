"""SIGINT (Ctrl-C) and SIGTERM (docker stop, a pod eviction, a CI timeout) end a run truthfully.

    signals = RunSignals(env, headless=True, conductor=lambda: STATE.conductor, on_before_load=stop_sims)
    signals.install()          # from events.init, on a local runner or a master (not on workers)

The first signal stops new requests and lets in-flight streams finish within ``load.stop_grace``;
a second cuts them at once (status ``aborted``). Either way the run ends as every run ends: the
results directory, the reports and the verdict are written, with status ``interrupted``, the
signal's name as ``stop_reason``, and the exit code a shell gives a process that a signal ended
(128 + its number: 130 for SIGINT, 143 for SIGTERM). A signal before the load starts (targets
still loading) stops at once: nothing was sent, so nothing is written, and the line says so.

Why llmload handles them itself (measured with Locust 2.47): a headless run always has a shape,
and Locust installs its SIGTERM handler only after the shape's greenlet ends, so SIGTERM killed
the process with no summary.json and the last interval's records lost (24 of 144); Ctrl-C raised
KeyboardInterrupt inside the shape's join, which Locust reports as a completed run (exit 0, status
ok, 40 streams per target counted as ``truncated``). gevent's signal watchers replace Python's
SIGINT handler, so no KeyboardInterrupt lands in the middle of a write; in the web UI, where Locust
quits on a signal itself, the quitting listener drains before it writes (plugin.py).
"""

from __future__ import annotations

import logging
import signal
import sys
from collections.abc import Callable
from typing import Any

import gevent

from llmload.base.exitcodes import exit_code_for_signal

log = logging.getLogger("llmload")

HANDLED = (signal.SIGINT, signal.SIGTERM)


class RunSignals:
    """The signal watchers of one llmload process (a local runner or a master)."""

    def __init__(
        self,
        environment: Any,
        *,
        headless: bool,
        conductor: Callable[[], Any],
        on_before_load: Callable[[], None],
    ) -> None:
        self.environment = environment
        self.headless = headless
        self.conductor = conductor  # the current run's Conductor, or None
        self.on_before_load = on_before_load  # stop what setup started (simulators)
        self._watchers: list[Any] = []

    def install(self) -> None:
        if self._watchers:
            return
        for sig in HANDLED:
            self._watchers.append(gevent.signal_handler(sig, self.on_signal, sig))

    def on_signal(self, sig: signal.Signals) -> None:
        name = signal.Signals(sig).name
        c = self.conductor()
        runner = self.environment.runner
        waiting = c is not None and c.state == "init" and getattr(runner, "state", "") == "ready"
        if self.headless and (c is None or waiting):  # starting simulators, or waiting for targets or workers
            self._before_load(name)
            return
        if c is None or (not self.headless and c.state == "init"):  # the web UI, no test running
            self.environment.process_exit_code = exit_code_for_signal(name)
            if sig == signal.SIGINT:  # quit as Locust quits on Ctrl-C (SIGTERM: Locust's own handler)
                self._throw(KeyboardInterrupt())
            return
        first = (
            c.outcome.interrupted is None and c.state != "done"
        )  # "done": the run is being written already
        if first:
            print(
                f"llmload: {name}: stopping; in-flight streams may finish within "
                f"{c.sc.load.stop_grace:g} s ({name} again cuts them now)",
                file=sys.stderr,
                flush=True,
            )
        c.interrupt(name)
        if c.state == "done" and not c.written.is_set():
            print(
                f"llmload: {name}: the load has ended; finishing the results first, then exit "
                f"{exit_code_for_signal(c.outcome.interrupted or name)}",
                file=sys.stderr,
                flush=True,
            )
        if first and not self.headless and sig == signal.SIGINT:
            # The web UI's main greenlet is Locust's web server: quit as Locust quits on Ctrl-C; its
            # quitting listener drains first (SIGTERM is Locust's own handler's in this mode).
            self._throw(KeyboardInterrupt())

    def _before_load(self, name: str) -> None:
        code = exit_code_for_signal(name)
        print(
            f"llmload: {name} before the load started: nothing was sent, no results written", file=sys.stderr
        )
        try:
            self.on_before_load()
        finally:
            self._throw(SystemExit(code))

    @staticmethod
    def _throw(exc: BaseException) -> None:
        """Raise ``exc`` in the main greenlet (waiting on targets, or on Locust's web server)."""
        main = gevent.get_hub().parent
        if main is not None and not main.dead and main is not gevent.getcurrent():
            main.throw(exc)
