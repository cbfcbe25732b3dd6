"""Read a results directory (schema ``llmload.summary/1``, see docs/results.md) for the reports.

Everything the report layer knows about a run comes through :func:`load_run`. Bad input
(a missing directory or summary.json, a line that is not JSON) raises :class:`BadResults`
with one line that names the file and, where it helps, the line number.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

SCHEMA = "llmload.summary/1"


class BadResults(Exception):
    """A results directory that cannot be read; the message is one line for the user."""


@dataclass
class RunData:
    """One results directory, loaded."""

    path: Path
    summary: dict[str, Any]
    requests: list[dict[str, Any]] = field(default_factory=list)
    timeseries: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    telemetry: list[dict[str, Any]] = field(default_factory=list)

    @property
    def run(self) -> dict[str, Any]:
        return self.summary.get("run") or {}

    @property
    def targets(self) -> dict[str, dict[str, Any]]:
        return self.summary.get("targets") or {}

    @property
    def run_id(self) -> str:
        return str(self.run.get("run_id") or self.path.name)

    @property
    def status(self) -> str:
        return str(self.run.get("status") or "ok")

    @property
    def levels(self) -> list[dict[str, Any]]:
        return self.summary.get("levels") or []

    @property
    def window(self) -> tuple[float | None, float | None]:
        return _num(self.run.get("measure_start")), _num(self.run.get("measure_end"))

    def in_window(self, rec: dict[str, Any]) -> bool:
        """True when a request (or timeseries line, by ``t``) falls inside the measurement window."""
        start, end = self.window
        t = rec.get("start_time", rec.get("t"))
        if t is None or start is None:
            return True
        return bool(start <= t <= (end if end is not None else float("inf")))

    def target_requests(
        self, target: str, *, ok_only: bool = True, window: bool = True
    ) -> list[dict[str, Any]]:
        return [
            r
            for r in self.requests
            if r.get("target") == target
            and (not ok_only or r.get("status") == "ok")
            and (not window or self.in_window(r))
        ]

    def output_tok_s(self, target: str) -> float | None:
        """The run's own throughput figure (llmload/throughput.py), as summary.json holds it."""
        tp = (self.targets.get(target) or {}).get("throughput") or {}
        return _num(tp.get("output_tok_s"))

    def window_s(self, target: str) -> float | None:
        tp = (self.targets.get(target) or {}).get("throughput") or {}
        w = _num(tp.get("window_s"))
        if w:
            return w
        start, end = self.window
        if start is not None and end is not None and end > start:
            return end - start
        return None


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """One JSON object per line; blank lines skipped; a bad line raises BadResults naming file:line."""
    out: list[dict[str, Any]] = []
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
        out.append(obj)
    return out


def load_summary(results_dir: Path) -> dict[str, Any]:
    results_dir = Path(results_dir)
    if not results_dir.is_dir():
        raise BadResults(f"{results_dir}: no such results directory")
    path = results_dir / "summary.json"
    if not path.is_file():
        raise BadResults(f"{path}: missing (is {results_dir} an llmload results directory?)")
    try:
        summary = orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError as exc:
        raise BadResults(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(summary, dict):
        raise BadResults(f"{path}: expected a JSON object")
    schema = summary.get("schema", SCHEMA)
    if not isinstance(schema, str) or not schema.startswith("llmload.summary/"):
        raise BadResults(f"{path}: field 'schema' is {schema!r}, expected {SCHEMA!r}")
    if schema != SCHEMA:
        raise BadResults(f"{path}: schema {schema!r} is not supported by this version (expected {SCHEMA!r})")
    targets = summary.get("targets")
    if not isinstance(targets, dict):
        raise BadResults(f"{path}: field 'targets' is missing or not an object")
    for name, block in targets.items():
        if not isinstance(block, dict):
            raise BadResults(f"{path}: field 'targets.{name}' is not an object")
    if not isinstance(summary.get("run", {}), dict):
        raise BadResults(f"{path}: field 'run' is not an object")
    levels = summary.get("levels", [])
    if levels is not None and not isinstance(levels, list):
        raise BadResults(f"{path}: field 'levels' is not a list")
    return summary


def load_run(results_dir: Path | str, *, with_requests: bool = True) -> RunData:
    """Load summary.json and the optional JSONL files of one results directory."""
    results_dir = Path(results_dir)
    summary = load_summary(results_dir)
    run = RunData(path=results_dir, summary=summary)
    for attr, name in (
        ("requests", "requests.jsonl"),
        ("timeseries", "timeseries.jsonl"),
        ("events", "events.jsonl"),
        ("telemetry", "telemetry.jsonl"),
    ):
        if attr == "requests" and not with_requests:
            continue
        p = results_dir / name
        if p.is_file():
            setattr(run, attr, read_jsonl(p))
    return run
