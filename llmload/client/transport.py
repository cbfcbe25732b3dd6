"""The hot-path HTTP transport: a geventhttpclient connection pool per base URL, its sockets stamped.

``send`` makes one request and returns its response once the headers came
(llmload/client/response.py reads the body). Works in any gevent context (geventhttpclient uses
gevent sockets natively), so the Locust users, the benchmarks and the tests share it. No Locust
import.

Plain-HTTP targets on Linux get sockets that ask the kernel for receive and send stamps
(llmload/client/stamped_socket.py), and their bodies are read by the process's batch reader
(llmload/client/batch_reader.py) unless ``batched=False`` (``client.reader: greenlet``), their
chunked framing in C (llmload/client/chunked_reader.py) unless ``framing_in_c=False``. TLS targets
and other systems keep user-space stamps and a greenlet per stream. Waiting for the response headers
keeps one ``gevent.Timeout`` per request.

A connection that waited ``idle_reuse_s`` (``IDLE_REUSE_S``) in the pool is closed, not reused
(``_fresh_after_idle``). uvicorn closes a connection after 5 s idle by default, as vLLM and
Aphrodite run it (``VLLM_HTTP_TIMEOUT_KEEP_ALIVE``, ``APHRODITE_HTTP_TIMEOUT_KEEP_ALIVE``), and a
server whose event loop is busy runs that timer late, on a request that has already arrived unread:
it closes the connection unanswered. ``CI=true make test`` here (2026-12-07) lost 2 of 60 requests
to a CPU Aphrodite so, most likely each on a connection idle 5.2 s, closed 0.56 s after the send:
counted ``connect`` failures, an error rate of 3.3% and an SLO missed, on requests the engine never
received.
"""

from __future__ import annotations

import socket
import time
import weakref
from typing import Any

import gevent
from geventhttpclient import HTTPClient
from geventhttpclient.response import HTTPConnectionClosed, HTTPParseError
from geventhttpclient.url import URL

from llmload.client import batch_reader, chunked_reader
from llmload.client.batch_reader import BatchReader
from llmload.client.failures import TIMEOUTS, ConnectFailed, TimedOut
from llmload.client.response import GeventResponse
from llmload.client.stamped_socket import KERNEL_STAMPS, SO_TIMESTAMPNS, StampedSocket
from llmload.measure.stamps import ReadStamps

IDLE_REUSE_S = 3.0  # under uvicorn's 5 s keep-alive, with room for a late client (module docstring)


