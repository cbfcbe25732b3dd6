"""The local spool: line-protocol files for batches InfluxDB did not accept, and who re-sends them.

Layout of ``<results dir>/influx-spool/``::

    target.json                       where the points were meant to go (url, api, database,
                                      org, bucket; never a token or password)
    <run_id>-<worker>-<pid>-<n>.lp    one failed batch each, newline-terminated line protocol
    <...>.lp.sending-<pid>            a batch that process <pid> is re-sending right now
    replayed/                         files moved here once every line of them was accepted

A file is written under a temporary name and renamed, so a crash never leaves a half
batch with the ``.lp`` suffix.

Two senders can want the same file: the sink's own catch-up (llmload/sinks/influx.py) and
``llmload influx replay``, run by hand during or after the run. Neither posts a file before
it has *claimed* it: ``os.rename(x.lp, x.lp.sending-<pid>)``. A rename of one source name is
atomic, so of several processes (or greenlets) that try, exactly one succeeds and the others
get ENOENT and skip the file. The claimer posts the whole file as one body, then moves it to
``replayed/`` (sent) or renames it back to ``x.lp`` (failed: pending again). A file in
``replayed/`` is never posted again. So no line is posted twice by llmload, except when the
server stored a body and its answer was lost (a timeout, a crash between the write and the
move): the next sender posts that body again. InfluxDB keeps one point per series and
timestamp, so that re-post overwrites identical points and the stored data is unchanged;
a store that keeps duplicates (VictoriaMetrics) would hold them twice. A claim left by a
process that died is released by the next replay (:func:`release_stale`).
"""

from __future__ import annotations

import collections
import json
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SPOOL_DIRNAME = "influx-spool"
REPLAYED_DIRNAME = "replayed"
TARGET_FILE = "target.json"
SUFFIX = ".lp"
CLAIMED = ".sending-"  # x.lp -> x.lp.sending-<pid> while one process re-sends it
READ_PIECE = 64 * 1024  # a spool file is read in pieces, pausing between them (the event loop)

_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")


@dataclass(frozen=True)
class Claim:
    """One spool file taken for sending: ``path`` is its pending name, ``claimed`` its name now."""

    path: Path
    claimed: Path
    points: int


class Spool:
    """Appends failed batches as files, oldest first; hands them back for the catch-up."""

    def __init__(self, directory: Path, *, prefix: str) -> None:
        self.directory = Path(directory)
        self.prefix = _SAFE.sub("_", prefix)[:80] or "spool"
        self.points = 0  # every point spooled, re-sent or not
        self.files = 0
        self.resent = 0  # points this process re-sent from its own files (the catch-up)
        self._seq = 0
        self._pid = os.getpid()
        self._waiting: collections.deque[tuple[Path, int]] = collections.deque()  # oldest first
        self._sizes: dict[str, int] = {}  # points per own file name

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
        self._waiting.append((path, len(lines)))
        self._sizes[name] = len(lines)
        return path

    @property
    def waiting(self) -> int:
        """Own files not yet re-sent (nor taken by a replay, as far as this process knows)."""
        return len(self._waiting)

    def claim_next(self) -> Claim | None:
        """Claim the oldest own file still pending; files a replay claimed first are skipped."""
        while self._waiting:
            path, points = self._waiting[0]
            claimed = claim(path)
            if claimed is not None:
                return Claim(path, claimed, points)
            self._waiting.popleft()  # another process took it (llmload influx replay)
        return None

    def sent(self, c: Claim) -> None:
        """Every line of ``c`` was accepted: move it to ``replayed/`` and count it re-sent."""
        self._forget(c)
        try:
            mark_replayed(c.claimed)
        except FileNotFoundError:  # close() gave the claim back meanwhile: the file stays pending
            return
        self.resent += c.points

    def failed(self, c: Claim, *, retry: bool) -> None:
        """Give ``c`` back (pending again); ``retry=False`` leaves it for a replay, not the catch-up."""
        if not retry:
            self._forget(c)
        try:
            release(c.claimed)
        except FileNotFoundError:
            pass

    def _forget(self, c: Claim) -> None:
        if self._waiting and self._waiting[0][0] == c.path:
            self._waiting.popleft()

    def remaining(self) -> int:
        """Points of own files still in the spool (pending, or being sent by some process)."""
        if not self._sizes or not self.directory.is_dir():
            return 0
        names = {p.name.split(CLAIMED)[0] for p in self.directory.iterdir()}
        return sum(n for name, n in self._sizes.items() if name in names)


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def claim(path: Path) -> Path | None:
    """Take a pending file for sending (see the module doc); None when another sender has it."""
    claimed = path.with_name(f"{path.name}{CLAIMED}{os.getpid()}")
    try:
        os.rename(path, claimed)
    except FileNotFoundError:
        return None
    return claimed


def release(claimed: Path) -> Path:
    """A claimed file back to pending (its ``.lp`` name)."""
    path = claimed.with_name(claimed.name.split(CLAIMED)[0])
    os.rename(claimed, path)
    return path


def release_stale(spool_dir: Path) -> int:
    """Release the claims of processes that no longer run (a crash mid-send); returns how many."""
    released = 0
    for claimed in Path(spool_dir).glob(f"*{SUFFIX}{CLAIMED}*"):
        pid = claimed.name.rsplit(CLAIMED, 1)[1]
        if pid.isdigit() and not _alive(int(pid)):
            try:
                release(claimed)
                released += 1
            except FileNotFoundError:
                pass
    return released


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def read_body(path: Path, pause_s: float = 0.0) -> bytes:
    """A spool file's bytes, read ``READ_PIECE`` at a time with ``pause_s`` between reads, so a
    large file never holds an event loop in one read (the writer's slices, llmload/sinks/influx.py)."""
    parts = []
    with open(path, "rb") as fh:
        while piece := fh.read(READ_PIECE):
            parts.append(piece)
            time.sleep(pause_s)
    return b"".join(parts)


def resolve_spool_dir(path: Path) -> Path:
    """A results directory or the spool directory itself -> the spool directory."""
    path = Path(path)
    if (path / SPOOL_DIRNAME).is_dir():
        return path / SPOOL_DIRNAME
    return path


def pending_files(spool_dir: Path) -> list[Path]:
    """Spool files not yet replayed nor claimed, oldest name first."""
    return sorted(p for p in Path(spool_dir).glob("*" + SUFFIX) if p.is_file())


def count_lines(body: bytes) -> int:
    return sum(1 for line in body.split(b"\n") if line.strip())


def mark_replayed(claimed: Path) -> Path:
    """Move a fully sent (claimed) file into ``replayed/`` under its ``.lp`` name."""
    done_dir = claimed.parent / REPLAYED_DIRNAME
    done_dir.mkdir(exist_ok=True)
    dest = done_dir / claimed.name.split(CLAIMED)[0]
    os.replace(claimed, dest)
    return dest


def read_target(spool_dir: Path) -> dict[str, Any] | None:
    path = Path(spool_dir) / TARGET_FILE
    if not path.is_file():
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    return data if isinstance(data, dict) else None
