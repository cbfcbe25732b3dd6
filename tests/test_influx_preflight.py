"""The InfluxDB preflight (llmload/sinks/influx_preflight.py) against real servers and real sockets.

Whole runs that record it in summary.json are in tests/test_influx_run.py; here the check itself:
InfluxDB 1.6.7 (``influxd``), a listener that never answers (the time bound), and an InfluxDB 2.x
stand-in for the bucket cases, since 2.x cannot be installed here.
"""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from llmload.config.influx_config import InfluxConfig
from llmload.sinks.influx_preflight import check
from tests.servers import influxdb_server

TOKEN = "tok-" + "pr3fl1ght" * 3
V2_VERSION = "v2.7.11"


class _Influx2(BaseHTTPRequestHandler):
    """Answers /ping and /api/v2/buckets the way InfluxDB 2.7 does; nothing else (404 JSON).

    A stand-in because InfluxDB 2.x cannot be installed here. The shapes follow InfluxDB 2's API
    and are the ones influxdb-client 1.50 parses: ``Buckets`` is ``{"links", "buckets"}``, a
    ``Bucket`` must have ``name`` and ``retentionRules`` (influxdb_client/domain/bucket.py raises
    without them); errors are JSON ``{"code", "message"}`` (404 "not found" for an unknown org,
    401 "unauthorized" without a valid token); /ping answers 204 with X-Influxdb-Version and
    X-Influxdb-Build.
    """

    orgs = {"acme": "0000000000000001"}
    buckets = {("acme", "llmload")}

    def log_message(self, *args: object) -> None:
        pass

    def _send(self, status: int, body: dict[str, object] | None = None) -> None:
        data = json.dumps(body).encode() if body is not None else b""
        self.send_response(status)
        self.send_header("X-Influxdb-Build", "OSS")
        self.send_header("X-Influxdb-Version", V2_VERSION)
        if body is not None:
            self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        url = urllib.parse.urlsplit(self.path)
        q = dict(urllib.parse.parse_qsl(url.query))
        if url.path == "/ping":
            return self._send(204)
        if url.path != "/api/v2/buckets":
            return self._send(404, {"code": "not found", "message": "path not found"})
        if self.headers.get("Authorization") != f"Token {TOKEN}":
            return self._send(401, {"code": "unauthorized", "message": "unauthorized access"})
        org = q.get("org")
        if org is not None and org not in self.orgs:
            return self._send(404, {"code": "not found", "message": f'organization name "{org}" not found'})
        found = [
            {
                "id": f"{i + 1:016x}",
                "orgID": self.orgs[o],
                "type": "user",
                "name": b,
                "retentionRules": [
                    {"type": "expire", "everySeconds": 0, "shardGroupDurationSeconds": 604800}
                ],
                "createdAt": "2026-12-01T00:00:00Z",
                "updatedAt": "2026-12-01T00:00:00Z",
                "links": {"self": f"/api/v2/buckets/{i + 1:016x}"},
                "labels": [],
            }
            for i, (o, b) in enumerate(sorted(self.buckets))
            if (org is None or o == org) and q.get("name") in (None, b)
        ]
        return self._send(200, {"links": {"self": self.path}, "buckets": found})


@contextmanager
def influx2_standin() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Influx2)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(
    ("org", "bucket", "state", "said"),
    [
        ("acme", "llmload", "found", "bucket 'llmload' found in org 'acme'"),
        ("acme", "nope", "missing", "bucket 'nope' not found in org 'acme'"),
        ("ghost", "llmload", "missing", 'organization name "ghost" not found'),
    ],
)
def test_v2_bucket_found_or_missing(
    org: str, bucket: str, state: str, said: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("INFLUX_TOKEN", TOKEN)
    with influx2_standin() as url:
        cfg = InfluxConfig(url=url, org=org, bucket=bucket)
        result = check(cfg)
        line = result.line(cfg, "/tmp/spool")
    assert result.reachable and result.server_version == V2_VERSION
    assert result.bucket == state and said in result.detail
    assert line.startswith(
        f"InfluxDB {url} (v2, org {org}, bucket {bucket}): reachable, InfluxDB {V2_VERSION}; "
    )
    assert ("spooled to /tmp/spool" in line) == (state == "missing")  # the warning says what happens
    assert TOKEN not in line + json.dumps(result.model_dump())


def test_v2_without_token_is_not_checked_and_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("INFLUX_TOKEN", raising=False)
    with influx2_standin() as url:
        result = check(InfluxConfig(url=url, org="acme", bucket="llmload"))
    assert result.reachable and result.bucket == "not checked"
    assert "HTTP 401" in result.detail and "$INFLUX_TOKEN" in result.detail


@pytest.mark.integration
def test_influxdb_1x_has_no_v2_management_api(tmp_path: Path) -> None:
    with influxdb_server(tmp_path) as influx:
        version = influx.version()
        v1 = check(InfluxConfig(url=influx.url))
        v2 = check(InfluxConfig(url=influx.url, org="o", bucket="b"))
    assert v1.reachable and v1.server_version == version and v1.bucket == "not checked"
    assert v2.reachable and v2.server_version == version and v2.bucket == "not checked"
    assert v2.detail.startswith(f"bucket not checked (no v2 management API at {influx.url}")


def test_a_server_that_never_answers_costs_the_timeout_and_no_thread() -> None:
    with socket.socket() as listener:  # accepts connections (the kernel's backlog), never answers
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        before = set(threading.enumerate())
        t0 = time.monotonic()
        result = check(InfluxConfig(url=url), timeout_s=1.0)
        took = time.monotonic() - t0
    assert not result.reachable and result.detail == "no answer within 1 s"
    assert 0.9 <= took < 30.0  # the bound (a hang would be far longer; a busy machine only a little)
    left = set(threading.enumerate()) - before
    assert not left, left  # no WriteApi, no async pool left behind
