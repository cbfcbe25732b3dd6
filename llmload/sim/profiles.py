"""Simulator profiles: the validated description of one emulated engine + GPU set.

A profile is a pydantic model (``extra="forbid"``); shipped profiles live in ``profiles.yaml`` next to
this module.  ``validate_profile`` turns a plain dict (a scenario's inline ``sim: {profile: {...}}``)
into a :class:`SimProfile`, raising :class:`ProfileError` (a ``ValueError``) whose message names the
field that is wrong.
"""

from __future__ import annotations

import math
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field, ValidationError, model_validator

from llmload.base.strict import Strict

PROFILES_FILE = Path(__file__).with_name("profiles.yaml")
GIB = 1024**3


class ProfileError(ValueError):
    """A profile that cannot be used; the message names the source and the field."""


class GpuSpec(Strict):
    name: str = Field(description="GPU model name as NVML reports it")
    memory_gib: float = Field(gt=0, description="framebuffer per GPU, GiB")
    idle_w: float = Field(ge=0, description="board power when idle, W")
    max_w: float = Field(gt=0, description="board power at 100% utilisation, W")
    sm_clock_mhz: int = Field(default=2000, gt=0, description="SM clock under load, MHz")
    idle_sm_clock_mhz: int = Field(default=210, gt=0, description="SM clock when idle, MHz")
    ambient_c: float = Field(default=32.0, description="temperature when idle, C")
    max_temp_c: float = Field(default=78.0, description="steady temperature at max power, C")

    @model_validator(mode="after")
    def _power_order(self) -> GpuSpec:
        if self.max_w < self.idle_w:
            raise ValueError("max_w must be >= idle_w")
        return self


class KvLayout(Strict):
    layers: int = Field(gt=0, description="transformer layers")
    kv_heads: int = Field(gt=0, description="key/value heads (GQA groups)")
    head_dim: int = Field(gt=0, description="dimension per head")
    dtype_bytes: float = Field(default=2, gt=0, description="bytes per KV element (2 fp16, 1 fp8)")
    block_size: int = Field(default=16, gt=0, description="tokens per KV block")

    @property
    def bytes_per_block(self) -> float:
        """Whole-model bytes of one block across all ranks: 2 (K and V) x layers x heads x dim x dtype x block."""
        return 2 * self.layers * self.kv_heads * self.head_dim * self.dtype_bytes * self.block_size


class StepTime(Strict):
    """Step time in ms = base + decode_seq x decode seqs + prefill_token x prefill tokens + kv_ktoken x context/1000."""

    base_ms: float = Field(ge=0, description="fixed cost of one forward step (weight reads, launch)")
    per_decode_seq_ms: float = Field(default=0.0, ge=0, description="added per sequence decoding in the step")
    per_prefill_token_ms: float = Field(default=0.0, ge=0, description="added per prompt token computed")
    per_context_ktoken_ms: float = Field(
        default=0.0, ge=0, description="added per 1,000 tokens of KV read by the step's attention"
    )


class OutputLength(Strict):
    """Natural stop length (when ignore_eos is off): lognormal around ``median`` (or fixed when sigma=0)."""

    median: float = Field(default=200.0, gt=0, description="median natural output length, tokens")
    sigma: float = Field(default=0.8, ge=0, description="lognormal sigma (0: always the median)")
    min: int = Field(default=1, ge=1, description="shortest natural output")


class Reasoning(Strict):
    """A reasoning model: each answer starts with this many reasoning tokens (streamed as
    ``reasoning_content``), lognormal around ``median``; a request's ``reasoning_effort`` scales it
    (low x0.5, medium x1, high x2) and its ``thinking_token_budget`` caps it. Reasoning that reaches
    ``max_tokens`` leaves no answer token (finish_reason length)."""

    median: float = Field(default=200.0, gt=0, description="median reasoning length, tokens")
    sigma: float = Field(default=0.6, ge=0, description="lognormal sigma (0: always the median)")
    min: int = Field(default=1, ge=1, description="shortest reasoning")


EFFORT_SCALE: dict[str, float] = {"low": 0.5, "medium": 1.0, "high": 2.0}


