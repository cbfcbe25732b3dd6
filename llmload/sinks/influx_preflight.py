"""Preflight: is the InfluxDB destination there, which server is it, and does the v2 bucket exist?

Checked once when a run (or the collector) starts, with influxdb-client's management API -- the
work that library does well -- so a wrong URL or bucket shows up in the first second, not as a
spool full of points after the run. The write path stays llmload's own (influx_write.py; why:
docs/telemetry.md). The check never stops a run: what it finds is a terminal line, an event and
``run.influx.preflight`` in summary.json, and the writer spools as always.

    result = check(config)                      # at most ``timeout_s`` (2 s) of network time
    print(result.line(config, spool_dir))       # InfluxDB http://h:8086 (v1, database llmload): ...
    summary["run"]["influx"]["preflight"] = result.model_dump()

What influxdb-client 1.50 does, read from its source and tried against the servers here:

* ``version()`` is ``GET /ping``: it returns the ``X-Influxdb-Version`` header, or ``"unknown"``
  when there is none (VictoriaMetrics answers 204 without it). Unlike ``ping()``, which turns every
  error into ``False``, it raises -- urllib3's ``NewConnectionError`` (cause ConnectionRefusedError),
  a timeout, or ``ApiException`` on a non-2xx answer -- so the reason can be shown.
* ``buckets_api().find_buckets(name=, org=)`` is ``GET /api/v2/buckets?name=&org=``. InfluxDB 2.x
  answers 200 with the buckets the token may read (empty when none matches), or 404 with JSON
  ``{"code": "not found", "message": "organization name \\"o\\" not found"}``. Servers without the
  v2 management API answer something else: InfluxDB 1.6.7 a text/plain 404 "404 page not found",
  VictoriaMetrics a 400 "unsupported path requested"; there the bucket is "not checked".
  (``find_bucket_by_name`` cannot filter by org, hence ``find_buckets``.)
* The client makes no retries (``retries=False``) and takes the timeout in milliseconds, as
  urllib3's total time of one request. Nothing here starts a thread: no WriteApi, no async
  request; the client is closed before returning. Under gevent monkey-patching urllib3's sockets
  are cooperative, so the load generator's event loop keeps turning during the check.

The token comes from the environment (``InfluxConfig.token()``) and goes only into the request's
header; every text this module returns has it masked, should a server echo it.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict

from llmload.config.influx_config import InfluxConfig
from llmload.config.secrets import Masker

if TYPE_CHECKING:
    from influxdb_client.client.influxdb_client import InfluxDBClient

TIMEOUT_S = 2.0  # the longest a run start waits on an InfluxDB that does not answer

BucketState = Literal["found", "missing", "not checked"]


class Preflight(BaseModel):
    """What the check found: summary.json's ``run.influx.preflight``."""

    model_config = ConfigDict(extra="forbid")

    reachable: bool  # /ping answered 2xx
    server_version: str | None  # its X-Influxdb-Version header; None when it sent none
    bucket: BucketState  # v2 only; "not checked" on v1, or with no v2 management API
    detail: str  # one sentence: why unreachable, or what the bucket check found

    @property
    def ok(self) -> bool:
        return self.reachable and self.bucket != "missing"

    def line(self, config: InfluxConfig, spool_dir: Path | str) -> str:
        """The terminal line: ``InfluxDB URL (v1, database llmload): reachable, InfluxDB 1.6.7``."""
        if config.api == "v1":
            where = f"v1, database {config.database}"
        else:
            where = f"v2, org {config.org or '-'}, bucket {config.bucket}"
        head = f"InfluxDB {config.url} ({where})"
        if not self.reachable:
            return f"{head}: unreachable ({self.detail}); points will be spooled to {spool_dir}"
        server = (
            f"InfluxDB {self.server_version}"
            if self.server_version
            else "server version unknown (no X-Influxdb-Version header)"
        )
        text = f"{head}: reachable, {server}"
        if config.api == "v2":
            text += f"; {self.detail}"
        if self.bucket == "missing":
            text += f"; writes will fail and be spooled to {spool_dir}"
        return text


