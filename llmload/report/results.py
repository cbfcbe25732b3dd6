"""Read a results directory (schema ``llmload.results.summary/1``, see docs/results.md) for the reports.

Everything the report layer knows about a run comes through :func:`load_run`: summary.json as a
:class:`~llmload.schema.results_model.Summary`, the JSONL files as rows. Bad input (a missing directory
or summary.json, a line that is not JSON, a field that does not fit the model) raises
:class:`BadResults` with one line that names the file and the line number or the field path.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import orjson
from pydantic import ValidationError

from llmload.schema.results_model import (
    SUMMARY_SCHEMA,
    Level,
    RequestLine,
    RunBlock,
    Summary,
    TargetBlock,
    TelemetryRow,
    TimeseriesRow,
)

SCHEMA = SUMMARY_SCHEMA
_Row = TypeVar("_Row", RequestLine, TimeseriesRow, TelemetryRow)


class BadResults(Exception):
    """A results directory that cannot be read; the message is one line for the user."""


@dataclass
class RunData:
    """One results directory, loaded."""

    path: Path
    summary: Summary
    requests: list[RequestLine] = field(default_factory=list)
    timeseries: list[TimeseriesRow] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)  # kinds own their fields (docs/results.md)
    telemetry: list[TelemetryRow] = field(default_factory=list)

    @property
    def run(self) -> RunBlock:
        return self.summary.run

    @property
    def targets(self) -> dict[str, TargetBlock]:
        return self.summary.targets

    @property
    def run_id(self) -> str:
        return self.run.run_id

    @property
    def status(self) -> str:
        return self.run.status

    @property
    def levels(self) -> list[Level]:
        return self.summary.levels

    @property
    def window(self) -> tuple[float | None, float | None]:
        return self.run.measure_start, self.run.measure_end

    def in_window(self, t: float | None) -> bool:
        """True when a time (a request's start, a timeseries row's or a sample's ``t``) falls inside
        the measurement window."""
        start, end = self.window
        if t is None or start is None:
            return True
        return bool(start <= t <= (end if end is not None else float("inf")))

    def target_requests(self, target: str, *, ok_only: bool = True, window: bool = True) -> list[RequestLine]:
        return [
            r
            for r in self.requests
            if r.target == target
            and (not ok_only or r.status == "ok")
            and (not window or self.in_window(r.start_time))
        ]

    def output_tok_s(self, target: str) -> float | None:
        """The run's own throughput figure (llmload/measure/throughput.py), as summary.json holds it."""
        block = self.targets.get(target)
        return None if block is None else block.throughput.output_tok_s

    def window_s(self, target: str) -> float | None:
        block = self.targets.get(target)
        if block is not None and block.throughput.window_s:
            return block.throughput.window_s
        start, end = self.window
        if start is not None and end is not None and end > start:
            return end - start
        return None


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """One JSON object per line; blank lines skipped; a bad line raises BadResults naming file:line."""
    return [obj for _, obj in read_jsonl_numbered(path)]


def read_jsonl_numbered(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """read_jsonl's objects with their line numbers."""
    return [(no, obj) for no, _line, obj in jsonl_lines(path)]


def jsonl_lines(path: Path) -> list[tuple[int, bytes, dict[str, Any]]]:
    """Each non-blank line of a JSON-lines file: its number, its bytes as written, its object; a
    line that is not a JSON object raises BadResults naming file:line."""
    out: list[tuple[int, bytes, dict[str, Any]]] = []
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise BadResults(f"{path}: cannot read ({exc.strerror or exc})") from None
    for no, line in enumerate(data.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise BadResults(f"{path}:{no}: not valid JSON ({exc})") from None
        if not isinstance(obj, dict):
            raise BadResults(f"{path}:{no}: expected a JSON object per line")
        out.append((no, line, obj))
    return out


def load_summary(results_dir: Path) -> Summary:
    results_dir = Path(results_dir)
    if not results_dir.is_dir():
        what = "a file, not a results directory" if results_dir.exists() else "no such results directory"
        raise BadResults(f"{results_dir}: {what}")
    path = results_dir / "summary.json"
    if path.exists() and not path.is_file():
        raise BadResults(f"{path}: not a file")
    if not path.is_file():
        raise BadResults(f"{path}: missing (is {results_dir} an llmload results directory?)")
    try:
        summary = orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError as exc:
        raise BadResults(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(summary, dict):
        raise BadResults(f"{path}: expected a JSON object")
    schema = summary.get("schema", SCHEMA)
    if not isinstance(schema, str) or not schema.startswith("llmload.results.summary/"):
        raise BadResults(f"{path}: field 'schema' is {schema!r}, expected {SCHEMA!r}")
    if schema != SCHEMA:
        raise BadResults(f"{path}: schema {schema!r} is not supported by this version (expected {SCHEMA!r})")
    try:
        # Validation costs about what parsing does: 108 ms beside orjson's 102 ms for a 9 MB
        # summary holding 1M histogram keys (2 shared cores), against the seconds a report takes.
        return Summary.model_validate(summary)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(x) for x in err["loc"])
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise BadResults(f"{path}: field '{where}': {err['msg']}{more}") from None


def load_run(results_dir: Path | str, *, with_requests: bool = True) -> RunData:
    """Load summary.json and the optional JSONL files of one results directory."""
    results_dir = Path(results_dir)
    summary = load_summary(results_dir)
    run = RunData(path=results_dir, summary=summary)
    if with_requests:
        run.requests = _rows(results_dir / "requests.jsonl", RequestLine)
    run.timeseries = _rows(results_dir / "timeseries.jsonl", TimeseriesRow)
    run.telemetry = _rows(results_dir / "telemetry.jsonl", TelemetryRow)
    if (results_dir / "events.jsonl").is_file():
        run.events = read_jsonl(results_dir / "events.jsonl")
    return run


def load_run_lines(path: Path) -> list[RequestLine]:
    """requests.jsonl's lines (BadResults names a line that does not fit)."""
    return _rows(path, RequestLine)


def _rows(path: Path, model: type[_Row]) -> list[_Row]:
    """A JSONL file's lines as ``model`` (docs/schemas/); none when the file is absent. A line that
    does not fit raises BadResults naming the file, the line and the field."""
    if not path.is_file():
        return []
    out: list[_Row] = []
    for no, obj in read_jsonl_numbered(path):
        try:
            out.append(model.model_validate(obj))
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(x) for x in err["loc"])
            raise BadResults(f"{path}:{no}: field '{where}': {err['msg']}") from None
    return out
