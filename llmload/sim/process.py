"""Start a simulator as a subprocess and learn its port: what ``llmload run`` and the tests use.

    with SimProcess(["--profile", "test-fast-a"]) as sim:
        httpx.get(sim.base_url + "/health")

The child is started with ``--port 0 --port-file``; :meth:`start` waits for the port file (the
server accepts before the file appears) and raises :class:`SimStartError` with the child's last
stderr lines when it exits or times out first.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path
from types import TracebackType

from llmload.base.children import ChildStartError, spawn, stop, wait_port_file

WILDCARDS = ("", "*", "0.0.0.0", "::")


class SimStartError(RuntimeError):
    pass


class SimProcess:
    def __init__(
        self,
        args: list[str],
        *,
        host: str = "127.0.0.1",
        python: str = sys.executable,
        start_timeout_s: float = 20.0,
        env: dict[str, str] | None = None,
        name: str = "",
        log_path: Path | None = None,
        tied: bool = False,
    ) -> None:
        """``log_path``: stdout and stderr go there (else stderr to a temporary file). ``tied``: the
        simulator llmload starts for a run: it dies with llmload, and in a session of its own, so a
        terminal's Ctrl-C reaches llmload alone, which stops it in order."""
        self.args = args
        self.name = name  # the target it serves, when llmload started it for one
        self.log_path = log_path
        self.tied = tied
        self.host = host
        self.python = python
        self.start_timeout_s = start_timeout_s
        self.env = env
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self._dir: tempfile.TemporaryDirectory[str] | None = None

    @property
    def base_url(self) -> str:
        """The address this host uses (a wildcard listener is reached on loopback)."""
        host = "127.0.0.1" if self.host in WILDCARDS else self.host
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{self.port}"

    def start(self) -> SimProcess:
        self._dir = tempfile.TemporaryDirectory(prefix="llmload-sim-")
        port_file = Path(self._dir.name) / "port"
        err_path = self.log_path or Path(self._dir.name) / "stderr"
        cmd = [
            self.python,
            "-m",
            "llmload.sim",
            "--host",
            self.host,
            "--port",
            "0",
            "--port-file",
            str(port_file),
        ]
        self.proc = spawn([*cmd, *self.args], tied=self.tied, log=err_path, env=self.env)
        try:
            self.port = wait_port_file(self.proc, port_file, self.start_timeout_s, what="simulator")
            return self
        except ChildStartError as e:
            tail = err_path.read_text(errors="replace").strip().splitlines()[-3:]
            self.stop()
            raise SimStartError(f"{e}: {' | '.join(tail) or '(no stderr)'}") from None

    def stderr_text(self) -> str:
        if self._dir is None:
            return ""
        p = self.log_path or Path(self._dir.name) / "stderr"
        return p.read_text(errors="replace") if p.exists() else ""

    def stop(self, timeout_s: float = 10.0) -> int | None:
        """SIGTERM, then SIGKILL after ``timeout_s``; returns the exit code."""
        return stop(self.proc, timeout_s) if self.proc is not None else None

    def close(self, timeout_s: float = 10.0) -> None:
        self.stop(timeout_s)
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None

    def __enter__(self) -> SimProcess:
        return self.start()

    def __exit__(
        self, t: type[BaseException] | None, v: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
