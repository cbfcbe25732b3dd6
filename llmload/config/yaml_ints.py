"""Integers Python cannot read or write in decimal: more than ``sys.get_int_max_str_digits()`` (4,300)
digits. ``users: 999...9`` with 5,000 nines raised ValueError from PyYAML's int constructor (and json's
int() in a dataset line): a traceback where one line and exit 2 belong. These find them first."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import yaml

JSON_LONG_INT = f"a number of more than {sys.get_int_max_str_digits():,} digits"

_INT_TAG = "tag:yaml.org,2002:int"


def long_int(node: yaml.Node) -> str | None:
    """What is wrong with a YAML integer Python cannot read or write in decimal, or None (a hex
    literal reads, but its decimal form, in summary.json, is refused alike)."""
    if not isinstance(node, yaml.ScalarNode) or node.tag != _INT_TAG:
        return None
    try:
        str(yaml.constructor.SafeConstructor().construct_yaml_int(node))  # a few per file
    except ValueError:
        return f"an integer of more than {sys.get_int_max_str_digits():,} digits"
    return None


def long_int_in(node: yaml.Node | None) -> str | None:
    """What is wrong with the first such integer among a ``--set`` value's scalars, or None."""
    return next((p for n in _scalars(node) if (p := long_int(n))), None)


def _scalars(node: yaml.Node | None) -> Iterator[yaml.Node]:
    """The scalar nodes of a ``--set`` value, each once (an alias is the node it names)."""
    seen: set[int] = set()
    todo = [node] if node is not None else []
    while todo:
        n = todo.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        if isinstance(n, yaml.MappingNode):
            todo.extend(x for kv in n.value for x in kv)
        elif isinstance(n, yaml.SequenceNode):
            todo.extend(n.value)
        else:
            yield n
