"""The local spool: line-protocol files for batches InfluxDB did not accept.

Layout of ``<results dir>/influx-spool/``::

    target.json                       where the points were meant to go (url, api, database,
                                      org, bucket; never a token or password)
    <run_id>-<worker>-<pid>-<n>.lp    one failed batch each, newline-terminated line protocol
    replayed/                         files moved here once ``llmload influx replay`` wrote them

A file is written under a temporary name and renamed, so a crash never leaves a half
batch with the ``.lp`` suffix. Replay moves a file into ``replayed/`` only after every line
of it was accepted, so a second replay does not write it again; re-writing a point that is
already stored is harmless anyway (same series and timestamp overwrite).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

SPOOL_DIRNAME = "influx-spool"
REPLAYED_DIRNAME = "replayed"
TARGET_FILE = "target.json"
SUFFIX = ".lp"

_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")


class Spool:
    """Appends failed batches as files; counts the points it holds."""

    def __init__(self, directory: Path, *, prefix: str) -> None:
        self.directory = Path(directory)
        self.prefix = _SAFE.sub("_", prefix)[:80] or "spool"
        self.points = 0
        self.files = 0
        self._seq = 0
        self._pid = os.getpid()

    def write_target(self, target: dict[str, Any]) -> None:
        """Record where the points were meant to go (no secrets: the caller passes none)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / TARGET_FILE
        if not path.exists():
            _atomic_write(path, json.dumps(target, indent=2, sort_keys=True) + "\n")

    def add(self, lines: list[str]) -> Path | None:
        """Write one batch of lines to a new spool file; returns its path."""
        if not lines:
            return None
        self.directory.mkdir(parents=True, exist_ok=True)
        self._seq += 1
        name = f"{self.prefix}-{self._pid}-{self._seq:06d}{SUFFIX}"
        path = self.directory / name
        _atomic_write(path, "\n".join(lines) + "\n")
        self.points += len(lines)
        self.files += 1
        return path


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def resolve_spool_dir(path: Path) -> Path:
    """A results directory or the spool directory itself -> the spool directory."""
    path = Path(path)
    if (path / SPOOL_DIRNAME).is_dir():
        return path / SPOOL_DIRNAME
    return path


def pending_files(spool_dir: Path) -> list[Path]:
    """Spool files not yet replayed, oldest name first."""
    return sorted(p for p in Path(spool_dir).glob("*" + SUFFIX) if p.is_file())


def read_lines(path: Path) -> list[str]:
    with open(path, encoding="utf-8") as fh:
        return [line for line in fh.read().split("\n") if line.strip()]


def iter_chunks(lines: list[str], size: int) -> Iterator[list[str]]:
    for i in range(0, len(lines), max(1, size)):
        yield lines[i : i + size]


def mark_replayed(path: Path) -> Path:
    """Move a fully replayed file into ``replayed/`` (so a second replay skips it)."""
    done_dir = path.parent / REPLAYED_DIRNAME
    done_dir.mkdir(exist_ok=True)
    dest = done_dir / path.name
    os.replace(path, dest)
    return dest


def read_target(spool_dir: Path) -> dict[str, Any] | None:
    path = Path(spool_dir) / TARGET_FILE
    if not path.is_file():
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    return data if isinstance(data, dict) else None
