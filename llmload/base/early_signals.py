"""Signals before Locust's handlers are in place (``llmload run | ui | master | worker``): one line,
``nothing was sent``, and exit 130 / 143.

Until anything is made (the scenario is being read), ``exit_at_once`` ends the process there and
then: a SystemExit raised inside a C extension's import (pydantic's) crashed the interpreter once
(SIGSEGV, the signal-instant sweep). Once the handoff file and local workers exist, ``exit_cleanly``
raises SystemExit so the ``finally`` that removes them runs.

``import locust`` monkey-patches the interpreter with gevent, and that patching walks every lock there
is, the import system's own included. An exception raised from a signal handler in the middle of it
leaves an import lock half patched ("RuntimeError: cannot release un-acquired lock", a traceback,
seen by the sweep 1.2 s into a local run). ``signals_held`` holds the signals back while it runs;
they reach the handler in place as soon as the import is done, at most a second later.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

from llmload.base.exitcodes import exit_code_for_signal

HELD = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def signals_held() -> Iterator[None]:
    came: list[int] = []

    def hold(signum: int, _frame: FrameType | None) -> None:
        came.append(signum)

    before = {s: signal.signal(s, hold) for s in HELD}
    try:
        yield
    finally:
        for s, handler in before.items():
            signal.signal(s, signal.SIG_DFL if handler is None else handler)
        for n in dict.fromkeys(came):  # each once, in the order they came
            signal.raise_signal(n)


def _say(signum: int) -> int:
    name = signal.Signals(signum).name
    print(f"llmload: {name} before the load started: nothing was sent, no results written", file=sys.stderr)
    return exit_code_for_signal(name)


def exit_at_once(signum: int, _frame: object) -> None:
    """Nothing was sent or made: end now."""
    code = _say(signum)
    sys.stderr.flush()
    os._exit(code)


def exit_cleanly(signum: int, _frame: object) -> None:
    """Nothing was sent: end through the ``finally`` blocks that remove what was made."""
    raise SystemExit(_say(signum))


def on_early_signals(handler: Callable[[int, object], None]) -> None:
    for sig in HELD:  # replaced by gevent's watchers (llmload/locust/signals.py) at init
        signal.signal(sig, handler)
