"""Secrets: where they come from, and how no output ever holds one.

Keys and tokens come from the environment (``targets[].api_key_env``, ``influx.token_env``,
``influx.password_env``) or, for headers and engine fields whose names say so, from the scenario
itself. Two guards keep them out of results, logs, InfluxDB and reports:

- ``redact(data)``: the scenario as saved (summary.json, reports) has every such field as ``***``;
- ``Masker(secret_values(scenario))``: any text the tool writes that a server may have filled
  (an error message that echoes the request's Authorization header, say) has every secret value
  replaced by ``***``. Values shorter than 4 characters are left alone: masking them would mangle
  ordinary text and protect nothing.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

SECRET_KEYS = re.compile(r"(authorization|api[-_]?key|token|secret|password|cookie)", re.I)
MASK = "***"
MIN_SECRET_LEN = 4


def redact(obj: Any) -> Any:
    """``obj`` with the string value of every secret-named key (not ``*_env``) replaced by ``***``."""
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            if isinstance(k, str) and SECRET_KEYS.search(k) and not k.endswith("_env") and isinstance(v, str):
                out[k] = MASK
            else:
                out[k] = redact(v)
        return out
    if isinstance(obj, list):
        return [redact(x) for x in obj]
    return obj


def _named_secrets(obj: Any) -> Iterable[str]:
    """The string values of secret-named keys anywhere in ``obj`` (headers, extra_body, ...)."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            if isinstance(k, str) and SECRET_KEYS.search(k) and not k.endswith("_env") and isinstance(v, str):
                yield v
                if k.lower() == "authorization" and " " in v:
                    yield v.split(" ", 1)[1]  # "Bearer KEY": the key alone too
            else:
                yield from _named_secrets(v)
    elif isinstance(obj, list):
        for x in obj:
            yield from _named_secrets(x)


def secret_values(scenario: Any, environ: Mapping[str, str] | None = None) -> list[str]:
    """Every secret value a run may send: API keys from the environment, secret-named header and
    body fields, the InfluxDB token and password."""
    env = os.environ if environ is None else environ
    found: list[str] = []
    for t in scenario.targets:
        if t.api_key_env and env.get(t.api_key_env):
            found.append(env[t.api_key_env])
        found.extend(_named_secrets({"headers": t.headers, "extra_body": t.extra_body}))
    influx = scenario.influx
    for var in (influx.token_env, influx.password_env) if influx is not None else ():
        if var and env.get(var):
            found.append(env[var])
    return found


class Masker:
    """Replaces every secret value in a text by ``***``, longest first."""

    def __init__(self, secrets: Iterable[str]) -> None:
        values = {s for s in secrets if len(s) >= MIN_SECRET_LEN}
        self._pattern = (
            re.compile("|".join(re.escape(s) for s in sorted(values, key=len, reverse=True)))
            if values
            else None
        )

    def __call__(self, text: str | None) -> str | None:
        if text is None or self._pattern is None:
            return text
        return self._pattern.sub(MASK, text)
