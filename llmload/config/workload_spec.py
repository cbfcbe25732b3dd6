"""The workload, one model per kind: a field that belongs to another kind is an error at its line.

Every kind takes the common fields (seed, lengths, sampling, system prompt, tokenizer, salt, and
the answer's shape: llmload/config/answer_spec.py); each
adds its own. ``kind`` picks the model and defaults to ``synthetic``. A field of another kind
would have been accepted and ignored by one model for all kinds; here the chosen kind's model
refuses it, and ``foreign_field`` turns pydantic's "unknown field" into which kind it belongs to.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import Discriminator, Field, Tag, field_validator, model_validator

from llmload.config.answer_spec import AnswerFields
from llmload.config.durations import Duration, Span
from llmload.config.lengths import Length
from llmload.config.limits import MAX_TOKENS


class WorkloadCommon(AnswerFields):
    seed: int = 42
    input_tokens: Length = Field(128, description="prompt length in tokens (approximated by words)")
    output_tokens: Length = Field(256, description="max_tokens per request")
    temperature: float | None = Field(0.0, ge=0, description="sampling temperature (servers refuse < 0)")
    ignore_eos: bool = True
    min_tokens: int | None = Field(None, ge=0, le=MAX_TOKENS)
    reasoning_effort: Literal["low", "medium", "high"] | None = Field(
        None, description="reasoning models: sent as the request's reasoning_effort"
    )
    thinking_budget: int | None = Field(
        None,
        ge=0,
        le=MAX_TOKENS,
        description="reasoning tokens at most: sent as vLLM's thinking_token_budget",
    )
    system_prompt: str | None = None
    tokenizer: str | None = Field(None, description="local tokenizer.json for exact token counts")
    salt: bool | str = Field(
        True,
        description="a tag at the start of every prompt, the same for the whole run, so a rerun does not "
        "ride the server's prefix cache: true draws one per run (recorded), a string fixes it, false "
        "sends the same prompts run after run (paired compares across runs)",
    )

    @field_validator("salt")
    @classmethod
    def _salt(cls, v: bool | str) -> bool | str:
        if isinstance(v, str) and not re.fullmatch(r"[A-Za-z0-9_.:-]{1,64}", v):
            raise ValueError("a salt is 1-64 letters, digits or _.:-")
        return v


class SyntheticWorkload(WorkloadCommon):
    kind: Literal["synthetic"] = "synthetic"
    prompts: list[str] | None = Field(
        None, min_length=1, description="explicit prompts, used in order (cyclically)"
    )


class DatasetWorkload(WorkloadCommon):
    kind: Literal["jsonl", "sharegpt"]
    path: str = Field(description="the dataset file")


class PrefixWorkload(WorkloadCommon):
    kind: Literal["prefix"]
    prefix_groups: int = Field(4, ge=1, le=10_000, description="number of distinct long prefixes")
    prefix_tokens: int = Field(1024, ge=1, le=MAX_TOKENS, description="tokens in each shared prefix")


class MultiturnWorkload(WorkloadCommon):
    kind: Literal["multiturn"]

    @model_validator(mode="after")
    def _one_kind_of_session(self) -> MultiturnWorkload:
        if self.agent is not None:
            raise ValueError(
                "agent: its turns follow the model's tool calls; a multiturn workload scripts its own"
            )
        return self

    turns: Length = Field(3, description="turns per session")
    think_time: Duration = Field(0.0, description="pause between turns")


class TraceWorkload(WorkloadCommon):
    kind: Literal["trace"]
    path: str = Field(description="the trace file")
    format: Literal["auto", "csv", "jsonl"] = Field(
        "auto", description="trace layout: csv (BurstGPT-like), jsonl (Mooncake-like); auto: by suffix"
    )
    speedup: float = Field(1.0, gt=0, description="every gap divided by this")
    window_start: Duration = Field(0.0, description="skip this much of the trace's start")
    window_duration: Span | None = Field(None, description="replay this much of it (default: all)")


KINDS: dict[str, type[WorkloadCommon]] = {
    "synthetic": SyntheticWorkload,
    "jsonl": DatasetWorkload,
    "sharegpt": DatasetWorkload,
    "prefix": PrefixWorkload,
    "multiturn": MultiturnWorkload,
    "trace": TraceWorkload,
}


def _kind(v: Any) -> str | None:
    """The model a workload's data is for (no kind: synthetic); an unknown kind matches none."""
    kind = v.get("kind", "synthetic") if isinstance(v, dict) else getattr(v, "kind", None)
    if kind in ("jsonl", "sharegpt"):
        return "dataset"
    return kind if kind in KINDS else None


Workload = Annotated[
    Annotated[SyntheticWorkload, Tag("synthetic")]
    | Annotated[DatasetWorkload, Tag("dataset")]
    | Annotated[PrefixWorkload, Tag("prefix")]
    | Annotated[MultiturnWorkload, Tag("multiturn")]
    | Annotated[TraceWorkload, Tag("trace")],
    Discriminator(
        _kind,
        custom_error_type="kind_unknown",
        custom_error_message=f"must be one of {', '.join(KINDS)}",
    ),
]


def foreign_field(loc: tuple[Any, ...], data: Any) -> str | None:
    """For an unknown field under ``workload``: the kinds it belongs to (None: no kind has it)."""
    if len(loc) != 2 or loc[0] != "workload" or not isinstance(data, dict):
        return None
    owners = [k for k, model in KINDS.items() if loc[1] in model.model_fields and k != "sharegpt"]
    if not owners:
        return None
    wl = data.get("workload")
    kind = wl.get("kind", "synthetic") if isinstance(wl, dict) else "synthetic"
    names = ["jsonl or sharegpt" if k == "jsonl" else k for k in owners]
    return f"belongs to workload kind {' or '.join(names)}, not {kind}"


def default_workload() -> SyntheticWorkload:
    return SyntheticWorkload()
