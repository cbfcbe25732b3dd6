"""Timestamped request traces, replayed open loop: when each request came, and how long it was.

Two public layouts are read as they are published:

- CSV like BurstGPT: a header row naming ``Timestamp`` (seconds) and the token counts
  (``Request tokens`` / ``Response tokens``; ``input_tokens`` / ``output_tokens`` and
  ``input_length`` / ``output_length`` also work). Other columns are ignored.
- JSONL like Mooncake: ``{"timestamp": ms, "input_length": n, "output_length": n, "hash_ids": [..]}``
  per line; ``timestamp`` is in milliseconds, as Mooncake's traces give it. ``hash_ids`` name the
  prompt's blocks (512 tokens each): requests that share leading ids share that prefix, so a replay
  exercises the prefix cache as the original traffic did.

``format: auto`` picks by the file's suffix (.csv, else JSONL). A time window (``start``,
``duration``, in trace seconds) keeps part of a trace; ``speedup`` divides every gap. Offsets are
from the first kept request. Bad input names the file and the line (exit 2).
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from pathlib import Path

from llmload.config.limits import MAX_TOKENS
from llmload.config.yamlsrc import InputError, jsonl_objects, paced, read_paced

BLOCK_TOKENS = 512  # Mooncake's hash_ids block size
_TIME = ("timestamp", "time", "arrival_time")
_INPUT = ("request tokens", "input_tokens", "input_length", "prompt_tokens")
_OUTPUT = ("response tokens", "output_tokens", "output_length", "completion_tokens")


@dataclass(frozen=True)
class TraceRow:
    offset_s: float  # from the first kept request, after speedup
    input_tokens: int
    output_tokens: int
    hash_ids: tuple[int, ...] = field(default=())


def load_trace(
    path: Path,
    fmt: str = "auto",
    *,
    speedup: float = 1.0,
    start_s: float = 0.0,
    duration_s: float | None = None,
    notes: list[str] | None = None,
) -> list[TraceRow]:
    """The trace's requests in time order, windowed and scaled. A trace out of time order is sorted,
    and ``notes`` gets a line that says so (the run says it once, on stderr and in events.jsonl)."""
    try:
        text = read_paced(path)
    except OSError as e:
        raise InputError(f"{path}: cannot read trace: {e.strerror}") from None
    csv_layout = fmt == "csv" or (fmt == "auto" and path.suffix.lower() == ".csv")
    raw = _csv_rows(text, path) if csv_layout else _jsonl_rows(text, path)
    if not raw:
        raise InputError(f"{path}: the trace holds no request")
    back = sum(1 for a, b in zip(raw, raw[1:], strict=False) if b[0] < a[0])
    if back and notes is not None:
        notes.append(
            f"{path}: not in time order ({back} of {len(raw)} requests earlier than the one before): sorted"
        )
    raw.sort(key=lambda r: r[0])
    t0 = raw[0][0] + start_s
    end = t0 + duration_s if duration_s is not None else float("inf")
    kept = [r for r in raw if t0 <= r[0] < end]
    if not kept:
        raise InputError(f"{path}: no request in the window start {start_s:g} s, duration {duration_s} s")
    first = kept[0][0]
    return [TraceRow((t - first) / speedup, n_in, n_out, ids) for t, n_in, n_out, ids in kept]


Raw = tuple[float, int, int, tuple[int, ...]]


def _jsonl_rows(text: str, path: Path) -> list[Raw]:
    out: list[Raw] = []
    for n, obj in jsonl_objects(text, path):
        if not isinstance(obj, dict):
            raise InputError(f"{path}:{n}: expected a JSON object per line")
        _, t = _pick(obj, _TIME, path, n, "timestamp")
        ids = obj.get("hash_ids") or []
        if not isinstance(ids, list) or not all(isinstance(i, int) for i in ids):
            raise InputError(f"{path}:{n}: hash_ids must be a list of integers")
        out.append(
            (
                _number(t, path, n, "timestamp") / 1000.0,
                _count(obj, _INPUT, path, n),
                _count(obj, _OUTPUT, path, n),
                tuple(ids),
            )
        )
    return out


def _csv_rows(text: str, path: Path) -> list[Raw]:
    reader = csv.DictReader(text.splitlines())
    if reader.fieldnames is None:
        raise InputError(f"{path}:1: a CSV trace needs a header row")
    out: list[Raw] = []
    for n, row in paced(enumerate(reader, 2)):
        obj = {k.strip().lower(): v for k, v in row.items() if k is not None}
        t = _number(_pick(obj, _TIME, path, n, "Timestamp")[1], path, n, "Timestamp")
        out.append((t, _count(obj, _INPUT, path, n), _count(obj, _OUTPUT, path, n), ()))
    return out


def _pick(
    obj: dict[str, object], names: tuple[str, ...], path: Path, n: int, what: str
) -> tuple[str, object]:
    for name in names:
        if obj.get(name) not in (None, ""):
            return name, obj[name]
    raise InputError(f"{path}:{n}: no {what} (one of {', '.join(names)})")


def _number(v: object, path: Path, n: int, what: str) -> float:
    """A finite number: ``Infinity`` raised OverflowError and ``NaN`` broke the sort (issue 30)."""
    try:
        if isinstance(v, bool):
            raise TypeError
        x = float(v)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise InputError(f"{path}:{n}: {what} must be a number, got {v!r}") from None
    if not math.isfinite(x):
        raise InputError(f"{path}:{n}: {what} must be a finite number, got {v!r}")
    return x


def _count(obj: dict[str, object], names: tuple[str, ...], path: Path, n: int) -> int:
    name, raw = _pick(obj, names, path, n, names[0])
    v = _number(raw, path, n, name)
    if v < 0 or v != int(v):
        raise InputError(f"{path}:{n}: {name} must be a whole number >= 0, got {v:g}")
    if v > MAX_TOKENS:
        raise InputError(f"{path}:{n}: {name} {v:g} is more than {MAX_TOKENS:,} tokens")
    return int(v)
