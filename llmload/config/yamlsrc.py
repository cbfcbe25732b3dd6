"""YAML with line numbers, and errors that name the file, line and field.

``load_yaml(path)`` returns the plain data plus a map from field path
(("targets", 0, "model")) to its 1-based line, so a validation error can point
at the line that holds the offending value. ``apply_overrides`` applies
``--set key=value`` edits (dotted paths; list items by index or by ``name``).
``jsonl_objects`` and ``json_array_items`` read the JSON input files (datasets, traces) with the same
kind of errors, letting the process's other greenlets run as they go (``paced``).
"""

from __future__ import annotations

import itertools
import json
import re
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import yaml

from llmload.config.limits import MAX_SCENARIO_BYTES
from llmload.config.yaml_ints import JSON_LONG_INT, long_int, long_int_in

Path_ = tuple[Any, ...]
T = TypeVar("T")
# A worker builds its run from the master's scenario inside Locust's message loop, and Locust's master
# counts a worker missing after 3 s without its heartbeat. Loading a 270 MB ShareGPT file held a worker's
# only thread 9.6 s: with no heartbeat, the master took its last worker for gone and ended the run before
# its start (2026-12-07). Pausing every PACE_ITEMS values, and between the pieces of the file's text,
# lets the heartbeats out.
PACE_ITEMS = 1000
# a sleep, not sleep(0): gevent runs a greenlet that slept 0 again before the timers that are due, and
# Locust's heartbeat waits on one (tests/test_load_models.py fails with sleep(0))
PAUSE_S = 0.001
READ_CHARS = 1 << 23  # 8 Mi characters: about 25 ms to read and decode here
_SPACE = re.compile(r"[ \t\n\r]*")


class InputError(Exception):
    """Bad user input: the message is one line naming the file, line and field. Exit code 2."""

    exit_code = 2


