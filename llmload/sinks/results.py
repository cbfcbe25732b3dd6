"""The results directory: summary.json, requests.jsonl, timeseries.jsonl, events.jsonl.

Lines are appended as they arrive and flushed at every interval, so a run that
dies still leaves every request it measured on disk. Schema: docs/results.md.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

from llmload.config.yamlsrc import InputError
from llmload.schema.results_model import Summary, TelemetryRow

RESERVE_BYTES = 8 * 2**20  # held from the start, freed when the disk fills: summary.json and the reports
LINE_FILES = ("requests.jsonl", "timeseries.jsonl", "events.jsonl")  # telemetry.jsonl: the scraper's
RESERVE = ".llmload-reserve"
FLUSH_AT = 1 << 16  # a file's pending bytes written at once past this (else at every interval)


class _Lines:
    """One append-only JSON-lines file. Its lines wait here until ``flush`` writes them with
    ``os.write``, which says how much it wrote: a write cut by a full disk leaves exactly the unwritten
    bytes pending, so no line is ever half on disk once the reserve lets the rest through."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        self.pending = bytearray()
        self.lines = 0  # lines on disk

    def flush(self) -> None:
        while self.pending:
            n = os.write(self.fd, self.pending)
            self.lines += self.pending.count(b"\n", 0, n)
            del self.pending[:n]

    def close(self) -> None:
        os.close(self.fd)


class ResultsWriter:
    """The run's files. When the disk fills (or a write fails otherwise) the first time, ``full``
    says why, the reserve is freed so that the lines already measured and then summary.json and
    the reports fit, and lines that come after are counted in ``dropped``, not written: the run
    stops (llmload/locust/intervals.py) and its verdict says what the directory holds."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self._files: dict[str, _Lines] = {}
        for name in LINE_FILES:
            self._files[name] = _Lines(self.dir / name)
        self.full: str | None = None
        self.dropped: dict[str, int] = {}  # lines measured after ``full``, per file
        self._reserve: Path | None = self.dir / RESERVE
        try:
            fd = os.open(self._reserve, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                os.posix_fallocate(fd, 0, RESERVE_BYTES)
            finally:
                os.close(fd)
        except OSError:  # no room even for it (check_results_dir asked for more): nothing held back
            self._free_reserve()

    def lines(self, name: str) -> int:
        """Lines of ``name`` on disk so far (0 once closed)."""
        f = self._files.get(name)
        return f.lines if f else 0

    def held_back(self) -> str | None:
        """What the directory lacks since the disk filled, for the verdict; None while all is written."""
        if self.full is None:
            return None
        n = self.dropped.get("requests.jsonl", 0)
        lines = f"requests.jsonl holds {self.lines('requests.jsonl')} request lines"
        were = "1 more request was" if n == 1 else f"{n} more requests were"
        more = f"; {were} measured after it, in summary.json's figures only" if n else ""
        return f"the results disk failed ({self.full}): the run stopped; {lines}{more}"

    def requests(self, lines: list[dict[str, Any]]) -> None:
        self._put("requests.jsonl", b"".join(orjson.dumps(x) + b"\n" for x in lines), len(lines))

    def timeseries(self, row: dict[str, Any]) -> None:
        self._put("timeseries.jsonl", orjson.dumps(row) + b"\n", 1)

    def event(self, kind: str, text: str, t: float | None = None, **extra: Any) -> None:
        row = {"t": t if t is not None else time.time(), "kind": kind, "text": text, **extra}
        self._put("events.jsonl", orjson.dumps(row) + b"\n", 1)
        self.flush()

    def _put(self, name: str, data: bytes, lines: int) -> None:
        f = self._files.get(name)
        if f is None:  # closed: the run's files are complete
            return
        if self.full is not None:
            self.dropped[name] = self.dropped.get(name, 0) + lines
            return
        f.pending += data
        if len(f.pending) > FLUSH_AT:
            self.flush()

    def flush(self) -> None:
        for f in self._files.values():
            try:
                f.flush()
            except OSError as e:
                self._failed(f, e)

    def _failed(self, f: _Lines, e: OSError) -> None:
        """The first failed write: say why, free the reserve, and write what is pending in every file."""
        if self.full is None:
            self.full = f"{e.strerror or e} writing {f.path.name}"
            self._free_reserve()
            self.flush()
            return
        lost = f.pending.count(b"\n")  # the reserve is spent too: these lines are not on disk
        self.dropped[f.path.name] = self.dropped.get(f.path.name, 0) + lost
        f.pending.clear()

    def _free_reserve(self) -> None:
        if self._reserve is not None:
            self._reserve.unlink(missing_ok=True)
            self._reserve = None

    def summary(self, data: Summary) -> Path:
        return self.write_json("summary.json", data.dump())

    def write_json(self, name: str, data: dict[str, Any]) -> Path:
        """Write a whole JSON file atomically (a reader never sees half of it)."""
        path = self.dir / name
        tmp = path.with_suffix(".json.tmp")
        text = json.dumps(data, indent=2, default=str) + "\n"
        try:
            tmp.write_text(text, encoding="utf-8")
        except OSError:  # the disk filled first here: the reserve makes room for the run's verdict
            if self._reserve is None:
                raise
            self._free_reserve()
            tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
        return path

    def close(self) -> None:
        self.flush()
        files, self._files = self._files, {}  # nothing is written after this
        for f in files.values():
            f.close()
        self._free_reserve()


def read_telemetry(path: Path) -> list[TelemetryRow]:
    """telemetry.jsonl's rows (the scraper has stopped; a torn last line is skipped)."""
    rows: list[TelemetryRow] = []
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                try:
                    rows.append(TelemetryRow.model_validate_json(line))
                except ValueError:  # pydantic's ValidationError is one
                    continue
    except OSError:
        return []
    return rows


