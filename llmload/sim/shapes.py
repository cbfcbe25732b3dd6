"""Shaped answers on the simulator: a request that asks for JSON (``response_format``, the Responses
API's ``text.format``) or a tool call gets an answer that fits, as an engine with structured output
gives one: a JSON document drawn from the schema, split into token-sized pieces, ending with
finish_reason ``stop`` when the document is complete (``length`` when max_tokens cuts it first, so
the client sees it invalid). The document is drawn from the request's own generator, so the same
request gets the same answer.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from typing import Any

_PIECE = re.compile(r'[{}\[\],:]|"|[^{}\[\],:"]{1,4}')  # one pseudo token each
_WORDS = ("alpha", "bravo", "cedar", "delta", "ember", "fjord", "grove", "harbor")


@dataclass(frozen=True)
class Ask:
    """What a request asked its answer to be: ``json`` (``schema`` None: any object) or ``tool``
    (a call of ``function`` whose arguments fit ``schema``)."""

    kind: str  # json | tool
    schema: dict[str, Any] | None
    function: str = ""


def instance(schema: Any, rng: random.Random, depth: int = 0) -> Any:
    """A small JSON value that fits ``schema`` (enum, const, objects, arrays, strings, numbers)."""
    if not isinstance(schema, dict) or depth > 6:
        return rng.choice(_WORDS)
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return rng.choice(schema["enum"])
    for key in ("anyOf", "oneOf", "allOf"):
        if isinstance(schema.get(key), list) and schema[key]:
            return instance(schema[key][0], rng, depth + 1)
    kind = schema.get("type", "object" if "properties" in schema else "string")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object":
        props = schema.get("properties")
        if not isinstance(props, dict):
            return {}
        return {name: instance(sub, rng, depth + 1) for name, sub in props.items()}
    if kind == "array":
        n = max(int(schema.get("minItems", 1)), 1)
        return [instance(schema.get("items"), rng, depth + 1) for _ in range(min(n, 3))]
    if kind in ("integer", "number"):
        lo, hi = int(schema.get("minimum", 0)), int(schema.get("maximum", 100))
        return rng.randint(lo, max(lo, hi))
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "null":
        return None
    return rng.choice(_WORDS)


def pieces(ask: Ask, rng: random.Random) -> tuple[str, ...]:
    """The answer's token texts: the document, compact, in pieces of up to four characters."""
    doc = instance(ask.schema, rng) if ask.schema is not None else {"answer": rng.choice(_WORDS)}
    return tuple(_PIECE.findall(json.dumps(doc, separators=(",", ":"))))


def _function(tool: Any) -> dict[str, Any]:
    """A tool's function, in chat's nesting or the Responses API's flat form."""
    fn = tool.get("function", tool) if isinstance(tool, dict) else None
    if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
        raise ValueError("tools: each tool needs a function with a name")
    return fn


def _tool_ask(tools: Any, choice: Any) -> Ask | None:
    if not isinstance(tools, list) or not tools or choice == "none":
        return None
    fns = {f["name"]: f for f in map(_function, tools)}
    name = next(iter(fns))
    if isinstance(choice, dict):
        named = (
            choice.get("function", choice).get("name")
            if isinstance(choice.get("function", choice), dict)
            else None
        )
        if named not in fns:
            raise ValueError(f"tool_choice: no tool named {named!r}")
        name = named
    params = fns[name].get("parameters")
    return Ask("tool", params if isinstance(params, dict) else None, name)


def _format_ask(fmt: Any) -> Ask | None:
    if fmt is None:
        return None
    if not isinstance(fmt, dict) or fmt.get("type") not in ("text", "json_object", "json_schema"):
        raise ValueError("response_format: type must be text, json_object or json_schema")
    if fmt["type"] == "text":
        return None
    if fmt["type"] == "json_object":
        return Ask("json", None)
    spec = fmt.get("json_schema", fmt)  # chat nests it; the Responses API's text.format is flat
    schema = spec.get("schema") if isinstance(spec, dict) else None
    if not isinstance(schema, dict):
        raise ValueError("response_format: json_schema needs a schema")
    return Ask("json", schema)


def _after_result(body: dict[str, Any], responses: bool) -> bool:
    """The conversation ends with a tool's result: a model on tool_choice auto answers it in text."""
    msgs = body.get("input" if responses else "messages")
    last = msgs[-1] if isinstance(msgs, list) and msgs else None
    return isinstance(last, dict) and (
        last.get("role") == "tool" or last.get("type") == "function_call_output"
    )


def ask_of(body: dict[str, Any], responses: bool) -> Ask | None:
    """What ``body`` asks of its answer (None: free text); ValueError: the ask is malformed (HTTP 400).
    With tool_choice auto a model calls a tool unless it was just given a tool's result."""
    choice = body.get("tool_choice", "auto")
    if choice == "auto" and _after_result(body, responses):
        choice = "none"
    tool = _tool_ask(body.get("tools"), choice)
    if tool is not None:
        return tool
    if responses:
        text = body.get("text")
        return _format_ask(text.get("format") if isinstance(text, dict) else None)
    return _format_ask(body.get("response_format"))