class SimProfile(Strict):
    name: str
    note: str = Field(description="where the numbers come from")
    dialect: Literal["vllm", "aphrodite"] = "vllm"
    model: str = Field(description="served model name (what /v1/models lists)")
    tensor_parallel: int = Field(default=1, ge=1)
    gpu: GpuSpec
    weights_gib: float = Field(ge=0, description="model weights, whole model, GiB")
    gpu_memory_utilization: float = Field(default=0.9, gt=0, le=1)
    activation_reserve_gib: float = Field(default=1.0, ge=0, description="per-GPU non-KV reserve, GiB")
    kv: KvLayout
    num_gpu_blocks: int | None = Field(default=None, gt=0, description="override the derived KV block count")
    max_num_seqs: int = Field(default=256, gt=0)
    max_num_batched_tokens: int = Field(default=8192, gt=0, description="token budget of one step")
    max_model_len: int = Field(default=8192, gt=0)
    step: StepTime
    prefix_caching: bool = True
    stream_interval: int = Field(default=1, ge=1, description="tokens per streamed chunk")
    output_length: OutputLength = OutputLength()
    reasoning: Reasoning | None = Field(default=None, description="a reasoning phase before each answer")
    fault_rate: float = Field(default=0.0, ge=0, le=1, description="fraction of requests aborted mid-stream")
    warn_lag_ms: float = Field(default=50.0, gt=0, description="host lag behind the model clock that warns")

    @property
    def kv_pool_bytes(self) -> float:
        """Whole KV pool (all ranks): budget x TP - weights - per-GPU reserve x TP."""
        budget = self.gpu.memory_gib * self.gpu_memory_utilization * self.tensor_parallel
        return (budget - self.weights_gib - self.activation_reserve_gib * self.tensor_parallel) * GIB

    @property
    def blocks(self) -> int:
        """KV blocks of the pool (the override, or derived like vLLM's profiler does)."""
        if self.num_gpu_blocks is not None:
            return self.num_gpu_blocks
        return max(0, math.floor(self.kv_pool_bytes / self.kv.bytes_per_block))

    @property
    def kv_token_capacity(self) -> int:
        return self.blocks * self.kv.block_size

    @model_validator(mode="after")
    def _fits(self) -> SimProfile:
        if self.num_gpu_blocks is None and self.kv_pool_bytes <= 0:
            raise ValueError(
                "weights_gib: weights and reserve exceed gpu.memory_gib x gpu_memory_utilization x "
                "tensor_parallel (no room for a KV cache)"
            )
        if self.kv_token_capacity < self.max_model_len:
            raise ValueError(
                f"max_model_len: {self.max_model_len} is larger than the KV cache holds "
                f"({self.kv_token_capacity} tokens); lower it or raise the KV pool"
            )
        if self.kv.kv_heads % self.tensor_parallel and self.tensor_parallel % self.kv.kv_heads:
            raise ValueError("tensor_parallel: must divide kv.kv_heads (or be a multiple of it)")
        return self


def _describe(err: ValidationError) -> str:
    first = err.errors()[0]
    loc = ".".join(str(p) for p in first["loc"]) or "profile"
    msg = first["msg"]
    if first["type"] == "extra_forbidden":
        msg = "unknown field"
    elif msg.startswith("Value error, "):
        msg = msg[len("Value error, ") :]
        if ":" in msg.split(" ", 1)[0]:  # the message already names its field
            return msg
    return f"{loc}: {msg}"


def validate_profile(data: dict[str, Any], source: str = "profile") -> SimProfile:
    """Validate a profile dict; ProfileError names ``source`` and the bad field."""
    if not isinstance(data, dict):
        raise ProfileError(f"{source}: a profile must be a mapping, got {type(data).__name__}")
    try:
        return SimProfile.model_validate(data)
    except ValidationError as err:
        raise ProfileError(f"{source}: {_describe(err)}") from None


@lru_cache(maxsize=1)
def _shipped() -> dict[str, dict[str, Any]]:
    raw = yaml.safe_load(PROFILES_FILE.read_text())
    return {p["name"]: p for p in raw["profiles"]}


def list_profiles() -> list[str]:
    """Names of the shipped profiles, sorted."""
    return sorted(_shipped())


def load_profile(name: str) -> SimProfile:
    """A shipped profile by name; ProfileError lists the names available."""
    data = _shipped().get(name)
    if data is None:
        raise ProfileError(f"unknown simulator profile {name!r}; available: {', '.join(list_profiles())}")
    return validate_profile(data, f"{PROFILES_FILE.name}:{name}")


def load_profile_file(path: str | Path) -> SimProfile:
    """A profile from a YAML file holding one profile mapping."""
    p = Path(path)
    try:
        data = yaml.safe_load(p.read_text())
    except OSError as err:
        raise ProfileError(f"{p}: cannot read profile file ({err.strerror})") from None
    except yaml.YAMLError as err:
        raise ProfileError(f"{p}: not valid YAML ({str(err).splitlines()[0]})") from None
    return validate_profile(data, str(p))
