"""How many worker processes a host can use: ``--workers auto`` and the cores it counts."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

MAX_PER_CORE = 2  # --workers beyond this many a core: refused (each would start a process, for nothing)


def usable_cores() -> int:
    """The cores this process may run on: its CPU affinity, capped by a cgroup v2 CPU quota (a
    container limited to 2 CPUs on a 64-core host has 2)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
        if quota != "max":
            cores = min(cores, max(1, int(int(quota) // int(period))))
    except (OSError, ValueError):
        pass
    return cores


def worker_count(value: str) -> int:
    """``--workers``: a count, or ``auto`` (the usable cores less one; 0 on one core)."""
    if value == "auto":
        return max(0, usable_cores() - 1)
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of workers or 'auto', got {value!r}") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"expected 0 or more workers, got {n}")
    cores = usable_cores()
    if n > MAX_PER_CORE * cores:
        raise argparse.ArgumentTypeError(
            f"{n} workers on {cores} core(s): at most {MAX_PER_CORE * cores} here (a worker beyond the"
            " cores reads its streams late; more hosts: llmload master and llmload worker)"
        )
    return n
