"""A streaming client's CPU per chunk, measured the same way for llmload and its peers (bench_fullrun.py).

Chunks are counted by the test SSE server (tests/sse_server.py, GET /llmload_test/sent), so every
client is held to what was sent to it, whatever it reports of itself; CPU is the client's whole
process tree (psutil), over a window of the caller's choosing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil

PER_STREAM = 50.0  # chunks/s of one stream: one every 20 ms
CHUNKS = 200  # chunks per request
SSE_SERVER = Path(__file__).resolve().parent.parent / "tests" / "sse_server.py"


@contextmanager
def sse_server(core: int) -> Iterator[int]:
    """The test SSE server, pinned to ``core``, for the block: its port."""
    with tempfile.TemporaryDirectory(prefix="llmload-bench-srv-") as d:
        port_file = Path(d) / "port"
        cmd = [sys.executable, str(SSE_SERVER), "--port", "0", "--port-file", str(port_file)]
        server = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            os.sched_setaffinity(server.pid, {core})
            for _ in range(400):
                if port_file.exists() and port_file.read_text().strip():
                    break
                time.sleep(0.05)
            yield int(port_file.read_text())
        finally:
            server.kill()
            server.wait()


def tree_cpu(p: psutil.Process) -> tuple[float, float]:
    """(user, system) CPU seconds of ``p`` and its children."""
    user = system = 0.0
    for q in [p, *p.children(recursive=True)]:
        try:
            t = q.cpu_times()
        except psutil.Error:
            continue
        user, system = user + t.user, system + t.system
    return user, system


def sent(port: int) -> int:
    """Content chunks the server has written so far (tests/sse_server.py): what any client read."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/llmload_test/sent", timeout=10) as r:
        return int(json.loads(r.read())["chunks"])


def window(p: psutil.Process, port: int, seconds: float) -> tuple[float, float, float, int]:
    """(CPU user, CPU system, wall seconds, chunks the server sent) over the next ``seconds``."""
    (u0, s0), n0, t0 = tree_cpu(p), sent(port), time.time()
    time.sleep(seconds)
    (u1, s1), n1, t1 = tree_cpu(p), sent(port), time.time()
    return u1 - u0, s1 - s0, t1 - t0, n1 - n0


def steady(
    port: int, rate: float, proc: subprocess.Popen, timeout_s: float = 120.0, ramp_s: float | None = None
) -> None:
    """Wait until the server sends at least 90% of ``rate`` (a peer's start-up, torch's import included).
    With ``ramp_s``, a client that streams at half the rate but stays under 90% ``ramp_s`` seconds later
    is measured at what it reaches (a peer that saturates its core); without, that is an error."""
    end = time.time() + timeout_s
    last, t_last = sent(port), time.time()
    flowing: float | None = None
    while time.time() < end and proc.poll() is None:
        time.sleep(1.0)
        n, t = sent(port), time.time()
        if (n - last) / (t - t_last) >= 0.9 * rate:
            time.sleep(1.0)
            return
        if flowing is None and (n - last) / (t - t_last) >= 0.5 * rate:
            flowing = t
        if ramp_s is not None and flowing is not None and t - flowing >= ramp_s:
            return
        last, t_last = n, t
    raise SystemExit(f"the client never reached 90% of {rate:,.0f} chunks/s: {proc.args}")


def quiet(port: int, timeout_s: float = 30.0) -> None:
    """Wait until the server sends nothing for a second: the streams of a client just killed have
    ended, and none of their chunks is counted for the next one."""
    end = time.time() + timeout_s
    last = sent(port)
    while time.time() < end:
        time.sleep(1.0)
        n = sent(port)
        if n == last:
            return
        last = n


def row(client: str, rate: float, users: int, cpu: tuple[float, float, float, int]) -> dict:
    user, system, wall, chunks = cpu
    return {
        "reader": client,
        "rate_asked": rate,
        "users": users,
        "chunks_per_s": round(chunks / wall, 1),
        "cpu_percent": round((user + system) / wall * 100, 1),
        "us_per_chunk": round((user + system) / max(chunks, 1) * 1e6, 1),
        "system_us_per_chunk": round(system / max(chunks, 1) * 1e6, 1),
    }
