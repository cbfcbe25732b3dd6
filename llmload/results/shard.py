"""One shard's results directory, read for ``llmload merge`` (llmload/results/merge.py): each file
checked where it is read (its shape, each line of the line files), so that a damaged shard is bad
input naming its file and line, found before the merged directory is made."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from pydantic import ValidationError

from llmload.config.yamlsrc import InputError
from llmload.report.results import BadResults, jsonl_lines, load_run_lines, load_summary
from llmload.schema.results_lines import LenientModel, RequestLine
from llmload.schema.results_model import Summary

AGGREGATE = "aggregate.json"
FORMAT = "llmload.results.aggregate/1"
LINE_FILES = ("requests.jsonl", "timeseries.jsonl", "events.jsonl", "telemetry.jsonl")


class _Saved(LenientModel):
    """aggregate.json, as ``aggregate_data`` wrote it (its ``aggregate`` is ``Aggregator.saved()``)."""

    aggregate: dict[str, Any]
    outcome: dict[str, Any]
    cpu_samples: list[float]
    allow_worker_loss: bool = False


@dataclass(frozen=True)
class ShardDir:
    """A shard's results directory, its files read and checked (``read_shard``)."""

    dir: Path
    summary: Summary
    saved: _Saved
    requests: list[RequestLine]  # requests.jsonl's lines, each checked against its schema
    lines: dict[str, list[tuple[float, bytes]]]  # each line file's lines: (t, the line), in file order

    @property
    def scenario(self) -> dict[str, Any]:
        return dict(self.summary.run.scenario)

    @property
    def targets(self) -> list[str]:
        return [str(t["name"]) for t in self.scenario["targets"]]


def read_shard(d: Path) -> ShardDir:
    """A shard's files, each checked where it is read: bad input names the file (and line)."""
    for name in ("summary.json", AGGREGATE):
        if not (d / name).is_file():
            why = (
                " (a run killed before its end cannot be merged: its ITL histograms are gone)"
                if name == AGGREGATE
                else ""
            )
            raise InputError(f"{d / name}: missing{why}")
    try:
        summary = load_summary(d)
    except BadResults as e:
        raise InputError(str(e)) from None
    except OSError as e:  # load_summary's read
        raise InputError(f"{d / 'summary.json'}: cannot read ({e.strerror or e})") from None
    targets = summary.run.scenario.get("targets")
    if not isinstance(targets, list) or not all(
        isinstance(t, dict) and isinstance(t.get("name"), str) for t in targets
    ):
        raise InputError(
            f"{d / 'summary.json'}: field 'run.scenario.targets': expected a list of named targets"
        )
    saved = _saved(d / AGGREGATE)
    lines = {name: _line_file(d / name) for name in LINE_FILES}  # each line a JSON object, with its t
    try:
        requests = load_run_lines(d / "requests.jsonl")  # and each request line its fields
    except BadResults as e:
        raise InputError(str(e)) from None
    return ShardDir(d, summary, saved, requests, lines)


def _saved(path: Path) -> _Saved:
    try:
        data = orjson.loads(path.read_bytes())
    except OSError as e:
        raise InputError(f"{path}: cannot read ({e.strerror or e})") from None
    except orjson.JSONDecodeError as e:  # an empty, truncated or non-UTF-8 file too
        raise InputError(f"{path}: not valid JSON ({e})") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a JSON object")
    if data.get("schema") != FORMAT:
        raise InputError(f"{path}: schema {data.get('schema')!r}, expected {FORMAT!r}")
    try:
        return _Saved.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        raise InputError(f"{path}: field '{'.'.join(str(x) for x in err['loc'])}': {err['msg']}") from None


def _line_file(path: Path) -> list[tuple[float, bytes]]:
    """A JSON-lines file's lines with their times ``t``, in file order (none when it is absent)."""
    if not path.is_file():
        return []
    try:
        rows = jsonl_lines(path)
    except BadResults as e:
        raise InputError(str(e)) from None
    out: list[tuple[float, bytes]] = []
    for no, line, obj in rows:
        t = obj.get("t", 0.0)
        if not isinstance(t, (int, float)) or isinstance(t, bool):
            raise InputError(f"{path}:{no}: expected a numeric 't'")
        out.append((float(t), line))
    return out
