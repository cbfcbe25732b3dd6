"""A scenario that does not validate, as one line: the file, the line and the field (exit 2).

pydantic's errors name a location inside the data, with union members and type tags mixed in;
this keeps the parts that are fields of the file, picks the error the input was meant for, and
blames ``--set`` when the command line, not the file, put the bad value there.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import ValidationError
from pydantic_core import PydanticCustomError

from llmload.config.yamlsrc import InputError, dotted, line_for


def input_error(
    e: ValidationError,
    data: dict[str, Any],
    lines: dict[tuple[Any, ...], int],
    source: str,
    file_data: Any,
    foreign: Callable[[tuple[Any, ...], Any], str | None] = lambda loc, data: None,
) -> InputError:
    """The one line a user sees for ``e``; ``file_data``: the data before ``--set`` edits (or None);
    ``foreign(loc, data)``: what an unknown field is instead (a field of another workload kind)."""
    errors = [(_real_loc(data, _loc(err)), err) for err in e.errors()]
    # A union (an int or a distribution, say) reports one error per member: show the member
    # the input was meant for (not "a valid integer" for a mapping), the most specific place.
    loc, err = min(errors, key=lambda le: (le[1]["type"].endswith("_type"), -len(le[0])))
    msg = err["msg"].removeprefix("Value error, ")
    others = {x for x, _ in errors} - {loc}
    more = f" (and {len(others)} more)" if others else ""
    if err["type"] == "missing":
        msg = "required field is missing"
    elif err["type"] == "extra_forbidden":
        msg = foreign(loc, data) or "unknown field"
    elif err["type"] == "literal_error":
        msg = f"{msg}, got {err.get('input')!r}"
    elif err["type"] == "kind_unknown":  # a tagged union's tag names no member: blame the tag
        loc = (*loc, "kind")
        msg = f"{msg}, got {_value_at(data, loc)!r}"
    value = _value_at(data, loc)
    before = _value_at(file_data, loc) if file_data is not None else _MISSING
    if file_data is not None and value is not before and value != before:  # the command line put it there
        path, value = _as_typed(loc, value) if err["type"] == "extra_forbidden" else (loc, value)
        shown = "" if value is _MISSING else f"={value!r}"
        return InputError(f"--set {dotted(path)}{shown}: {msg}{more}")
    line = line_for(lines, loc)
    where = f"{source}:{line}" if line else source
    return InputError(f"{where}: {dotted(loc)}: {msg}{more}")


def _as_typed(loc: tuple[Any, ...], value: Any) -> tuple[tuple[Any, ...], Any]:
    """A ``--set`` of an unknown field as typed: the mapping an edit built below ``loc``
    (``nosuch.path=3`` is ``nosuch: {path: 3}``), one key at each level, walked back into the path."""
    while isinstance(value, dict) and len(value) == 1:
        ((key, value),) = value.items()
        loc = (*loc, key)
    return loc, value


def field_error(field: str, message: str) -> PydanticCustomError:
    """For a model validator to raise: ``message`` about its field ``field``, shown at that field's
    line (pydantic places a model validator's error at the model)."""
    return PydanticCustomError(_AT_FIELD, message, {"field": field})


_AT_FIELD = "at_field"


def _loc(err: Any) -> tuple[Any, ...]:
    loc = tuple(x for x in err["loc"] if not (isinstance(x, str) and x.startswith(("function-", "tagged-"))))
    return (*loc, err["ctx"]["field"]) if err["type"] == _AT_FIELD else loc


_MISSING = object()


def _value_at(data: Any, loc: tuple[Any, ...]) -> Any:
    cur = data
    for part in loc:
        if isinstance(cur, dict) and part in cur:
            cur = cur[part]
        elif isinstance(cur, list) and isinstance(part, int) and -len(cur) <= part < len(cur):
            cur = cur[part]
        else:
            return _MISSING
    return cur


def check_unique_names(data: dict[str, Any], lines: dict[tuple[Any, ...], int], source: str) -> None:
    """Target names are keys in every output: the second use of a name is the error, at its line."""
    targets = data.get("targets")
    if not isinstance(targets, list):
        return
    first: dict[str, int] = {}
    for i, t in enumerate(targets):
        name = t.get("name") if isinstance(t, dict) else None
        if not isinstance(name, str):
            continue
        if name in first:
            line = line_for(lines, ("targets", i, "name"))
            seen = line_for(lines, ("targets", first[name], "name"))
            raise InputError(
                f"{source}:{line}: targets[{i}].name: target name {name!r} is used twice (first at line {seen})"
            )
        first[name] = i


_NOISE = {
    "int",
    "float",
    "str",
    "bool",
    "dict[str,any]",
    "list[str]",
    "constant-vus",
    "ramping-vus",
    "constant-arrival-rate",
    "ramping-arrival-rate",
    "sweep",
    "capacity",
    "synthetic",
    "dataset",
    "prefix",
    "multiturn",
    "trace",
}


def _real_loc(data: Any, loc: tuple[Any, ...]) -> tuple[Any, ...]:
    """Keep the parts of a pydantic error location that are fields of the file (drop union/type tags)."""
    out: list[Any] = []
    cur = data
    for i, part in enumerate(loc):
        if isinstance(cur, dict) and part in cur:
            out.append(part)
            cur = cur[part]
        elif isinstance(cur, list) and isinstance(part, int) and 0 <= part < len(cur):
            out.append(part)
            cur = cur[part]
        elif isinstance(part, str) and (
            part in _NOISE or part[:1].isupper() or "[" in part or part.startswith("constrained-")
        ):
            continue  # a union member's type name, not a field
        elif i == len(loc) - 1 or isinstance(cur, dict):
            out.append(part)  # a missing or unknown field
            cur = None
    return tuple(out)
