"""Real InfluxDB 1.x and VictoriaMetrics processes for tests, on free loopback ports.

Usage::

    from tests.servers import influxdb_server, victoria_metrics_server

    def test_x(tmp_path):
        with influxdb_server(tmp_path) as influx:          # InfluxHandle
            influx.create_database("llmload")
            ... write to influx.url ...
            rows = influx.query("SELECT count(ttft_ms) FROM llm_request", db="llmload")
            influx.stop(); influx.start()                   # same port, same data (outage tests)

        with victoria_metrics_server(tmp_path) as vm:      # VMHandle (accepts /api/v2/write)
            series = vm.export('{__name__=~"llm_request_.*"}')

When a binary is missing the helpers skip the test with a reason, except when ``CI=true``,
where they fail it (CI must run against the real servers).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llmload.base.ports import quiet_port
from tests.required import require

INFLUXD = "influxd"
VICTORIA = "victoria-metrics"


def require_binary(name: str) -> str:
    """Path of ``name``; skips the test when missing, fails it when CI=true."""
    package = {INFLUXD: "influxdb"}.get(name, name)
    return require(
        shutil.which(name), f"{name} is not installed (apt-get install -y --no-install-recommends {package})"
    )


def spawn_llmload(args: list[str], log: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """``python -m llmload ARGS`` from the repository's root, its output in ``log`` (``env``: the
    whole environment, else this process's)."""
    with open(log, "wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "llmload", *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=Path(__file__).resolve().parent.parent,
            env=env,
        )


@contextmanager
def distributed_run(
    scenario: Path, out: Path, logs: Path, workers: list[dict[str, str]], env: dict[str, str] | None = None
) -> Iterator[tuple[subprocess.Popen[bytes], list[subprocess.Popen[bytes]]]]:
    """A headless ``llmload run`` master on a free port waiting for ``len(workers)`` workers, and those
    ``llmload worker`` processes, each in this environment plus ``env`` plus its own dict; logs in
    ``logs`` (master.log, w0.log, ...). Whatever still runs at the end is killed."""
    port, env = free_port(), {**os.environ, **(env or {})}
    args = ["run", str(scenario), "--expect-workers", str(len(workers)), "--master-bind-port", str(port)]
    master = spawn_llmload([*args, "--results", str(out), "--no-reports"], logs / "master.log", env)
    procs = [master]
    try:
        for i, own in enumerate(workers):
            worker = ["worker", "--master-port", str(port)]
            procs.append(spawn_llmload(worker, logs / f"w{i}.log", {**env, **own}))
        yield master, procs[1:]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def free_port() -> int:
    """A loopback port that was free a moment ago, outside the range the kernel hands to outgoing
    connections (llmload/base/ports.py): the caller binds it, maybe seconds later."""
    return quiet_port()


def _http(url: str, data: bytes | None = None, timeout: float = 5.0) -> tuple[int, bytes]:
    req = urllib.request.Request(url, data=data, method="POST" if data is not None else "GET")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def _wait_http(url: str, proc: subprocess.Popen[bytes], ok: tuple[int, ...], timeout: float = 20.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args[0]} exited with {proc.returncode} before {url} answered")
        try:
            status, _ = _http(url, timeout=1.0)
            if status in ok:
                return
        except OSError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"{url} did not answer within {timeout} s")


def stop_process(proc: subprocess.Popen[bytes] | None) -> None:
    """SIGTERM, then SIGKILL after 10 s: the tests' one way to stop a process they started."""
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


