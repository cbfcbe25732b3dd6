"""``llmload influx ...``: write spooled points to InfluxDB later.

    llmload influx replay DIR [--influx URL ...]

DIR is a results directory (its ``influx-spool/`` is used) or a spool directory. Without
``--influx`` the destination recorded in the spool's ``target.json`` is used (URL, API,
database/org/bucket; secrets still come from the environment). Each spool file is claimed
before it is posted and moved to ``replayed/`` once all of its lines were accepted, so
replaying twice, or while a run's sink catches up on the same spool, posts nothing twice
(llmload/sinks/spool.py says why).

Exit codes: 0 every file replayed (or nothing to replay), 1 some files still fail (they stay
in place for the next try), 2 bad input (no such directory, invalid options).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import TextIO

from pydantic import ValidationError

from llmload.base.usage import ArgParser
from llmload.config.influx_config import InfluxConfig, add_influx_arguments, influx_config_from_args
from llmload.schema.results_model import Summary
from llmload.sinks.influx_write import InfluxWriter, WriteError
from llmload.sinks.spool import (
    claim,
    count_lines,
    mark_replayed,
    pending_files,
    read_body,
    read_target,
    release,
    release_stale,
    resolve_spool_dir,
)

EXIT_OK, EXIT_REMAINING, EXIT_BAD_INPUT = 0, 1, 2


def _parser() -> argparse.ArgumentParser:
    parser = ArgParser(prog="llmload influx", description="InfluxDB utilities")
    sub = parser.add_subparsers(dest="command", required=True)
    replay = sub.add_parser("replay", help="write spooled points (results dir or influx-spool dir)")
    replay.add_argument("directory", type=Path, help="results directory or its influx-spool/ directory")
    add_influx_arguments(replay)
    return parser


class _BadInput(Exception):
    pass


def _error_line(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first.get("loc", ())) or "influx"
    return f"{where}: {first.get('msg', 'invalid')}"


def _config_for(ns: argparse.Namespace, spool_dir: Path) -> InfluxConfig:
    base = None
    path = spool_dir / "target.json"
    try:
        target = read_target(spool_dir)
    except (OSError, ValueError) as exc:
        raise _BadInput(f"{path}: unreadable ({exc})") from None
    if target is None and path.is_file():
        raise _BadInput(f"{path}: expected a JSON object (the destination the run recorded)")
    try:
        if target and target.get("url"):
            base = InfluxConfig.model_validate({k: v for k, v in target.items() if v is not None})
    except ValidationError as exc:
        raise _BadInput(f"{path}: {_error_line(exc)}") from None
    try:
        config = influx_config_from_args(ns, base)
    except ValidationError as exc:
        raise _BadInput(f"influx options: {_error_line(exc)}") from None
    if config is None:
        raise _BadInput(f"{spool_dir}: no target.json; give the destination with --influx URL")
    return config


def replay(spool_dir: Path, config: InfluxConfig, out: TextIO | None = None) -> int:
    """Replay every pending file, each claimed first (llmload/sinks/spool.py); returns the exit code.

    A file that another sender holds (a run's own catch-up) is skipped: that sender posts it.
    A file is posted as one body, so a failure never leaves half of it written.
    """
    out = sys.stdout if out is None else out
    writer = InfluxWriter(config)
    written_points = written_files = 0
    failed_points = failed_files = busy_files = 0
    last_error = ""
    start = time.monotonic()
    try:
        for path in pending_files(spool_dir):
            claimed = claim(path)
            if claimed is None:
                busy_files += 1
                continue
            body = read_body(claimed)
            try:
                writer.write(body)
            except WriteError as exc:
                release(claimed)
                failed_points += count_lines(body)
                failed_files += 1
                last_error = str(exc)
                continue
            mark_replayed(claimed)
            written_points += count_lines(body)
            written_files += 1
    finally:
        writer.close()
    busy = f"; {busy_files} files were being sent by another process" if busy_files else ""
    print(
        f"replayed {written_points} points from {written_files} files to {writer.where} "
        f"in {time.monotonic() - start:.1f} s; remaining {failed_points} points in {failed_files} files{busy}",
        file=out,
    )
    _record_in_summary(spool_dir, written_points, failed_points)
    if failed_files:
        print(f"last error: {last_error}", file=out)
        return EXIT_REMAINING
    return EXIT_OK


def _record_in_summary(spool_dir: Path, replayed: int, remaining: int) -> None:
    """Add the replay to the run's summary.json (run.influx.replayed / .remaining), when there is one."""
    summary_path = spool_dir.parent / "summary.json"
    if replayed == 0 and remaining == 0 or not summary_path.is_file():
        return
    try:
        summary = Summary.model_validate_json(summary_path.read_bytes())
        influx = dict(summary.run.influx or {})
        influx["replayed"] = int(influx.get("replayed", 0)) + replayed
        influx["remaining"] = remaining
        summary.run.influx = influx
        tmp = summary_path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(summary.dump(), indent=2) + "\n", encoding="utf-8")
        tmp.replace(summary_path)
    except (OSError, ValueError) as exc:  # pydantic's ValidationError is a ValueError
        why = _error_line(exc) if isinstance(exc, ValidationError) else str(exc)
        print(f"llmload influx replay: could not update {summary_path}: {why}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    try:
        ns = parser.parse_args(argv)
    except SystemExit as exc:  # argparse already printed one usage line
        return EXIT_OK if exc.code == 0 else EXIT_BAD_INPUT
    try:
        if not ns.directory.is_dir():
            raise _BadInput(
                f"{ns.directory}: {'not a directory' if ns.directory.exists() else 'no such directory'}"
            )
        spool_dir = resolve_spool_dir(ns.directory)
        release_stale(spool_dir)  # a sender that died mid-send left its claim
        if not pending_files(spool_dir):
            print(
                f"replayed 0 points from 0 files; remaining 0 points in 0 files ({spool_dir}: nothing to replay)"
            )
            return EXIT_OK
        config = _config_for(ns, spool_dir)
    except _BadInput as exc:
        print(f"llmload influx replay: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return replay(spool_dir, config)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
