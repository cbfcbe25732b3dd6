"""YAML with line numbers, and errors that name the file, line and field.

``load_yaml(path)`` returns the plain data plus a map from field path
(("targets", 0, "model")) to its 1-based line, so a validation error can point
at the line that holds the offending value. ``apply_overrides`` applies
``--set key=value`` edits (dotted paths; list items by index or by ``name``).
``jsonl_objects`` reads the JSONL input files (datasets, traces) with the same kind of errors.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

Path_ = tuple[Any, ...]


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


def load_yaml(path: str | Path) -> tuple[Any, dict[Path_, int]]:
    p = Path(path)
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise InputError(f"{p}: file not found") from None
    except IsADirectoryError:
        raise InputError(f"{p}: is a directory, not a scenario file") from None
    except OSError as e:
        raise InputError(f"{p}: cannot read: {e.strerror}") from None
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
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark
        where = f":{mark.line + 1}" if mark is not None else ""
        raise InputError(f"{source}{where}: invalid YAML: {_one_line(str(e.problem))}") from None
    except yaml.YAMLError as e:
        raise InputError(f"{source}: invalid YAML: {_one_line(str(e))}") from None
    lines: dict[Path_, int] = {}
    if node is not None:
        _walk(node, (), lines, source)
    return data, lines


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


def jsonl_objects(text: str, path: Path) -> Iterator[tuple[int, Any]]:
    """A JSONL input file's values with their 1-based line numbers (blank lines skipped), in order;
    a line that is not JSON is an InputError naming the file and the line, when it is reached."""
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise InputError(f"{path}:{n}: invalid JSON: {e.msg}") from None
        yield n, obj