class GeventTransport:
    """One keep-alive HTTP/1.1 connection pool to one base URL."""

    def __init__(
        self,
        base_url: str,
        *,
        connect_timeout_s: float = 10.0,
        read_timeout_s: float | None = 120.0,
        first_byte_timeout_s: float | None = None,
        concurrency: int = 1,
        block_size: int = 65536,
        client: HTTPClient | None = None,
        stamps: ReadStamps | None = None,
        kernel_stamps: bool = True,
        send_stamps: bool = True,
        batched: bool = True,
        framing_in_c: bool = True,
        idle_reuse_s: float | None = IDLE_REUSE_S,
    ) -> None:
        url = URL(base_url)
        # plain HTTP: the process's batch reader reads the bodies (module docstring); TLS keeps a greenlet
        self._batched = batched and url.scheme == "http" and batch_reader.AVAILABLE
        # The target's read stamps (shared by its transports in one process); kernel stamps where
        # the socket can give them: plain HTTP on Linux (module docstring).
        self.stamps = stamps if stamps is not None else ReadStamps()
        if kernel_stamps and KERNEL_STAMPS and url.scheme == "http" and not self.stamps.refused:
            self.stamps.source = "kernel"
        self.base_path = url.path.rstrip("/") if url.path not in ("", "/") else ""
        self.client = client or HTTPClient.from_url(
            url,
            concurrency=concurrency,
            connection_timeout=connect_timeout_s,
            network_timeout=None,  # reads block; the watchdog enforces read_timeout_s (module docstring)
            headers={},
        )
        if self.stamps.source == "kernel":
            # ConnectionPool's socket factory is its override point; HTTPClient builds the pool
            # itself, so this pool's factory is replaced. A client passed in must be fresh: the
            # connections it already holds would keep user-space stamps.
            setattr(self.client._connection_pool, "_create_tcp_socket", self._new_socket)  # noqa: B010
        if idle_reuse_s is not None:
            _fresh_after_idle(self.client._connection_pool, idle_reuse_s)
        self.read_timeout = read_timeout_s
        # headers and the first token (prefill); read_timeout_s when not given
        self.first_byte_timeout = first_byte_timeout_s if first_byte_timeout_s is not None else read_timeout_s
        self._block = block_size
        self._send_stamps = send_stamps  # False: requests start on the client's clock (bench_stream compares)
        # chunked bodies read in C (chunked_reader.py); False: in Python (bench_readpath.py compares)
        self._framing_in_c = self._batched and framing_in_c and chunked_reader.AVAILABLE

    def send(self, method: str, path: str, headers: dict[str, str], body: bytes) -> GeventResponse:
        reader = BatchReader.of_hub() if self._batched else None  # this thread's, before and after the wait
        if reader is not None:
            reader.read_now()  # after the last request's bookkeeping (batch_reader.py)
        wait = self.first_byte_timeout
        timer = gevent.Timeout(wait) if wait is not None else None
        if timer is not None:
            timer.start()
        try:
            resp = self.client.request(method, path, body=body, headers=headers)
        except gevent.Timeout as e:
            if e is not timer:
                raise
            raise TimedOut(f"no response headers within {wait:g} s (client.first_byte_timeout)") from None
        except TIMEOUTS as e:
            raise TimedOut(f"no response headers within {wait} s (client.first_byte_timeout)") from e
        except (OSError, HTTPConnectionClosed, HTTPParseError) as e:
            raise ConnectFailed(f"{type(e).__name__}: {e}") from e
        finally:
            if timer is not None:
                timer.close()
        out = GeventResponse(
            resp, self._block, self.read_timeout, self.first_byte_timeout, self.stamps, reader
        )
        sock = resp._sock  # None when the whole response came with the headers (released): not counted
        if isinstance(sock, StampedSocket):
            sock.headers_pending = False  # the headers were read: the body's reads take what comes
            if sock.split_headers and reader is not None:
                out.decoder = chunked_reader.decoder_for(resp)
            if sock.send_stamps:
                if sock.sent_at is None:  # not there at the send (a device that stamps late): read again,
                    sock.take_send_stamps()  # now the headers came, every byte of the request was sent
                out.sent_at = sock.sent_at
        if out.sent_at is not None:
            self.stamps.kernel_sends += 1
        elif sock is not None:
            self.stamps.user_sends += 1
        return out

    def _new_socket(self, family: int, socktype: int, protocol: int) -> StampedSocket:
        """A new connection of a kernel-stamped target: it asks the kernel for receive stamps. A
        socket that refuses turns the target's stamps to user space (its reads then carry none)."""
        sock = StampedSocket(family, socktype, protocol)
        try:
            sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        except OSError:
            self.stamps.source, self.stamps.refused = "user", True
            return sock
        sock.split_headers = self._framing_in_c  # the body's first byte is the C reader's (chunked_reader.py)
        sock.want_send_stamps = self._send_stamps  # refused: its requests' starts stay user-space (counted)
        return sock

    def close(self) -> None:
        self.client.close()


def _fresh_after_idle(pool: Any, idle_s: float) -> None:
    """Make ``pool`` (geventhttpclient's ConnectionPool) hand out no connection that waited ``idle_s``
    or more in it since its last response: that one is closed and its slot freed, and the next
    (older still) or a new connection is taken (module docstring)."""
    get, put = pool.get_socket, pool.return_socket
    since: weakref.WeakKeyDictionary[Any, float] = weakref.WeakKeyDictionary()

    def get_socket() -> Any:
        while True:
            sock = get()
            t = since.pop(sock, None)
            if t is None or time.monotonic() - t < idle_s:
                return sock
            pool.release_socket(sock)

    def return_socket(sock: Any) -> None:
        since[sock] = time.monotonic()
        put(sock)

    pool.get_socket, pool.return_socket = get_socket, return_socket
