"""Secrets: where they come from, and how no output ever holds one.

Keys and tokens come from the environment (``targets[].api_key_env``, ``influx.token_env``,
``influx.password_env``) or, for headers and engine fields whose names say so, from the scenario
itself. Three guards keep them out of results, logs, InfluxDB and reports:

- ``redact(data)``: the scenario as saved (summary.json, reports) has every such field as ``***``;
- ``Masker(secret_values(scenario))``: any text the tool writes that a server may have filled
  (an error message that echoes the request's Authorization header, say) has every secret value
  replaced by ``***``. Values shorter than 4 characters are left alone: masking them would mangle
  ordinary text and protect nothing.
- ``masked_argv``: the command line kept in summary.json, a secret-named ``--set`` with its value
  ``***`` and every secret value masked.

A text that is kept short (a record's error, 200 characters) is masked *before* it is cut, with
``clip``: cut first, a key longer than the limit (a 164-character ``sk-proj-`` key) or one that
straddles the cut survives as a prefix the mask no longer recognises. What a cut elsewhere may
still leave (a text cut before it reached a Masker) is caught too: a run of 8 or more characters
that starts a secret and ends where a key cannot go on (the text's end, a quote, a space) is
masked as well (issue 30, item 1).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from llmload.config.influx_config import InfluxConfig
from llmload.config.target_spec import Target

SECRET_KEYS = re.compile(r"(authorization|api[-_]?key|token|secret|password|cookie)", re.I)
MASK = "***"
MIN_SECRET_LEN = 4
MIN_PREFIX_LEN = 8  # a secret's first characters that a cut left: masked from this many on
ERROR_CHARS = 200  # the longest server text a record keeps (records' ``error``)
_KEY_CHAR = re.compile(r"[A-Za-z0-9_\-]")  # a character a key may go on with


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


class HasSecrets(Protocol):
    """What secret_values reads of a scenario (config/scenario.py imports this module)."""

    @property
    def targets(self) -> Sequence[Target]: ...

    @property
    def influx(self) -> InfluxConfig | None: ...


def secret_values(scenario: HasSecrets, environ: Mapping[str, str] | None = None) -> list[str]:
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
    """Replaces every secret value in a text by ``***``, longest first, and what a cut left of one.

    The cut-off part: a run of at least ``MIN_PREFIX_LEN`` characters equal to a secret's start,
    which ends at the text's end or before a character no key goes on with (``'``, ``"``, a space,
    ``.``). A run followed by a different key character is another word ("Bearer scheme" against
    the secret "Bearer sk-..."), not a cut key, and stays.
    """

    def __init__(self, secrets: Iterable[str]) -> None:
        values = sorted({s for s in secrets if len(s) >= MIN_SECRET_LEN}, key=len, reverse=True)
        self._pattern = re.compile("|".join(re.escape(s) for s in values)) if values else None
        self._long = [s for s in values if len(s) >= MIN_PREFIX_LEN]

    def __call__(self, text: str | None) -> str | None:
        return None if text is None else self.text(text)

    def text(self, text: str) -> str:
        if self._pattern is None:
            return text
        return self._cut_prefixes(self._pattern.sub(MASK, text))

    def _cut_prefixes(self, text: str) -> str:
        for secret in self._long:
            head = secret[:MIN_PREFIX_LEN]
            i = text.find(head)
            while i != -1:
                j, k = i + MIN_PREFIX_LEN, MIN_PREFIX_LEN
                while j < len(text) and k < len(secret) and text[j] == secret[k]:
                    j, k = j + 1, k + 1
                if j < len(text) and _KEY_CHAR.match(text[j]):
                    i = text.find(head, i + 1)  # another word that starts like the secret
                    continue
                text = text[:i] + MASK + text[j:]
                i = text.find(head, i + len(MASK))
        return text


def clip(text: str, mask: Masker | None = None, limit: int = ERROR_CHARS) -> str:
    """``text`` masked, then cut to ``limit`` characters, then masked again for what the cut left.

    The one way a server's words are shortened for a record, so that no cut comes before the mask.
    """
    if mask is None:
        return text[:limit]
    return mask.text(mask.text(text)[:limit])


# SECRET_KEYS, where a "token" ends the name: ``output_tokens`` is no secret
_SECRET_FIELD = re.compile(r"(authorization|api[-_]?key|token$|secret|password|cookie)", re.I)


def masked_argv(args: list[str], mask: Masker) -> list[str]:
    """The command line as the user gave it (summary.json's ``run.argv``), with no secret: a ``--set``
    of a secret-named field (``targets.a.headers.Authorization=...``, ``...api_key=...``) keeps its
    path and loses its value, and every secret value the run sends is masked wherever else it was
    typed. Without the path of the scenario llmload run handed to Locust (``--llm-run``: a temporary
    file, gone after the run)."""
    out: list[str] = []
    skip = after_set = False
    for a in args:
        if skip or a == "--llm-run":
            skip = not skip
            continue
        if after_set:
            a = _set_masked(a)
        elif a.startswith("--set="):
            a = "--set=" + _set_masked(a[len("--set=") :])
        after_set = a == "--set"
        out.append(mask.text(a))
    return out


def _set_masked(assignment: str) -> str:
    """A ``--set PATH=VALUE``'s text, its value ``***`` where PATH names a secret field."""
    path, eq, _value = assignment.partition("=")
    field = path.rsplit(".", 1)[-1]
    if eq and _SECRET_FIELD.search(field) and not field.endswith("_env"):
        return f"{path}={MASK}"
    return assignment
