"""The hot-path HTTP transport: geventhttpclient with a recv-sized body reader.

geventhttpclient parses HTTP (chunked encoding included) in C. Instead of its
``readline`` (which loops over 4 KB recvs) or Locust's ``iter_content(1024)``
(which waits for 1 KB and adds 50-80 ms to TTFT), ``blocks()`` returns whatever
each ``recv`` delivered, stamped with the time of that read. That is the reader
DESIGN.md recommends: exact stamps, fewer Python calls per chunk.

Works in any gevent context (geventhttpclient uses gevent sockets natively), so
the Locust users, the benchmarks and the tests share it. No Locust import.

Receive stamps: on plain-HTTP targets on Linux each read carries the kernel's receive time
(llmload/client/stamped_socket.py); TLS targets and other systems keep the user-space stamp, counted apart
(llmload/measure/stamps.py).

Read timeouts: a socket timeout makes gevent create and cancel a timer for every
``recv`` (~18% of the client's CPU at 150 streams, and a fatter p99). Instead the
sockets block without a timeout, each read stamps the stream's last-read time,
and one watchdog greenlet per process shuts down streams that have been silent
longer than their limit (their read then ends as ``TimedOut``). The limit is the
first-byte timeout until the stream client reports the first token (the headers and
a long prefill), the read timeout after it (silence between chunks). Waiting for
the response headers keeps one ``gevent.Timeout`` per request.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from typing import Any

import gevent
from geventhttpclient import HTTPClient
from geventhttpclient.response import HTTPConnectionClosed, HTTPParseError, HTTPSocketPoolResponse
from geventhttpclient.url import URL

from llmload.client.failures import parse_retry_after
from llmload.client.openai_stream import ConnectFailed, TimedOut
from llmload.client.stamped_socket import KERNEL_STAMPS, SO_TIMESTAMPNS, StampedSocket
from llmload.measure.stamps import ReadStamps

_TIMEOUTS = (socket.timeout, gevent.Timeout, TimeoutError)


class _Watchdog:
    """Shuts down streams silent for longer than their read timeout (checked twice a second)."""

    def __init__(self) -> None:
        self.active: dict[int, GeventResponse] = {}
        self._greenlet: gevent.Greenlet | None = None

    def add(self, r: GeventResponse) -> None:
        self.active[id(r)] = r
        if self._greenlet is None or self._greenlet.dead:
            self._greenlet = gevent.spawn(self._loop)

    def remove(self, r: GeventResponse) -> None:
        self.active.pop(id(r), None)

    def _loop(self) -> None:
        while self.active:
            gevent.sleep(0.5)
            now = time.perf_counter()
            for r in list(self.active.values()):
                if r.limit is not None and now - r.last_read > r.limit:
                    r.expire()
        self._greenlet = None


_WATCHDOG = _Watchdog()


class GeventResponse:
    def __init__(
        self,
        resp: HTTPSocketPoolResponse,
        block_size: int,
        read_timeout: float | None = None,
        first_token_timeout: float | None = None,
        stamps: ReadStamps | None = None,
    ) -> None:
        self._resp = resp
        self._stamps = stamps if stamps is not None else ReadStamps()
        self.status = resp.status_code
        self._block = block_size
        self.read_timeout = read_timeout  # silence allowed between chunks, once tokens flow
        # Until the first token: a long prompt's prefill may take far longer than any gap after it.
        self.limit = first_token_timeout if first_token_timeout is not None else read_timeout
        self.waiting_first = True
        self.last_read = time.perf_counter()
        self.timed_out = False
        # The last stamp given, and whether the kernel's: stamps never go back (a late user-space
        # stamp, then an earlier kernel one, keeps the later).
        self._stamp = 0.0
        self._kernel_stamped = False
        # when the kernel sent the request's last byte (the client's monotonic clock), where the
        # connection stamps its sends (stamped_socket.py); None: the request's start stays user-space
        self.sent_at: float | None = None

    @property
    def retry_after_s(self) -> float | None:
        """The Retry-After header in seconds (a delay or an HTTP date), or None (failures.parse_retry_after)."""
        value = self._resp.get("retry-after")
        if isinstance(value, list):  # the header sent more than once: the first counts
            value = value[0] if value else None
        return parse_retry_after(value)

    def token_arrived(self) -> None:
        """The stream client saw the first generated token: from now on, read_timeout applies. The
        read that brought it was the last one given, so its stamp is the TTFT's (counted by source)."""
        self.waiting_first = False
        self.limit = self.read_timeout
        self._stamps.first_tokens += 1
        if not self._kernel_stamped:
            self._stamps.user_first_tokens += 1

    def _silence(self) -> str:
        if self.waiting_first:
            return f"no token within {self.limit:g} s (client.first_byte_timeout)"
        return f"no data for {self.limit:g} s mid-stream (client.read_timeout)"

    def expire(self) -> None:
        """Called by the watchdog: end this stream's blocked read."""
        self.timed_out = True
        sock = self._resp._sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def blocks(self) -> Iterator[tuple[float, bytes]]:
        resp = self._resp
        clock = time.perf_counter
        buf = resp._body_buffer
        if buf:  # read with the headers, inside geventhttpclient: that read's stamp
            data = bytes(buf)
            del buf[:]
            sock = resp._sock  # None when the whole response came with the headers (released)
            stamped = sock if isinstance(sock, StampedSocket) else None
            yield self._stamped(stamped, stamped.read_at if stamped is not None else clock()), data
        if self.limit is not None:
            self.last_read = clock()
            _WATCHDOG.add(self)
        try:
            yield from self._read(resp, buf, clock)
        finally:
            _WATCHDOG.remove(self)

    def _read(
        self, resp: HTTPSocketPoolResponse, buf: bytearray, clock: Any
    ) -> Iterator[tuple[float, bytes]]:
        while not resp.message_complete:
            sock = resp._sock
            if sock is None:
                return
            try:
                data = sock.recv(self._block)
            except _TIMEOUTS as e:
                raise TimedOut(self._silence()) from e
            except OSError as e:
                if self.timed_out:
                    raise TimedOut(self._silence()) from e
                raise ConnectFailed(str(e)) from e
            stamped = sock if isinstance(sock, StampedSocket) else None
            t = stamped.read_at if stamped is not None else clock()
            self.last_read = t
            if self.timed_out:
                raise TimedOut(self._silence())
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
            stamp = self._stamped(stamped, t)
            try:
                resp.feed(data)
            except HTTPParseError as e:
                raise ConnectFailed(f"bad HTTP framing: {e}") from e
            if buf:
                out = bytes(buf)
                del buf[:]
                yield stamp, out

    def _stamped(self, sock: StampedSocket | None, t: float) -> float:
        """The stamp of the read just made (the kernel's where ``sock`` has one, else ``t``), counted
        by source; never before a stamp already given (that one was late)."""
        stamps = self._stamps
        if sock is not None and sock.delay is not None and stamps.source == "kernel":
            stamp, by_kernel = sock.stamp, True
            stamps.kernel_reads += 1
            stamps.delay.record(sock.delay)
        else:
            stamp, by_kernel = t, False
            stamps.user_reads += 1
        if stamp < self._stamp:
            stamp = self._stamp
        self._stamp, self._kernel_stamped = stamp, by_kernel
        return stamp

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
        read_timeout_s: float | None = 120.0,
        first_byte_timeout_s: float | None = None,
        concurrency: int = 1,
        block_size: int = 65536,
        client: HTTPClient | None = None,
        stamps: ReadStamps | None = None,
        kernel_stamps: bool = True,
        send_stamps: bool = True,
    ) -> None:
        url = URL(base_url)
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
        self.read_timeout = read_timeout_s
        # headers and the first token (prefill); read_timeout_s when not given
        self.first_byte_timeout = first_byte_timeout_s if first_byte_timeout_s is not None else read_timeout_s
        self._block = block_size
        self._send_stamps = send_stamps  # False: requests start on the client's clock (bench_stream compares)

    def send(self, method: str, path: str, headers: dict[str, str], body: bytes) -> GeventResponse:
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
        except _TIMEOUTS as e:
            raise TimedOut(f"no response headers within {wait} s (client.first_byte_timeout)") from e
        except (OSError, HTTPConnectionClosed, HTTPParseError) as e:
            raise ConnectFailed(f"{type(e).__name__}: {e}") from e
        finally:
            if timer is not None:
                timer.close()
        out = GeventResponse(resp, self._block, self.read_timeout, self.first_byte_timeout, self.stamps)
        sock = resp._sock  # None when the whole response came with the headers (released): not counted
        if isinstance(sock, StampedSocket) and sock.send_stamps:
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
        sock.want_send_stamps = self._send_stamps  # refused: its requests' starts stay user-space (counted)
        return sock

    def close(self) -> None:
        self.client.close()