class TelemetryTail:
    """The latest value of each engine metric per target, read from telemetry.jsonl as it grows.

    The scraper child appends to the file (llmload/hosts/scrape.py); each ``read()`` takes only the
    complete lines added since the last one, so the live charts show the engine's own gauges
    (KV-cache usage) without a second scrape of its /metrics.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self.latest: dict[tuple[str, str], float] = {}  # (target, metric) -> value

    def read(self) -> None:
        try:
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                data = f.read()
        except OSError:
            return
        end = data.rfind(b"\n") + 1  # a line still being written is read next time
        self._offset += end
        for line in data[:end].splitlines():
            try:
                row = TelemetryRow.model_validate_json(line)
            except ValueError:
                continue
            if row.source == "engine":
                self.latest[(row.target, row.metric)] = row.value


MIN_FREE_BYTES = 16 * 2**20  # the least free space a run starts with (a short run's results: 1-5 MiB)


def check_results_dir(path: str) -> None:
    """--results must be a directory that exists or can be created, on a disk with room (nothing is
    left behind here: a probe file is made and removed in the nearest existing parent)."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise InputError(f"--results {path}: exists and is not a directory")
    if p.is_dir() and any(p.iterdir()):  # one run per directory: never mixed with, or read as, another
        raise InputError(f"--results {path}: not empty (a results directory holds one run); give a new one")
    parent = p
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise InputError(f"--results {path}: {parent} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(f"--results {path}: cannot create it: {parent} is not writable")
    try:  # root passes os.access everywhere (/proc, a read-only mount): a file there says for sure
        fd, probe = tempfile.mkstemp(dir=parent, prefix=".llmload-probe-")
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise InputError(f"--results {path}: cannot write in {parent}: {e.strerror}") from None
    st = os.statvfs(parent)
    if st.f_bavail * st.f_frsize < MIN_FREE_BYTES:
        free = st.f_bavail * st.f_frsize / 2**20
        raise InputError(
            f"--results {path}: {free:.1f} MiB free on its disk, less than the "
            f"{MIN_FREE_BYTES // 2**20} MiB a run's results need at least"
        )
