"""Child processes llmload starts (simulators, the self-test server, the /metrics scraper, local
workers, capacity probes): one way to spawn them, wait for them to be up, and stop them.

    child = spawn(cmd, tied=True, log=path)        # dies with llmload; its own session
    port = wait_port_file(child, port_file, 20.0)  # or wait_for(child, ready, timeout_s)
    code = stop(child, timeout_s=10.0)              # SIGTERM, then SIGKILL after timeout_s

``tied``: the child gets SIGTERM if llmload dies (even by SIGKILL, Linux), and runs in a session
of its own, so a terminal's Ctrl-C reaches llmload alone, which stops its children in order.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO

Child = subprocess.Popen[bytes]


class ChildStartError(RuntimeError):
    """A child exited before it was ready, or was not ready in time (the message says which)."""


# Set for the workers ``llmload run --workers N`` starts: their master speaks for them, so they say
# nothing of their own start-up (connecting, waiting, a signal while they import: llmload/__main__.py)
RUN_WORKER = "LLMLOAD_RUN_WORKER"


def die_with_parent() -> None:
    """Linux: the child gets SIGTERM if its parent dies (even by SIGKILL), so none is orphaned.

    Passed as ``preexec_fn``: it runs in the child between fork and exec.
    """
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def spawn(
    cmd: Sequence[str],
    *,
    tied: bool = False,
    own_session: bool | None = None,
    log: Path | None = None,
    quiet: bool = False,
    env: dict[str, str] | None = None,
) -> Child:
    """Start ``cmd`` with no stdin; stdout and stderr to ``log`` when given, else inherited (``quiet``:
    stdout dropped). ``own_session`` defaults to ``tied``."""
    session = tied if own_session is None else own_session
    out: IO[bytes] | int | None = subprocess.DEVNULL if quiet else None
    handle = open(log, "wb") if log is not None else None  # noqa: SIM115 - the child holds it
    try:
        if handle is not None:
            out = handle
        return subprocess.Popen(
            list(cmd),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=handle if handle is not None else None,
            env=env,
            preexec_fn=die_with_parent if tied else None,
            start_new_session=session,
        )
    finally:
        if handle is not None:
            handle.close()  # the child has its own descriptor


def wait_for(
    child: Child,
    ready: Callable[[], bool],
    timeout_s: float,
    *,
    what: str,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Return once ``ready()``; ChildStartError when the child exits first or ``timeout_s`` passes."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if ready():
            return
        if child.poll() is not None:
            raise ChildStartError(f"{what} exited with {child.returncode}")
        sleep(0.02)
    raise ChildStartError(f"{what}: not ready after {timeout_s:g} s")


def wait_port_file(
    child: Child, port_file: Path, timeout_s: float, *, what: str, sleep: Callable[[float], None] = time.sleep
) -> int:
    """The port a child wrote to ``port_file`` once it listens (written whole: temp file, rename)."""
    wait_for(child, port_file.exists, timeout_s, what=what, sleep=sleep)
    return int(port_file.read_text())


def stop(child: Child, timeout_s: float = 10.0, *, grace_s: float = 0.0) -> int:
    """Wait ``grace_s`` for it to end by itself, then SIGTERM, then SIGKILL after ``timeout_s``.

    Returns its exit code.
    """
    try:
        return child.wait(grace_s) if grace_s > 0 else _terminate(child, timeout_s)
    except subprocess.TimeoutExpired:
        return _terminate(child, timeout_s)


def _terminate(child: Child, timeout_s: float) -> int:
    if child.poll() is None:
        child.send_signal(signal.SIGTERM)
        try:
            child.wait(timeout_s)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
    return child.returncode
