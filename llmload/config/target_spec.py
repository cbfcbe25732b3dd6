"""A scenario's targets: the engines it compares, each with its address, model, engine kind and
pages, and the simulated engine that can stand in for it (``sim:``). Part of the scenario syntax
(llmload/config/scenario.py); every field is in docs/scenarios.md.
"""

from __future__ import annotations

import re
import urllib.parse
from typing import Any, Literal

import httpx
from pydantic import Field, field_validator, model_validator

from llmload.base.strict import settle
from llmload.config.scenario_errors import field_error
from llmload.config.spec import Spec

# A scenario's or target's name is a file name in the results (a directory, a CSV): letters, digits,
# '_', '.', '-', never a leading '.' or a '/', so `name: ../../x` cannot write outside output.dir.
SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
SAFE_NAME_RULE = "use letters, digits, '_', '.', '-' (max 64), starting with a letter or digit"
# RFC 9110 section 5.1: a field name is a token; section 5.5: a value holds visible characters,
# spaces, tabs and obs-text, never CR, LF or NUL (a CR/LF would start a header of its own).
_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_HEADER_VALUE = re.compile(r"[\t\x20-\x7e\x80-\xff]*")
_URL_BAD = re.compile(r"[\x00-\x20\x7f]")


def _header_problem(name: str, value: str) -> str | None:
    if not _HEADER_NAME.fullmatch(name):
        return f"header name {name!r} is not an HTTP token (RFC 9110: letters, digits, !#$%&'*+-.^_`|~)"
    if not _HEADER_VALUE.fullmatch(value):
        bad = next(c for c in value if not _HEADER_VALUE.fullmatch(c))
        return (
            f"header {name!r}: its value holds {bad!r} (RFC 9110: no CR, LF, NUL or other control character)"
        )
    return None


def url_problem(field: str, url: str) -> str | None:
    """What keeps the client from sending to ``url``, or None. It is parsed as the client parses it:
    httpx.URL, and urllib.parse for the port (httpx took ``:99999``). A base_url of
    ``http://127.0.0.1:abc`` or ``http://[::1`` passed validation and ``llmload run`` then died of
    httpx.InvalidURL; ``:99999`` passed both."""
    bad = _URL_BAD.search(url)
    if bad:
        return f"{field} holds {bad.group()!r}: a URL has no space or control character"
    if not re.match(r"^https?://", url):
        return f"{field} must start with http:// or https://"
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError as e:  # "Invalid IPv6 URL", or a port that is no number in 0-65535
        if "Port" not in str(e):
            return f"not a URL: {e}"
        port = 0
    if port == 0:
        return f"its port must be a number from 1 to 65535, got {_port_text(parts.netloc)!r}"
    try:
        host = httpx.URL(url).host
    except httpx.InvalidURL as e:
        return f"not a URL: {e}"
    return None if host else "names no host"


def _port_text(netloc: str) -> str:
    return netloc.rpartition("@")[2].rpartition("]")[2].partition(":")[2]


TARGET_KINDS = ("vllm", "aphrodite", "sglang", "tgi", "llamacpp", "trtllm", "openai", "sim")


class SimSpec(Spec):
    """How llmload starts a simulated engine for a target of kind `sim`."""

    profile: str | dict[str, Any] = Field(
        description="profile name (llmload sim --list-profiles) or inline profile"
    )
    dialect: Literal["vllm", "aphrodite"] | None = Field(None, description="override the profile's dialect")
    seed: int | None = Field(None, description="simulator seed (default: the workload seed)")

    @field_validator("profile")
    @classmethod
    def _known_profile(cls, v: str | dict[str, Any]) -> str | dict[str, Any]:
        """A shipped profile's name, or an inline profile that validates (``llmload validate`` says so)."""
        from llmload.sim.profiles import ProfileError, load_profile, validate_profile

        try:
            load_profile(v) if isinstance(v, str) else validate_profile(v, "inline profile")
        except ProfileError as e:
            raise ValueError(str(e)) from None
        return v


# Where each engine kind serves its Prometheus text (engines.md); kind openai has none.
METRICS_PATHS = {
    "vllm": "/metrics",
    "aphrodite": "/metrics",
    "sglang": "/metrics",
    "tgi": "/metrics",
    "llamacpp": "/metrics",
    "trtllm": "/prometheus/metrics",
}


class Target(Spec):
    name: str = Field(description="unique name; used in results, metrics and reports")
    kind: Literal["vllm", "aphrodite", "sglang", "tgi", "llamacpp", "trtllm", "openai", "sim"] = Field(
        description="engine kind (wire quirks, metric dialect)"
    )
    base_url: str | None = Field(None, description="http://host:port of the OpenAI-compatible server")
    model: str | None = Field(None, description="served model name (must match /v1/models)")
    api: Literal["chat", "completions", "responses"] = Field(
        "chat",
        description="chat (/v1/chat/completions), completions (/v1/completions), responses (/v1/responses)",
    )
    api_key_env: str | None = Field(None, description="environment variable holding the API key")
    headers: dict[str, str] = Field(
        default_factory=dict, description="extra HTTP headers (values as strings)"
    )
    extra_body: dict[str, Any] = Field(default_factory=dict, description="engine-specific request fields")
    metrics_url: str | None = Field(
        None,
        description='engine /metrics URL, scraped during the run (default: base_url + the kind\'s path; "" for none)',
    )
    gpu_metrics_url: str | None = Field(None, description="DCGM-exporter text URL (scraped during the run)")
    labels: dict[str, str] = Field(default_factory=dict)
    cost_per_hour: float | None = Field(None, ge=0, description="dollars per hour for this target's hardware")
    sim: SimSpec | None = Field(
        None,
        description="kind sim: the simulator llmload starts; other kinds: the stand-in used with simulate: true",
    )

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not SAFE_NAME.fullmatch(v):
            raise ValueError(SAFE_NAME_RULE)
        return v

    @field_validator("headers")
    @classmethod
    def _headers(cls, v: dict[str, str]) -> dict[str, str]:
        for name, value in v.items():
            problem = _header_problem(name, value)
            if problem:
                raise ValueError(problem)
        return v

    @field_validator("labels", "headers", mode="before")
    @classmethod
    def _labels(cls, v: Any) -> Any:
        if isinstance(v, dict):
            return {str(k): str(x) for k, x in v.items()}
        return v

    @model_validator(mode="after")
    def _need_url(self) -> Target:
        if self.kind == "sim":
            if self.base_url is None and self.sim is None:
                raise ValueError("a sim target needs `sim: {profile: ...}` (llmload starts it) or a base_url")
        elif self.base_url is None:
            raise ValueError("base_url is required (only kind sim can be started by llmload)")
        for field in ("base_url", "metrics_url", "gpu_metrics_url"):
            url = getattr(self, field)
            problem = url_problem(field, url) if url else None
            if problem:
                raise field_error(field, problem)
        path = METRICS_PATHS.get(self.kind)
        if self.metrics_url is None and self.base_url is not None and path is not None:
            settle(self, metrics_url=self.base_url.rstrip("/") + path)  # follows base_url, even from --set
        return self
