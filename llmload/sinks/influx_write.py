"""The HTTP write to InfluxDB (v1 ``/write`` and v2 ``/api/v2/write``), with bounded retries.

Written on the standard library's ``http.client`` so it runs the same in a plain thread
(the collector) and in a greenlet under gevent monkey-patching (the load generator), where
the socket is cooperative and a write never blocks the event loop. Why not influxdb-client's
batching WriteApi: see docs/telemetry.md ("Why not influxdb-client") -- in short it builds
its own threads and reactivex timers, formats Point objects far slower than the 100,000
points/s budget, and drops a batch after its retries unless the app catches it; one code
path for both APIs keeps the spool and the retry limits identical.

Secrets: the token and password are read from the environment at write time and go only
into the Authorization header; no error message carries them.
"""

from __future__ import annotations

import base64
import http.client
import random
import time
from collections.abc import Iterator
from urllib.parse import urlencode, urlsplit

from llmload.config.influx_config import InfluxConfig

# Statuses worth retrying: the server is busy or restarting. 4xx (bad data, auth, no such
# database) will not get better by retrying the same body; the batch goes to the spool.
RETRYABLE_STATUS = frozenset({408, 429, 500, 502, 503, 504})
PIECE_BYTES = 64 * 1024  # one send between two turns of the event loop (InfluxWriter._pieces)


class WriteError(Exception):
    """A write that failed; ``retryable`` says whether trying again may help."""

    def __init__(self, message: str, *, retryable: bool, status: int | None = None) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.status = status


class InfluxWriter:
    """Posts line-protocol bodies to one InfluxDB endpoint over a kept-alive connection."""

    def __init__(self, config: InfluxConfig) -> None:
        self.config = config
        parts = urlsplit(config.url)
        self._https = parts.scheme == "https"
        self._host = parts.hostname or "127.0.0.1"
        self._port = parts.port or (443 if self._https else 80)
        base = parts.path.rstrip("/")
        if config.api == "v1":
            query = {"db": config.database or "", "precision": "ns"}
            self.path = f"{base}/write?{urlencode(query)}"
        else:
            query = {"bucket": config.bucket or "", "precision": "ns"}
            if config.org:
                query["org"] = config.org
            self.path = f"{base}/api/v2/write?{urlencode(query)}"
        self.where = f"{config.url} ({config.api})"
        self._conn: http.client.HTTPConnection | None = None
        self.pause_s = 0.0  # between two pieces of a body; the sink sets it (influx._pause_for_loop)

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "text/plain; charset=utf-8"}
        token = self.config.token()
        if token:
            headers["Authorization"] = "Token " + token
        elif self.config.username:
            raw = f"{self.config.username}:{self.config.password() or ''}".encode()
            headers["Authorization"] = "Basic " + base64.b64encode(raw).decode("ascii")
        return headers

    def _connection(self, timeout: float) -> http.client.HTTPConnection:
        if self._conn is None:
            cls = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
            self._conn = cls(self._host, self._port, timeout=timeout)
        else:
            self._conn.timeout = timeout
            if self._conn.sock is not None:
                self._conn.sock.settimeout(timeout)
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except OSError:
                pass
            self._conn = None

    def _pieces(self, body: bytes) -> Iterator[memoryview]:
        """The body in PIECE_BYTES slices, pausing ``pause_s`` between them. Under gevent a socket
        that takes a whole batch at once never yields: sending a 5,000-point batch (1.25 MB) on
        loopback held the event loop 1.6-2.1 ms in one stretch (greenlet switches traced with
        greenlet.settrace, bench_influx's load), the writer's longest after its first connect."""
        view = memoryview(body)
        for i in range(0, len(view), PIECE_BYTES):
            if i:
                time.sleep(self.pause_s)
            yield view[i : i + PIECE_BYTES]

    def post(self, body: bytes, timeout: float | None = None) -> None:
        """One attempt. Raises WriteError on anything but 2xx."""
        timeout = self.config.timeout_s if timeout is None else max(0.05, min(timeout, self.config.timeout_s))
        try:
            conn = self._connection(timeout)
            headers = self._headers()
            headers["Content-Length"] = str(len(body))  # a fixed length, not chunked, for the pieces
            conn.request("POST", self.path, body=self._pieces(body), headers=headers)
            resp = conn.getresponse()
            detail = resp.read(2000)
        except (OSError, http.client.HTTPException) as exc:
            self.close()
            raise WriteError(
                f"cannot write to {self.where}: {type(exc).__name__}: {exc}", retryable=True
            ) from None
        if 200 <= resp.status < 300:
            if resp.will_close:
                self.close()
            return
        if resp.will_close:
            self.close()
        text = detail.decode("utf-8", "replace").strip().replace("\n", " ")[:300]
        raise WriteError(
            f"{self.where} answered HTTP {resp.status}: {text}",
            retryable=resp.status in RETRYABLE_STATUS,
            status=resp.status,
        )

    def write(self, body: bytes, deadline: float | None = None, max_retries: int | None = None) -> None:
        """Post with retries (exponential backoff with jitter), bounded by max_retries,
        max_retry_time_s and the absolute monotonic ``deadline``. Raises the last WriteError."""
        cfg = self.config
        retries = cfg.max_retries if max_retries is None else max_retries
        start = time.monotonic()
        stop_at = start + cfg.max_retry_time_s
        if deadline is not None:
            stop_at = min(stop_at, deadline)
        delay = 0.2
        attempt = 0
        while True:
            remaining = None if deadline is None else deadline - time.monotonic()
            try:
                self.post(body, timeout=remaining)
                return
            except WriteError as exc:
                attempt += 1
                now = time.monotonic()
                if not exc.retryable or attempt > retries or now + delay > stop_at:
                    raise
            time.sleep(delay * (0.5 + random.random() / 2))
            delay = min(delay * 2, 5.0)
