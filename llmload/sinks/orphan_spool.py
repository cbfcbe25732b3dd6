"""The records of a worker whose master went away: spooled by the worker, folded in by ``llmload report``.

    path = spool_path(results_dir, run_id, worker)     # where an orphaned worker writes (orphan.py)
    write_spool(path, lines)                            # requests.jsonl lines, one JSON object a line
    lines, added = fold_in(results_dir, lines, read)    # llmload report: each request once

A worker that lost its master (llmload/locust/orphan.py) writes the lines it never reported, and
those of its last reports, to ``RESULTS/orphans/WORKER.jsonl`` when the master's results directory
is on its host (its run.json names the same run), else to ``llmload-spool/RUN_ID/WORKER/requests.jsonl``
under its working directory (copy that file into ``RESULTS/orphans/`` to fold it in). A line the
master had already written is in both places: a request is one (worker, target, index).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

import orjson

ORPHANS = "orphans"
LOCAL_SPOOL = Path("llmload-spool")


class KeyedLine(Protocol):
    @property
    def worker(self) -> str: ...
    @property
    def target(self) -> str: ...
    @property
    def index(self) -> int: ...


L = TypeVar("L", bound=KeyedLine)


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", name) or "worker"


def _same_run(results_dir: Path, run_id: str) -> bool:
    try:
        info = json.loads((results_dir / "run.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(info, dict) and str(info.get("run_id")) == run_id


def spool_path(results_dir: Path | None, run_id: str, worker: str) -> Path:
    """The master's results directory when it is here and holds this run, else a local spool."""
    if results_dir is not None and run_id and _same_run(results_dir, run_id):
        return results_dir / ORPHANS / f"{_safe(worker)}.jsonl"
    return LOCAL_SPOOL / _safe(run_id or "run") / _safe(worker) / "requests.jsonl"


def write_spool(path: Path, lines: Sequence[dict[str, Any]]) -> None:
    """Append the lines, flushed when this returns (the worker exits right after)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "ab") as f:
        f.write(b"".join(orjson.dumps(x) + b"\n" for x in lines))
        f.flush()


def fold_in(results_dir: Path, lines: list[L], read: Callable[[Path], list[L]]) -> tuple[list[L], int]:
    """requests.jsonl's lines plus every spooled line of a request they do not hold; and how many."""
    seen = {(x.worker, x.target, x.index) for x in lines}
    out = list(lines)
    for path in sorted((results_dir / ORPHANS).glob("*.jsonl")):
        for x in read(path):
            key = (x.worker, x.target, x.index)
            if key not in seen:
                seen.add(key)
                out.append(x)
    return out, len(out) - len(lines)