def _walk(node: yaml.Node, path: Path_, lines: dict[Path_, int], source: str) -> None:
    lines[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        seen: dict[Any, int] = {}
        for k, v in node.value:
            key = k.value if isinstance(k, yaml.ScalarNode) else str(k.value)
            line = k.start_mark.line + 1
            problem = long_int(k)
            if problem:
                raise InputError(f"{source}:{line}: {dotted((*path, key[:20] + '...'))}: {problem}")
            if key in seen:  # YAML would keep the last silently: one of them is a mistake
                raise InputError(
                    f"{source}:{line}: {dotted((*path, key))}: duplicate key (first at line {seen[key]})"
                )
            seen[key] = line
            lines[(*path, key)] = line
            _walk(v, (*path, key), lines, source)
            lines[(*path, key)] = line
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _walk(item, (*path, i), lines, source)
    else:
        problem = long_int(node)
        if problem:
            raise InputError(f"{source}:{lines[path]}: {dotted(path)}: {problem}")


def load_yaml(path: str | Path) -> tuple[Any, dict[Path_, int]]:
    p = Path(path)
    try:
        with p.open("rb") as f:
            raw = f.read(MAX_SCENARIO_BYTES + 1)  # no more: a 50 MB file took 33 s to be refused
    except FileNotFoundError:
        raise InputError(f"{p}: file not found") from None
    except IsADirectoryError:
        raise InputError(f"{p}: is a directory, not a scenario file") from None
    except OSError as e:
        raise InputError(f"{p}: cannot read: {e.strerror}") from None
    if len(raw) > MAX_SCENARIO_BYTES:
        raise InputError(
            f"{p}: larger than {MAX_SCENARIO_BYTES // 2**20} MiB: a scenario is not its data"
            " (prompts, traces: workload.path)"
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise InputError(
            f"{p}:{line}: not a UTF-8 text file (byte 0x{raw[e.start]:02x}): a YAML scenario?"
        ) from None
    return parse_yaml(text, str(p))


def parse_yaml(text: str, source: str) -> tuple[Any, dict[Path_, int]]:
    if "\x00" in text:
        line = text[: text.index("\x00")].count("\n") + 1
        raise InputError(f"{source}:{line}: a NUL byte: not a text file")
    lines: dict[Path_, int] = {}
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        if node is not None:
            check_aliases(node, source)  # before anything expands it: a bomb, a cycle, a deep nest
            _walk(node, (), lines, source)  # before it is constructed: an integer Python cannot read
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark
        where = f":{mark.line + 1}" if mark is not None else ""
        raise InputError(f"{source}{where}: invalid YAML: {_one_line(str(e.problem))}") from None
    except yaml.YAMLError as e:
        raise InputError(f"{source}: invalid YAML: {_one_line(str(e))}") from None
    except RecursionError:  # PyYAML's composer recurses once per level of nesting
        raise InputError(f"{source}: invalid YAML: nested more than {MAX_DEPTH} levels deep") from None
    return data, lines


MAX_NODES = 100_000  # values in a document with every alias expanded (a large sweep: a few thousand)
MAX_DEPTH = 64  # levels of nesting (a scenario uses 6)


def check_aliases(root: yaml.Node, source: str) -> None:
    """Refuse a document that expands beyond ``MAX_NODES`` values or ``MAX_DEPTH`` levels, or whose
    alias refers to a node that holds it (issue 30: a "billion laughs" anchor bomb ran out of memory
    after 34 s, a recursive alias raised RecursionError). PyYAML composes an alias as the anchored
    node itself, so the document is a graph: its expanded size is counted once per node (memoised),
    and a cycle is a node met again on its own path."""
    sizes: dict[int, int] = {}
    on_path: set[int] = set()

    def size(node: yaml.Node, depth: int) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        line = node.start_mark.line + 1
        if key in on_path:
            raise InputError(f"{source}:{line}: an alias that refers to a value holding it (recursive)")
        if depth > MAX_DEPTH:
            raise InputError(f"{source}:{line}: nested more than {MAX_DEPTH} levels deep")
        if isinstance(node, yaml.MappingNode):
            children = [x for kv in node.value for x in kv]
        elif isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        else:
            children = []
        on_path.add(key)
        total = 1 + sum(size(c, depth + 1) for c in children)
        on_path.discard(key)
        if total > MAX_NODES:
            raise InputError(
                f"{source}:{line}: expands to more than {MAX_NODES:,} values through its aliases "
                "(an anchor bomb?)"
            )
        sizes[key] = total
        return total

    size(root, 0)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def line_for(lines: dict[Path_, int], loc: Path_) -> int | None:
    """The line of ``loc`` or of its nearest ancestor present in the file."""
    loc = tuple(loc)
    while loc:
        if loc in lines:
            return lines[loc]
        loc = loc[:-1]
    return lines.get(())


def dotted(loc: Path_) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "(top level)"


def apply_overrides(data: Any, overrides: list[str], source: str = "--set") -> Any:
    """Apply ``key.path=value`` edits; values are parsed as YAML scalars/flows."""
    if not isinstance(data, dict):
        raise InputError(f"{source}: the scenario is not a mapping")
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise InputError(f"{source} {item!r}: expected key.path=value")
        try:
            problem = long_int_in(yaml.compose(raw, Loader=yaml.SafeLoader))
            if problem:
                raise InputError(f"{source} {key}: {problem}")
            value = yaml.safe_load(raw) if raw != "" else ""
        except yaml.YAMLError:
            value = raw
        parts = key.split(".")
        cur: Any = data
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            if isinstance(cur, list):
                idx = _list_index(cur, part)
                if idx is None:
                    raise InputError(
                        f"{source} {item!r}: no list item {part!r} in {'.'.join(parts[:i]) or 'top'}"
                    )
                if last:
                    cur[idx] = value
                else:
                    cur = cur[idx]
            elif isinstance(cur, dict):
                if last:
                    cur[part] = value
                else:
                    if cur.get(part) is None:
                        cur[part] = {}
                    cur = cur[part]
            else:
                raise InputError(f"{source} {item!r}: {'.'.join(parts[:i])} is not a mapping or list")
    return data


def _list_index(items: list[Any], part: str) -> int | None:
    if part.lstrip("-").isdigit():
        idx = int(part)
        return idx if -len(items) <= idx < len(items) else None
    for i, it in enumerate(items):
        if isinstance(it, dict) and it.get("name") == part:
            return i
    return None


def paced(items: Iterable[T], every: int = PACE_ITEMS) -> Iterator[T]:
    """``items``, with a pause of PAUSE_S after each ``every``: gevent's monkey patching (Locust's) makes
    it a switch to the process's other greenlets; elsewhere it lets other threads run."""
    for i, item in enumerate(items, 1):
        yield item
        if i % every == 0:
            time.sleep(PAUSE_S)


def read_paced(path: Path) -> str:
    """A UTF-8 input file's text as ``Path.read_text`` gives it, read in pieces of READ_CHARS, paced;
    a file that is not UTF-8 is an InputError naming the line (OSError is the caller's to word)."""
    try:
        with open(path, encoding="utf-8") as f:
            return "".join(paced(iter(lambda: f.read(READ_CHARS), ""), every=1))
    except UnicodeDecodeError:
        raw = path.read_bytes()
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as e:
            line = raw[: e.start].count(b"\n") + 1
            raise InputError(f"{path}:{line}: not a UTF-8 text file (byte 0x{raw[e.start]:02x})") from None
        raise


def jsonl_objects(text: str, path: Path) -> Iterator[tuple[int, Any]]:
    """A JSONL input file's values with their 1-based line numbers (blank lines skipped), in order;
    a line that is not JSON is an InputError naming the file and the line, when it is reached."""
    for n, line in paced(enumerate(text.splitlines(), 1)):
        if not line.strip():
            continue
        yield n, json_value(line, path, n)


def json_array_items(text: str, path: Path, not_a_list: str) -> Iterator[Any]:
    """The values of a JSON file that is one list, decoded one at a time, paced (one ``json.loads`` of
    a large file is a call nothing can interrupt). A file that holds something else is the InputError
    ``not_a_list``; invalid JSON names its line (counted only then)."""
    pos = 0

    def line() -> int:  # of the value being read
        return 1 + text.count("\n", 0, pos)

    def no_constant(name: str) -> Any:
        raise InputError(f"{path}:{line()}: {name} is not a JSON number")

    decoder = json.JSONDecoder(parse_constant=no_constant)
    pos = _space(text, 0)
    if not text.startswith("[", pos):
        json_value(text, path)  # invalid JSON raises its own error here
        raise InputError(not_a_list)
    pos = _space(text, pos + 1)
    for _ in paced(itertools.count()) if not text.startswith("]", pos) else ():
        try:
            value, end = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as e:
            raise InputError(f"{path}:{e.lineno}: invalid JSON: {e.msg}") from None
        except ValueError:  # json's int(): a number of more than 4,300 digits (long_int)
            raise InputError(f"{path}:{line()}: {JSON_LONG_INT}") from None
        except RecursionError:
            raise InputError(f"{path}:{line()}: invalid JSON: nested too deep") from None
        yield value
        pos = _space(text, end)
        if text.startswith("]", pos):
            break
        if not text.startswith(",", pos):
            raise InputError(f"{path}:{line()}: invalid JSON: expected ',' or ']'")
        pos = _space(text, pos + 1)
    if _space(text, pos + 1) != len(text):
        raise InputError(f"{path}:{line()}: invalid JSON: text after the list")


def _space(text: str, pos: int) -> int:
    """The first position at or after ``pos`` that is not JSON whitespace."""
    return _SPACE.match(text, pos).end()  # type: ignore[union-attr]


def json_value(text: str, path: Path, line: int = 1) -> Any:
    """JSON as RFC 8259 writes it: Python's json also takes ``NaN`` and ``Infinity``, which are no
    numbers (a trace's ``Infinity`` raised OverflowError; issue 30); an InputError names the line."""

    def no_constant(name: str) -> Any:
        raise InputError(f"{path}:{line}: {name} is not a JSON number")

    try:
        return json.loads(text, parse_constant=no_constant)
    except json.JSONDecodeError as e:
        raise InputError(f"{path}:{line + e.lineno - 1}: invalid JSON: {e.msg}") from None
    except ValueError:  # json's int(): a number of more than 4,300 digits (long_int)
        raise InputError(f"{path}:{line}: {JSON_LONG_INT}") from None
    except RecursionError:
        raise InputError(f"{path}:{line}: invalid JSON: nested too deep") from None
