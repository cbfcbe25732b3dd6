"""The shape a request asked its answer to take, and the judge of what came back.

A workload that sends ``response_format`` (JSON) or ``tools`` asks for an answer a program will
read: a JSON document, or tool calls whose arguments fit the function's schema. An answer that does
not is of no use to the caller, however fast it streamed, so the request is not ``ok``: it is
``invalid_output`` (docs/metrics.md), never goodput. The stream client collects the answer text and
the tool calls (``ToolCall``) only for such requests; ``AnswerShape.judge`` says what is wrong, or
None. Schemas are compiled once per run (``AnswerShape`` is built once per workload), so a judgement
costs one JSON parse and one validation per request, not per chunk.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import jsonschema
import orjson

JSON_OBJECT = "json_object"
JSON_SCHEMA = "json_schema"
TOOL_CALL = "tool_call"
CHECKS: tuple[str, ...] = (JSON_OBJECT, JSON_SCHEMA, TOOL_CALL)


@dataclass
class ToolCall:
    """One streamed tool call: its function's name and its arguments, put together from the deltas."""

    name: str = ""
    arguments: list[str] = field(default_factory=list)
    id: str = ""  # the server's call id (chat's tool_calls[].id, the Responses API's call_id)

    @property
    def text(self) -> str:
        return "".join(self.arguments)


def schema_problem(schema: Any) -> str | None:
    """Why ``schema`` is not a JSON Schema (draft 2020-12), or None."""
    if not isinstance(schema, dict):
        return "a JSON Schema is an object"
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as e:
        return f"not a valid JSON Schema: {e.message}"
    return None


def _validator(schema: dict[str, Any]) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(schema)


def _parse(text: str) -> tuple[Any, str | None]:
    try:
        return orjson.loads(text), None
    except orjson.JSONDecodeError:
        shown = text if len(text) <= 60 else text[:40] + "..." + text[-15:]
        return None, f"not JSON: {shown!r}"


def _invalid(validator: jsonschema.Draft202012Validator, doc: Any) -> str | None:
    err = jsonschema.exceptions.best_match(validator.iter_errors(doc))
    if err is None:
        return None
    where = "/".join(str(p) for p in err.absolute_path)
    return f"{where or 'the document'}: {err.message}"[:200]


class AnswerShape:
    """What one workload's requests ask their answers to be: ``check`` is json_object, json_schema
    or tool_call. ``tools`` maps each function's name to its parameters' schema; ``call_required``
    (tool_choice required, or a named function) means an answer without a call is invalid, and
    ``named`` is the one function allowed."""

    def __init__(
        self,
        check: str,
        *,
        schema: dict[str, Any] | None = None,
        tools: dict[str, dict[str, Any]] | None = None,
        call_required: bool = False,
        named: str | None = None,
    ) -> None:
        if check not in CHECKS:
            raise ValueError(f"unknown answer check {check!r}")
        self.check = check
        self._schema = _validator(schema) if schema is not None else None
        self._tools = {name: _validator(s) for name, s in (tools or {}).items()}
        self.call_required = call_required
        self.named = named

    def judge(self, content: str, calls: list[ToolCall], finish_reason: str | None) -> str | None:
        """What makes this answer unusable (one line), or None when it is usable."""
        cut = " (cut at max_tokens)" if finish_reason == "length" else ""
        if self.check == TOOL_CALL:
            problem = self._judge_calls(calls)
        else:
            doc, problem = _parse(content.strip())
            if problem is None and self.check == JSON_OBJECT and not isinstance(doc, dict):
                problem = "JSON, but not an object"
            if problem is None and self._schema is not None:
                problem = _invalid(self._schema, doc)
        return None if problem is None else problem + cut

    def _judge_calls(self, calls: list[ToolCall]) -> str | None:
        if not calls:
            return "no tool call (tool_choice asked for one)" if self.call_required else None
        for i, call in enumerate(calls):
            what = f"tool call {i} ({call.name or 'no name'})"
            if self.named is not None and call.name != self.named:
                return f"{what}: tool_choice named {self.named}"
            validator = self._tools.get(call.name)
            if validator is None:
                return f"{what}: no such function among the request's tools"
            args, problem = _parse(call.text.strip() or "{}")
            if problem is None:
                problem = _invalid(validator, args)
            if problem is not None:
                return f"{what}: arguments {problem}"
        return None
