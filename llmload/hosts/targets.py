"""Target lifecycle: start simulated engines, wait until every target is ready.

Readiness is what real engines need (vLLM and Aphrodite refuse connections while
loading): /health answers 200, then the configured model appears in /v1/models.
httpx is fine here (control plane, not the hot path).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from llmload.config.resolved import SimAddress
from llmload.config.scenario import Scenario
from llmload.config.target_spec import Target
from llmload.config.yamlsrc import InputError
from llmload.sim.process import WILDCARDS, SimProcess, SimStartError


class TargetNotReady(InputError):
    """A target did not become ready in time (exit code 2)."""


def _bracket(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def rehome(url: str, host: str) -> str:
    """``url`` with its host replaced: a worker reaches the master's simulator at its --master-host."""
    from urllib.parse import urlsplit, urlunsplit

    u = urlsplit(url)
    netloc = _bracket(host) + (f":{u.port}" if u.port else "")
    return urlunsplit((u.scheme, netloc, u.path, u.query, u.fragment))


@dataclass
class Prepared:
    """The simulators llmload started for a run, one per sim target that names no base_url."""

    sims: list[SimProcess] = field(default_factory=list)

    def addresses(self) -> dict[str, SimAddress]:
        return {s.name: SimAddress(s.base_url) for s in self.sims}

    def stop(self, timeout_s: float = 5.0) -> None:
        for s in self.sims:
            s.close(timeout_s)


def start_sims(
    scenario: Scenario, log_dir: Path | None = None, timeout_s: float = 20.0, host: str = "127.0.0.1"
) -> Prepared:
    """Start one simulator process per sim target that has no base_url, listening on ``host``."""
    listen = "0.0.0.0" if host in WILDCARDS else host
    prepared = Prepared()
    log_dir = log_dir or Path(tempfile.mkdtemp(prefix="llmload-sim-"))
    log_dir.mkdir(parents=True, exist_ok=True)
    try:
        for t in scenario.targets:
            if t.kind != "sim" or t.base_url is not None or t.sim is None:
                continue
            args: list[str] = []
            if isinstance(t.sim.profile, dict):
                args += ["--profile-json", json.dumps(t.sim.profile)]
            else:
                args += ["--profile", t.sim.profile]
            if t.model:
                args += ["--model", t.model]
            if t.sim.dialect:
                args += ["--dialect", t.sim.dialect]
            seed = t.sim.seed if t.sim.seed is not None else scenario.workload.seed
            args += ["--seed", str(seed)]
            sp = SimProcess(
                args,
                host=listen,
                name=t.name,
                log_path=log_dir / f"sim-{t.name}.log",
                tied=True,
                start_timeout_s=timeout_s,
            )
            try:
                sp.start()
            except SimStartError as e:
                raise TargetNotReady(f"target {t.name}: {e}") from None
            prepared.sims.append(sp)
    except BaseException:
        prepared.stop()
        raise
    return prepared


def wait_ready(
    targets: list[Target],
    timeout_s: float = 600.0,
    env: dict[str, str] | None = None,
    say: Callable[[str], None] | None = None,
    every_s: float = 5.0,
) -> dict[str, str]:
    """Wait for /health == 200 and the model in /v1/models, for every target.

    Returns the model of each target that names none: the first one its server lists.

    Says what it waits for every ``every_s`` seconds (``say``: one line to stderr by default). A
    server whose /v1/models answers without the configured model fails at once, naming what it
    serves: that is a wrong name, not a model still loading (vLLM and Aphrodite refuse connections
    until the model is loaded).
    """
    env = env if env is not None else dict(os.environ)
    say = say or (lambda line: print(line, file=sys.stderr, flush=True))
    t0 = time.monotonic()
    deadline = t0 + timeout_s
    next_say = t0 + every_s
    defaults: dict[str, str] = {}
    with httpx.Client(timeout=5.0) as client:
        for t in targets:
            if t.base_url is None:  # a sim target whose simulator was not started: nothing to wait for
                continue
            base = t.base_url.rstrip("/")
            headers = {}
            if t.api_key_env and env.get(t.api_key_env):
                headers["Authorization"] = f"Bearer {env[t.api_key_env]}"
            while True:
                served, last = _probe(client, t, base, headers)
                if served is not None:
                    if t.model is None:
                        defaults[t.name] = served
                    break
                now = time.monotonic()
                if now > deadline:
                    raise TargetNotReady(
                        f"target {t.name} ({base}) not ready after {timeout_s:g} s "
                        f"(client.ready_timeout): {last}"
                    )
                if now >= next_say:
                    say(
                        f"llmload: waiting for target {t.name} at {base}: {last} "
                        f"({now - t0:.0f} s of {timeout_s:g} s, client.ready_timeout)"
                    )
                    next_say = now + every_s
                time.sleep(0.25)
    return defaults


def _probe(client: httpx.Client, t: Target, base: str, headers: dict[str, str]) -> tuple[str | None, str]:
    """One look at a target: (the model it serves for this target, or None; what it answered)."""
    try:
        r = client.get(base + "/health", headers=headers)
        if r.status_code not in (200, 404):  # some servers have no /health
            return None, f"/health answered HTTP {r.status_code}"
        m = client.get(base + "/v1/models", headers=headers)
        if m.status_code != 200:
            return None, f"/v1/models answered HTTP {m.status_code}"
        ids = [str(d.get("id")) for d in m.json().get("data", []) if isinstance(d, dict)]
    except httpx.HTTPError as e:
        return None, _http_error(e)
    except ValueError:
        return None, "/v1/models did not return JSON"
    if t.model is None and ids:
        return ids[0], ""
    if t.model is not None and t.model in ids:
        return t.model, ""
    if ids:
        raise TargetNotReady(
            f"target {t.name} ({base}): model {t.model!r} is not served (it serves: {', '.join(ids)})"
        )
    return None, "/v1/models lists no model yet"


def _http_error(e: httpx.HTTPError) -> str:
    if isinstance(e, httpx.ConnectError):
        return "connection refused" if "refused" in str(e).lower() else f"cannot connect ({e})"
    if isinstance(e, httpx.TimeoutException):
        return "no answer within 5 s"
    return type(e).__name__
