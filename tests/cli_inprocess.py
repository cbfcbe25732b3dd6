"""``llmload.cli.main([...])`` called in the test's own process, as a user would type the command.

    r = call_cli(["validate", "s.yaml"], cwd=tmp_path)
    assert r.code == 2 and r.err_lines == [...]

For logic behind the command line (bad input, exit codes, messages): the same code path as the real
command without an interpreter's start-up per case. What a call could leave behind is put back: the
working directory, environment, ``sys.argv``, signal handlers. A call that gets as far as starting
Locust fails the test: Locust would monkey-patch and take over this process (those runs are
integration tests, in a process of their own).
"""

from __future__ import annotations

import contextlib
import io
import signal
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)


@dataclass(frozen=True)
class CliResult:
    code: int
    out: str
    err: str

    @property
    def err_lines(self) -> list[str]:
        return self.err.strip().splitlines()


def _no_locust(largs: list[str]) -> int:
    raise AssertionError(f"the command reached Locust (locust {' '.join(largs)}): not a bad-input case")


def call_cli(argv: list[str], *, cwd: Path, env: dict[str, str] | None = None) -> CliResult:
    """Run ``llmload ARGV`` in this process from ``cwd``; its exit code and what it printed."""
    from llmload import cli
    from llmload.locust import runcmd

    out, err = io.StringIO(), io.StringIO()
    handlers = {s: signal.getsignal(s) for s in SIGNALS}
    code: Any
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.chdir(cwd)
            mp.setattr(sys, "argv", ["llmload", *argv])
            mp.setattr(runcmd, "_locust_main", _no_locust)
            mp.setenv("HOME", str(cwd))
            for k, v in (env or {}).items():
                mp.setenv(k, v)
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                try:
                    code = cli.main(list(argv))
                except SystemExit as e:  # argparse, and commands that exit themselves
                    code = e.code
    finally:
        for s, h in handlers.items():
            if h is not None:
                signal.signal(s, h)
    if code is None:
        code = 0
    elif not isinstance(code, int):  # SystemExit("message"): Python prints it and exits 1
        err.write(f"{code}\n")
        code = 1
    return CliResult(code, out.getvalue(), err.getvalue())
