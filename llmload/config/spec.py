"""``Spec``, the base of every scenario model: ``Strict`` (llmload/base/strict.py), a number is a number
and a yes/no is a yes/no.

pydantic's lax mode reads ``true`` as 1 for an int and 1.0 for a float: ``users: true`` ran one user.
Its strict mode refuses booleans, but also the strings YAML 1.1 leaves some numbers in (``1e3``); this
refuses a boolean wherever the field takes a number and no boolean (its own, its list's items, its
mapping's values), for every field of every model at once. The other way too: lax mode reads 1, 0 and
words such as "yes" or "off" as booleans (``ignore_eos: 1`` was true), so a field that takes only a
boolean takes only YAML's true or false.
"""

from __future__ import annotations

import types
from typing import Annotated, Any, ClassVar, Union, get_args, get_origin

from pydantic import model_validator

from llmload.base.strict import Strict
from llmload.config.scenario_errors import field_error


class Spec(Strict):
    """Unknown keys refused, frozen, finite floats; a boolean is no number."""

    # fields whose own before-validator reads YAML's on/off (true/false) as a word: client.scrape_interval
    bool_words: ClassVar[frozenset[str]] = frozenset()

    @model_validator(mode="before")
    @classmethod
    def _no_bool_number(cls, data: Any) -> Any:
        # A model validator, not a field validator for "*": pydantic allows no before-validator on a
        # discriminator field (every phase's ``executor``). field_error names the field all the same.
        if not isinstance(data, dict):
            return data
        for name, field in cls.model_fields.items():
            if name in cls.bool_words:
                continue
            v = data.get(field.alias or name)
            if _holds_bool(v) and _bool_for_number(field.annotation, v):
                raise field_error(field.alias or name, f"expected a number, got {_yaml_words(v)}")
            if v is not None and not isinstance(v, bool) and _only_bool(field.annotation):
                raise field_error(field.alias or name, f"expected true or false, got {v!r}")
        return data


def _holds_bool(v: Any) -> bool:
    """Cheap first test, so the annotation is read only for a value that holds a boolean."""
    if isinstance(v, list):
        return any(isinstance(x, bool) for x in v)
    if isinstance(v, dict):
        return any(isinstance(x, bool) for x in v.values())
    return isinstance(v, bool)


def _members(tp: Any) -> list[Any]:
    """The types a field takes: Annotated unwrapped, unions flattened."""
    while get_origin(tp) is Annotated:
        tp = get_args(tp)[0]
    if get_origin(tp) in (Union, types.UnionType):
        return [m for arg in get_args(tp) for m in _members(arg)]
    return [tp]


def _only_bool(tp: Any) -> bool:
    """Whether ``tp`` takes a boolean and nothing else (None aside)."""
    members = _members(tp)
    return bool in members and all(m is bool or m is type(None) for m in members)


def _bool_for_number(tp: Any, v: Any) -> bool:
    """Whether ``v`` is (or holds) a boolean where ``tp`` takes a number and no boolean."""
    members = _members(tp)
    if bool in members or Any in members:
        return False
    if isinstance(v, bool):
        return int in members or float in members
    for m in members:
        args = get_args(m)
        if get_origin(m) is list and args and isinstance(v, list):
            if any(_bool_for_number(args[0], x) for x in v):
                return True
        if get_origin(m) is dict and len(args) == 2 and isinstance(v, dict):
            if any(_bool_for_number(args[1], x) for x in v.values()):
                return True
    return False


def _yaml_words(v: Any) -> str:
    if isinstance(v, bool):
        return str(v).lower()
    return next(_yaml_words(x) for x in (v.values() if isinstance(v, dict) else v) if isinstance(x, bool))
