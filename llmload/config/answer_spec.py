"""The workload's answer shapes: ``tools`` with ``tool_choice``, and ``response_format``.

Written as OpenAI's chat API writes them (the Responses API's spelling is made from these by
llmload/client/openai_stream.py), checked where the scenario is read: every schema is a JSON Schema,
``tool_choice`` names a function that is among the tools, ``json_schema`` carries its schema. The
request body gets them as written (``body_fields``); the stream client judges each answer against
them (``answer_shape``, llmload/config/answer_check.py).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from llmload.config.answer_check import JSON_OBJECT, JSON_SCHEMA, TOOL_CALL, AnswerShape, schema_problem
from llmload.config.durations import Duration
from llmload.config.spec import Spec


def _schema(v: dict[str, Any]) -> dict[str, Any]:
    problem = schema_problem(v)
    if problem is not None:
        raise ValueError(problem)
    return v


class Function(Spec):
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    description: str | None = None
    parameters: dict[str, Any] = Field(
        default_factory=lambda: {"type": "object", "properties": {}},
        description="the arguments' JSON Schema: each call's arguments are validated against it",
    )
    strict: bool | None = None

    _parameters = field_validator("parameters")(_schema)


class Tool(Spec):
    type: Literal["function"] = "function"
    function: Function


class NamedFunction(Spec):
    name: str


class NamedToolChoice(Spec):
    type: Literal["function"] = "function"
    function: NamedFunction


class JsonSchemaFormat(Spec):
    name: str = Field("answer", pattern=r"^[A-Za-z0-9_-]{1,64}$")
    description: str | None = None
    schema_: dict[str, Any] = Field(alias="schema", description="the answer's JSON Schema")
    strict: bool | None = None

    _schema_ = field_validator("schema_")(_schema)


class ResponseFormat(Spec):
    type: Literal["text", "json_object", "json_schema"]
    json_schema: JsonSchemaFormat | None = None

    @model_validator(mode="after")
    def _needs_schema(self) -> ResponseFormat:
        if self.type == "json_schema" and self.json_schema is None:
            raise ValueError("type json_schema needs json_schema: {name, schema}")
        if self.type != "json_schema" and self.json_schema is not None:
            raise ValueError(f"json_schema is for type json_schema, not {self.type}")
        return self


ToolChoice = Literal["none", "auto", "required"] | NamedToolChoice


class AgentLoop(Spec):
    """An agent's loop: each answer that calls tools gets every call answered with ``tool_result``
    after ``tool_latency`` (the tool's time: not charged to the engine), and the model goes on, up to
    ``rounds`` model turns a session (llmload/locust/sessions.py)."""

    rounds: int = Field(3, ge=2, le=64, description="model turns a session at most (the first included)")
    tool_latency: Duration = Field(0.0, description="time in the tool before its result goes back")
    tool_result: str = Field('{"ok": true}', max_length=65536, description="every call's result, as sent")


class AnswerFields(Spec):
    """The workload fields that shape the answer (a mix-in of every workload kind)."""

    tools: list[Tool] | None = Field(None, min_length=1, description="functions the model may call")
    tool_choice: ToolChoice | None = Field(None, description="none, auto, required or a named function")
    response_format: ResponseFormat | None = Field(None, description="text, json_object or json_schema")
    agent: AgentLoop | None = Field(None, description="answer the model's tool calls and go on, turn by turn")

    @model_validator(mode="after")
    def _choice_names_a_tool(self) -> AnswerFields:
        choice = self.tool_choice
        if choice is not None and self.tools is None:
            raise ValueError("tool_choice needs tools")
        if isinstance(choice, NamedToolChoice) and self.tools is not None:
            names = [t.function.name for t in self.tools]
            if choice.function.name not in names:
                raise ValueError(f"tool_choice names {choice.function.name}, not among the tools {names}")
        if self.agent is not None and (self.tools is None or choice == "none"):
            raise ValueError("agent needs tools the model may call (and tool_choice other than none)")
        if (
            self.tools is not None
            and self.response_format is not None
            and self.response_format.type != "text"
        ):
            raise ValueError("tools and a JSON response_format in one request: pick one answer shape")
        return self

    def body_fields(self) -> dict[str, Any]:
        """The chat request's fields, as written in the scenario."""
        out: dict[str, Any] = {}
        if self.tools is not None:
            out["tools"] = [t.model_dump(exclude_none=True) for t in self.tools]
        if self.tool_choice is not None:
            choice = self.tool_choice
            out["tool_choice"] = choice if isinstance(choice, str) else choice.model_dump()
        if self.response_format is not None:
            out["response_format"] = self.response_format.model_dump(exclude_none=True, by_alias=True)
        return out

    def answer_shape(self) -> AnswerShape | None:
        """What each answer is judged against (None: plain text, nothing to judge)."""
        choice = self.tool_choice
        if self.tools is not None and choice != "none":
            named = choice.function.name if isinstance(choice, NamedToolChoice) else None
            return AnswerShape(
                TOOL_CALL,
                tools={t.function.name: t.function.parameters for t in self.tools},
                call_required=choice == "required" or named is not None,
                named=named,
            )
        fmt = self.response_format
        if fmt is None or fmt.type == "text":
            return None
        if fmt.json_schema is not None:
            return AnswerShape(JSON_SCHEMA, schema=fmt.json_schema.schema_)
        return AnswerShape(JSON_OBJECT)
