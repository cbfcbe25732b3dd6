"""The hot-path HTTP transport: geventhttpclient with a recv-sized body reader.

geventhttpclient parses HTTP (chunked encoding included) in C. Instead of its
``readline`` (which loops over 4 KB recvs) or Locust's ``iter_content(1024)``
(which waits for 1 KB and adds 50-80 ms to TTFT), ``blocks()`` returns whatever
each ``recv`` delivered, stamped with the time of that read. That is the reader
DESIGN.md recommends: exact stamps, fewer Python calls per chunk.

Works in any gevent context (geventhttpclient uses gevent sockets natively), so
the Locust users, the benchmarks and the tests share it. No Locust import.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import gevent
from geventhttpclient import HTTPClient
from geventhttpclient.response import HTTPConnectionClosed, HTTPParseError, HTTPSocketPoolResponse
from geventhttpclient.url import URL

from llmload.openai_stream import ConnectFailed, TimedOut

_TIMEOUTS = (socket.timeout, gevent.Timeout, TimeoutError)


class GeventResponse:
    def __init__(self, resp: HTTPSocketPoolResponse, block_size: int) -> None:
        self._resp = resp
        self.status = resp.status_code
        self._block = block_size

    def blocks(self) -> Iterator[tuple[float, bytes]]:
        resp = self._resp
        clock = time.perf_counter
        buf = resp._body_buffer
        if buf:
            data = bytes(buf)
            del buf[:]
            yield clock(), data
        while not resp.message_complete:
            sock = resp._sock
            if sock is None:
                return
            try:
                data = sock.recv(self._block)
            except _TIMEOUTS as e:
                raise TimedOut(f"no data for {sock.gettimeout()} s mid-stream") from e
            except OSError as e:
                raise ConnectFailed(str(e)) from e
            t = clock()
            if not data:
                # Peer closed: let the parser know (a close-delimited body ends here).
                try:
                    resp.feed(b"")
                except HTTPParseError:
                    pass
                if buf:
                    out = bytes(buf)
                    del buf[:]
                    yield t, out
                if not resp.message_complete:
                    raise ConnectFailed("connection closed by the server before the body ended")
                return
            try:
                resp.feed(data)
            except HTTPParseError as e:
                raise ConnectFailed(f"bad HTTP framing: {e}") from e
            if buf:
                out = bytes(buf)
                del buf[:]
                yield t, out

    def read_body(self, limit: int = 65536) -> bytes:
        out = bytearray()
        for _, data in self.blocks():
            out += data
            if len(out) >= limit:
                break
        return bytes(out[:limit])

    def close(self, complete: bool) -> None:
        resp = self._resp
        if resp.message_complete:
            resp.release()
            return
        # Unread body left on the socket: never return it to the pool.
        pool, sock = resp._pool, resp._sock
        resp._sock = None
        resp._pool = None
        if pool is not None and sock is not None:
            pool.release_socket(sock)


class GeventTransport:
    """One keep-alive HTTP/1.1 connection pool to one base URL."""

    def __init__(
        self,
        base_url: str,
        *,
        connect_timeout_s: float = 10.0,
        read_timeout_s: float = 120.0,
        concurrency: int = 1,
        block_size: int = 65536,
        client: HTTPClient | None = None,
    ) -> None:
        url = URL(base_url)
        self.base_path = url.path.rstrip("/") if url.path not in ("", "/") else ""
        self.client = client or HTTPClient.from_url(
            url,
            concurrency=concurrency,
            connection_timeout=connect_timeout_s,
            network_timeout=read_timeout_s,
            headers={},
        )
        self._block = block_size

    def send(self, method: str, path: str, headers: dict[str, str], body: bytes) -> GeventResponse:
        try:
            resp = self.client.request(method, path, body=body, headers=headers)
        except _TIMEOUTS as e:
            raise TimedOut(
                f"no response headers within {self.client._connection_pool.network_timeout} s"
            ) from e
        except (OSError, HTTPConnectionClosed, HTTPParseError) as e:
            raise ConnectFailed(f"{type(e).__name__}: {e}") from e
        return GeventResponse(resp, self._block)

    def close(self) -> None:
        self.client.close()