@dataclass
class InfluxHandle:
    """A running ``influxd`` (1.x): v1 /write and InfluxQL /query."""

    url: str
    port: int
    root: Path
    binary: str
    config_path: Path
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    def start(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            return
        log = open(self.root / "influxd.log", "ab")
        self.proc = subprocess.Popen(
            [self.binary, "-config", str(self.config_path)], stdout=log, stderr=subprocess.STDOUT
        )
        log.close()
        _wait_http(self.url + "/ping", self.proc, ok=(204,))

    def stop(self) -> None:
        stop_process(self.proc)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def version(self) -> str:
        """What the server says it is: the X-Influxdb-Version header of its /ping."""
        with urllib.request.urlopen(self.url + "/ping", timeout=5) as resp:
            return str(resp.headers["X-Influxdb-Version"])

    def create_database(self, name: str) -> None:
        self.query(f'CREATE DATABASE "{name}"')

    def query(self, q: str, db: str | None = None) -> list[dict[str, Any]]:
        """Run InfluxQL; one dict per row, with the series' tags merged in (and ``_measurement``)."""
        params = {"q": q, "epoch": "ns"}
        if db:
            params["db"] = db
        status, body = _http(self.url + "/query", data=urllib.parse.urlencode(params).encode())
        if status != 200:
            raise RuntimeError(f"InfluxQL {q!r} -> HTTP {status}: {body[:300]!r}")
        rows: list[dict[str, Any]] = []
        for result in json.loads(body).get("results", []):
            if "error" in result:
                raise RuntimeError(f"InfluxQL {q!r}: {result['error']}")
            for series in result.get("series", []):
                for values in series.get("values", []):
                    row = dict(zip(series["columns"], values, strict=False))
                    row.update(series.get("tags") or {})
                    row["_measurement"] = series.get("name")
                    rows.append(row)
        return rows

    def count(self, measurement: str, field_name: str, db: str, where: str = "") -> int:
        """Number of stored points that have ``field_name``."""
        clause = f" WHERE {where}" if where else ""
        rows = self.query(f'SELECT count("{field_name}") FROM "{measurement}"{clause}', db=db)
        return int(rows[0]["count"]) if rows else 0


_INFLUX_CONF = """\
reporting-disabled = true
bind-address = "127.0.0.1:{rpc_port}"

[meta]
  dir = "{root}/meta"
  logging-enabled = false

[data]
  dir = "{root}/data"
  wal-dir = "{root}/wal"
  query-log-enabled = false
  trace-logging-enabled = false

[http]
  enabled = true
  bind-address = "127.0.0.1:{port}"
  auth-enabled = false
  log-enabled = false
  max-body-size = 0

[monitor]
  store-enabled = false

[continuous_queries]
  enabled = false

[subscriber]
  enabled = false
"""


@contextmanager
def influxdb_server(tmp_path: Path) -> Iterator[InfluxHandle]:
    """Start ``influxd`` with its data under ``tmp_path``; stopped on exit."""
    binary = require_binary(INFLUXD)
    root = Path(tmp_path) / f"influxd-{os.getpid()}-{time.monotonic_ns()}"
    root.mkdir(parents=True)
    last: Exception | None = None
    for _ in range(3):  # a probed port can be taken between the probe and the bind
        port, rpc_port = free_port(), free_port()
        conf = root / "influxdb.conf"
        conf.write_text(_INFLUX_CONF.format(root=root, port=port, rpc_port=rpc_port))
        handle = InfluxHandle(f"http://127.0.0.1:{port}", port, root, binary, conf)
        try:
            handle.start()
        except RuntimeError as exc:
            last = exc
            handle.stop()
            continue
        try:
            yield handle
        finally:
            handle.stop()
        return
    raise RuntimeError(f"influxd did not start: {last}; see {root / 'influxd.log'}")


@dataclass
class VMHandle:
    """A running single-node VictoriaMetrics (accepts Influx line protocol on /write and /api/v2/write)."""

    url: str
    port: int
    root: Path
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    def flush(self) -> None:
        """Make just-written samples visible to queries."""
        _http(self.url + "/internal/force_flush")

    def export(self, match: str) -> list[dict[str, Any]]:
        """``/api/v1/export`` as a list of ``{"metric": {...}, "values": [...], "timestamps": [...]}``."""
        self.flush()
        query = urllib.parse.urlencode({"match[]": match})
        status, body = _http(f"{self.url}/api/v1/export?{query}")
        if status != 200:
            raise RuntimeError(f"export {match!r} -> HTTP {status}: {body[:300]!r}")
        return [json.loads(line) for line in body.decode().splitlines() if line.strip()]

    def sample_count(self, match: str) -> int:
        return sum(len(s["values"]) for s in self.export(match))


def vm_process(port: int, root: Path) -> subprocess.Popen[bytes]:
    """``victoria-metrics`` on ``port`` with its storage and log under ``root`` (not waited for)."""
    with open(root / "vm.log", "ab") as log:
        return subprocess.Popen(
            [
                require_binary(VICTORIA),
                f"-httpListenAddr=127.0.0.1:{port}",
                f"-storageDataPath={root / 'data'}",
                "-retentionPeriod=100y",
                "-search.latencyOffset=0s",
                "-loggerLevel=ERROR",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )


@contextmanager
def victoria_metrics_server(tmp_path: Path) -> Iterator[VMHandle]:
    """Start ``victoria-metrics`` with its storage under ``tmp_path``; stopped on exit."""
    root = Path(tmp_path) / f"vm-{os.getpid()}-{time.monotonic_ns()}"
    root.mkdir(parents=True)
    last: Exception | None = None
    for _ in range(3):
        port = free_port()
        proc = vm_process(port, root)
        handle = VMHandle(f"http://127.0.0.1:{port}", port, root, proc)
        try:
            _wait_http(handle.url + "/health", proc, ok=(200,))
        except RuntimeError as exc:
            last = exc
            stop_process(proc)
            continue
        try:
            yield handle
        finally:
            stop_process(proc)
        return
    raise RuntimeError(f"victoria-metrics did not start: {last}; see {root / 'vm.log'}")
