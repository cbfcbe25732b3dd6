"""Child processes llmload starts for a run (simulators, the telemetry scraper) die with it."""

from __future__ import annotations

import signal


def die_with_parent() -> None:
    """Linux: the child gets SIGTERM if its parent dies (even by SIGKILL), so none is orphaned.

    Passed as ``preexec_fn``: it runs in the child between fork and exec.
    """
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
