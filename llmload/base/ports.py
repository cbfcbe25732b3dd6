"""A free port that no other process is handed by the kernel in the meantime.

    port = quiet_port()   # then pass it on (Locust's master binds it seconds later)

A port from ``bind(port 0)`` comes from the kernel's ephemeral range, the same range every outgoing
connection on the host draws from: between the pick and the bind (Locust's import, seconds on a busy
host) another process's connection can take it. Measured in CI: ``llmload run --workers 2`` failed
with Locust's "Address already in use" traceback while a second test shard ran beside it. A port just
below that range (``/proc/sys/net/ipv4/ip_local_port_range``) is only ever taken by a process that
names it, so the window shrinks from "any connection" to "another picker's same random choice".
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
SPAN = 16384  # how many ports below the ephemeral range are drawn from
TRIES = 64


def _ephemeral_low() -> int:
    try:
        return int(RANGE_FILE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def _free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def quiet_port(host: str = "127.0.0.1", rng: random.Random | None = None) -> int:
    """A free port on ``host`` outside the ephemeral range, else (none found) one from the kernel."""
    pick = rng or random.SystemRandom()
    high = _ephemeral_low() - 1
    low = max(1024, high - SPAN)
    for _ in range(TRIES if high > low else 0):
        port = pick.randint(low, high)
        if _free(host, port):
            return port
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])