def check(config: InfluxConfig, timeout_s: float = TIMEOUT_S) -> Preflight:
    """Ask the server who it is and, on the v2 API, whether the bucket exists; never raises."""
    # 0.3 s to import (the package loads all its models): only when a destination is set
    from influxdb_client.client.influxdb_client import InfluxDBClient

    token = config.token()
    mask = Masker([token] if token else [])
    timeout_s = min(timeout_s, config.timeout_s)
    deadline = time.monotonic() + timeout_s
    client = InfluxDBClient(url=config.url, token=token or "", org=config.org or "", timeout=timeout_s * 1000)
    try:
        try:
            version = client.version()
        except Exception as exc:  # noqa: BLE001 - any failure here means "not reachable", with its reason
            return Preflight(
                reachable=False,
                server_version=None,
                bucket="not checked",
                detail=str(mask(_reason(exc, timeout_s))),
            )
        server_version = None if version == "unknown" else version
        if config.api == "v1":
            state: BucketState = "not checked"
            detail = f"v1 API: database '{config.database}' not checked (influxdb-client manages v2 only)"
        else:
            remaining_ms = (deadline - time.monotonic()) * 1000
            state, detail = _bucket(client, config, remaining_ms, timeout_s)
        return Preflight(
            reachable=True, server_version=server_version, bucket=state, detail=str(mask(detail))
        )
    finally:
        client.close()  # type: ignore[no-untyped-call]  # influxdb-client's close() has no annotations


def _bucket(
    client: InfluxDBClient, config: InfluxConfig, remaining_ms: float, timeout_s: float
) -> tuple[BucketState, str]:
    from influxdb_client.rest import ApiException

    bucket, org = config.bucket, config.org
    in_org = f"org '{org}'" if org else "any org the token may read"
    if remaining_ms < 50:
        return "not checked", f"bucket not checked: the {timeout_s:g} s preflight budget was spent"
    query: dict[str, Any] = {"name": bucket, "_request_timeout": remaining_ms}
    if org:
        query["org"] = org
    try:
        found = client.buckets_api().find_buckets(**query)  # type: ignore[no-untyped-call]  # not annotated
    except ApiException as exc:
        status = int(exc.status or 0)
        message = _influx_message(exc.body)
        if status in (401, 403):
            return "not checked", (
                f"bucket not checked: listing buckets answered HTTP {status} "
                f"(${config.token_env} unset, or a token that may only write)"
            )
        if status == 404 and message is not None:  # InfluxDB 2.x's own "not found": the org
            return "missing", f"bucket '{bucket}' not found in {in_org}: {message}"
        return "not checked", (
            f"bucket not checked (no v2 management API at {config.url}: "
            f"/api/v2/buckets answered HTTP {status})"
        )
    except Exception as exc:  # noqa: BLE001 - the check must never stop a run
        return "not checked", f"bucket not checked: {_reason(exc, timeout_s)}"
    names = {b.name for b in (found.buckets or [])}
    if bucket in names:
        return "found", f"bucket '{bucket}' found in {in_org}"
    return "missing", f"bucket '{bucket}' not found in {in_org} (or this token may not read it)"


def _influx_message(body: Any) -> str | None:
    """InfluxDB 2.x's error text from a JSON ``{"code", "message"}`` body; None for anything else."""
    try:
        data = json.loads(body)
    except (TypeError, ValueError):
        return None
    if isinstance(data, dict) and isinstance(data.get("code"), str) and isinstance(data.get("message"), str):
        return str(data["message"])
    return None


def _reason(exc: BaseException, timeout_s: float) -> str:
    """Why a request failed, from the innermost builtin error: ``ConnectionRefusedError: ...``."""
    chain: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and cur not in chain:
        chain.append(cur)
        cur = cur.__cause__ or cur.__context__
    if any(
        isinstance(e, TimeoutError) for e in chain
    ):  # socket.timeout, under urllib3's Read/ConnectTimeoutError
        return f"no answer within {timeout_s:g} s"
    builtin = [e for e in chain if type(e).__module__ == "builtins"]
    root = builtin[-1] if builtin else chain[-1]
    status = getattr(root, "status", None)
    if status is not None:  # ApiException: /ping answered, but not 2xx (no InfluxDB there)
        return f"/ping answered HTTP {status}: not an InfluxDB server?"
    return f"{type(root).__name__}: {root}"
