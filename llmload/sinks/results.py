"""The results directory: summary.json, requests.jsonl, timeseries.jsonl, events.jsonl.

Lines are appended as they arrive and flushed at every interval, so a run that
dies still leaves every request it measured on disk. Schema: docs/results.md.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, TextIO

import orjson

from llmload.schema.results_model import Summary, TelemetryRow


class ResultsWriter:
    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self._requests: TextIO = open(self.dir / "requests.jsonl", "w", encoding="utf-8")  # noqa: SIM115
        self._timeseries: TextIO = open(self.dir / "timeseries.jsonl", "w", encoding="utf-8")  # noqa: SIM115
        self._events: TextIO = open(self.dir / "events.jsonl", "w", encoding="utf-8")  # noqa: SIM115
        self._telemetry: TextIO | None = None
        self.request_lines = 0

    def requests(self, lines: list[dict[str, Any]]) -> None:
        self._requests.write("".join(orjson.dumps(x).decode() + "\n" for x in lines))
        self.request_lines += len(lines)

    def timeseries(self, row: dict[str, Any]) -> None:
        self._timeseries.write(orjson.dumps(row).decode() + "\n")

    def telemetry(self, rows: list[dict[str, Any]]) -> None:
        if self._telemetry is None:
            self._telemetry = open(self.dir / "telemetry.jsonl", "w", encoding="utf-8")  # noqa: SIM115
        self._telemetry.write("".join(orjson.dumps(x).decode() + "\n" for x in rows))

    def event(self, kind: str, text: str, t: float | None = None, **extra: Any) -> None:
        row = {"t": t if t is not None else time.time(), "kind": kind, "text": text, **extra}
        self._events.write(orjson.dumps(row).decode() + "\n")
        self._events.flush()

    def flush(self) -> None:
        for f in (self._requests, self._timeseries, self._events, self._telemetry):
            if f is not None:
                f.flush()

    def summary(self, data: Summary) -> Path:
        return self.write_json("summary.json", data.dump())

    def write_json(self, name: str, data: dict[str, Any]) -> Path:
        """Write a whole JSON file atomically (a reader never sees half of it)."""
        path = self.dir / name
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(data, indent=2, default=str) + "\n", encoding="utf-8")
        tmp.replace(path)
        return path

    def close(self) -> None:
        for f in (self._requests, self._timeseries, self._events, self._telemetry):
            if f is not None:
                f.close()


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
