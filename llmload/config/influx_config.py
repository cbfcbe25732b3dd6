"""InfluxDB connection settings: the scenario's ``influx:`` mapping and the ``--influx*`` options.

Which write API is used:

* ``api`` given explicitly (``--influx-api v1|v2``) wins;
* otherwise v2 when an org or a bucket is given and no database, else v1.

The URL may also carry the target as query parameters, handy on a command line:
``--influx 'http://host:8086?db=llmload'`` (v1) or ``--influx 'http://host:8086?org=o&bucket=b'`` (v2).
Explicit options override the URL's parameters.

Secrets are never stored here: ``token_env`` and ``password_env`` name environment variables,
read only when a request is sent.
"""

from __future__ import annotations

import argparse
import os
from typing import Any, Literal
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from pydantic import Field, model_validator

from llmload.config.spec import Spec

DEFAULT_DATABASE = "llmload"


class InfluxConfig(Spec):
    """Where and how the InfluxDB sink and the collector write."""

    url: str = Field(description="Base URL of the server, e.g. http://127.0.0.1:8086 (no path needed)")
    api: Literal["v1", "v2"] = Field(
        default="v1",
        description="v1: POST /write?db= (InfluxDB 1.x, also 2.x/3.x compat); v2: POST /api/v2/write?org=&bucket=",
    )
    database: str | None = Field(default=None, description="v1 database (default 'llmload' for v1)")
    org: str | None = Field(default=None, description="v2 organisation")
    bucket: str | None = Field(default=None, description="v2 bucket (required for v2)")
    token_env: str = Field(
        default="INFLUX_TOKEN", description="environment variable holding the API token (sent as 'Token ...')"
    )
    username: str | None = Field(
        default=None, description="v1 user for basic auth (password from password_env)"
    )
    password_env: str | None = Field(
        default="INFLUX_PASSWORD", description="environment variable holding the v1 password"
    )
    batch_size: int = Field(default=5000, ge=1, le=1_000_000, description="points per HTTP write")
    flush_interval_s: float = Field(default=1.0, gt=0, le=3600, description="longest wait before a write")
    max_retries: int = Field(default=3, ge=0, le=100, description="retries per batch before it is spooled")
    max_retry_time_s: float = Field(
        default=10.0, ge=0, le=3600, description="longest time one batch is retried before it is spooled"
    )
    timeout_s: float = Field(default=5.0, gt=0, le=600, description="HTTP timeout of one write")

    @model_validator(mode="before")
    @classmethod
    def _infer_api(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        if data.get("api") is None:
            data.pop("api", None)
            data["api"] = (
                "v2" if (data.get("org") or data.get("bucket")) and not data.get("database") else "v1"
            )
        if data["api"] == "v1" and not data.get("database"):
            data["database"] = DEFAULT_DATABASE
        return data

    @model_validator(mode="after")
    def _check_target(self) -> InfluxConfig:
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"url must be http(s)://host[:port], got {self.url!r}")
        if self.api == "v2" and not self.bucket:
            raise ValueError("api v2 needs a bucket (--influx-bucket)")
        return self

    def token(self) -> str | None:
        """The API token from the environment (never stored, never logged)."""
        value = os.environ.get(self.token_env) if self.token_env else None
        return value or None

    def password(self) -> str | None:
        value = os.environ.get(self.password_env) if self.password_env else None
        return value or None

    def describe(self) -> dict[str, Any]:
        """Where points go, for logs and the spool's target.json: no secrets."""
        out: dict[str, Any] = {"url": self.url, "api": self.api}
        if self.api == "v1":
            out["database"] = self.database
        else:
            out["org"] = self.org
            out["bucket"] = self.bucket
        return out


_OVERRIDES: tuple[tuple[str, str], ...] = (
    ("influx_api", "api"),
    ("influx_db", "database"),
    ("influx_org", "org"),
    ("influx_bucket", "bucket"),
    ("influx_token_env", "token_env"),
    ("influx_user", "username"),
    ("influx_password_env", "password_env"),
    ("influx_batch_size", "batch_size"),
    ("influx_flush_interval", "flush_interval_s"),
    ("influx_max_retries", "max_retries"),
    ("influx_max_retry_time", "max_retry_time_s"),
    ("influx_timeout", "timeout_s"),
)


def add_influx_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``--influx*`` options (all default to None so a scenario's values show through)."""
    g = parser.add_argument_group("InfluxDB")
    g.add_argument(
        "--influx", metavar="URL", default=None, help="write to InfluxDB at URL (?db= or ?org=&bucket=)"
    )
    g.add_argument("--influx-api", choices=["v1", "v2"], default=None, help="write API (default: inferred)")
    g.add_argument("--influx-db", metavar="NAME", default=None, help="v1 database (default llmload)")
    g.add_argument("--influx-org", metavar="ORG", default=None, help="v2 organisation")
    g.add_argument("--influx-bucket", metavar="BUCKET", default=None, help="v2 bucket")
    g.add_argument(
        "--influx-token-env", metavar="VAR", default=None, help="env var with the token (INFLUX_TOKEN)"
    )
    g.add_argument("--influx-user", metavar="USER", default=None, help="v1 basic-auth user")
    g.add_argument(
        "--influx-password-env",
        metavar="VAR",
        default=None,
        help="env var with the v1 password (INFLUX_PASSWORD)",
    )
    g.add_argument("--influx-batch-size", type=int, metavar="N", default=None, help="points per write (5000)")
    g.add_argument(
        "--influx-flush-interval", type=float, metavar="S", default=None, help="flush interval (1.0)"
    )
    g.add_argument("--influx-max-retries", type=int, metavar="N", default=None, help="retries per batch (3)")
    g.add_argument(
        "--influx-max-retry-time", type=float, metavar="S", default=None, help="retry time cap (10)"
    )
    g.add_argument("--influx-timeout", type=float, metavar="S", default=None, help="HTTP timeout (5)")


def split_url(url: str) -> tuple[str, dict[str, str]]:
    """``http://h:8086?db=x`` -> (``http://h:8086``, {"database": "x"})."""
    parts = urlsplit(url)
    found: dict[str, str] = {}
    for key, value in parse_qsl(parts.query):
        if key in ("db", "database"):
            found["database"] = value
        elif key in ("org", "bucket"):
            found[key] = value
    base = urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/"), "", ""))
    return base, found


def influx_config_from_args(ns: argparse.Namespace, base: InfluxConfig | None = None) -> InfluxConfig | None:
    """The effective config: the scenario's ``base`` overridden by the options given.

    Returns None when neither a base nor ``--influx`` is given. Raises ``ValueError``
    (pydantic's ValidationError is one) on invalid values.
    """
    url = getattr(ns, "influx", None)
    if base is None and not url:
        return None
    data: dict[str, Any] = base.model_dump(exclude_unset=True) if base is not None else {}
    if base is not None and "url" not in data:
        data["url"] = base.url
    if url:
        data["url"], from_url = split_url(url)
        if from_url:
            for key in ("database", "org", "bucket"):
                data.pop(key, None)
            data.pop("api", None)
            data.update(from_url)
    explicit = {field: getattr(ns, opt) for opt, field in _OVERRIDES if getattr(ns, opt, None) is not None}
    if {"database", "org", "bucket"} & explicit.keys() and "api" not in explicit:
        data.pop("api", None)
    data.update(explicit)
    return InfluxConfig.model_validate(data)
