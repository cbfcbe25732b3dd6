"""A small HTTP/1.1 server protocol on asyncio: keep-alive, pipelining, chunked streaming responses.

One :class:`HttpProtocol` per connection.  It parses a request (Content-Length bodies only), hands it
to the application's handler and holds further requests on that connection until the response is
finished, so an application can answer later (a stream, or a body that waits for the engine).
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from dataclasses import dataclass
from email.utils import formatdate

from llmload.sim.arrival import StampedReader

MAX_HEAD = 64 * 1024
MAX_BODY = 32 * 1024 * 1024
_REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    411: "Length Required",
    413: "Payload Too Large",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


@dataclass
class HttpRequest:
    method: str
    path: str
    headers: dict[str, str]  # lower-cased names
    body: bytes
    arrived: float = 0.0  # when its last bytes reached the server, on the loop's clock (sim/arrival.py)


Handler = Callable[[HttpRequest, "HttpProtocol"], None]


class HttpProtocol(asyncio.Protocol):
    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.busy = False  # a response is in progress
        self.keep_alive = True
        self.closed = False
        self.paused = False  # the client reads slower than we write
        self.on_disconnect: Callable[[], None] | None = None
        self.on_resume: Callable[[], None] | None = None
        self._continued = False  # "100 Continue" already sent for the request being received
        self.registry: set[HttpProtocol] | None = None  # the server's open connections
        self.arrived = 0.0  # the latest read's arrival (loop clock): a kernel stamp where there is one
        self._reader = StampedReader(self._stamped_data, self._peer_closed, self._read_failed)

    # -- asyncio callbacks ----------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        if self.registry is not None:
            self.registry.add(self)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
        self._reader.start(transport)

    def data_received(self, data: bytes) -> None:
        """A read by the transport (no kernel stamps here): stamped when it is handled."""
        self._stamped_data(data, asyncio.get_running_loop().time())

    def _stamped_data(self, data: bytes, arrived: float) -> None:
        if self.closed:
            return
        self.arrived = arrived
        self.buf += data
        if not self.busy:
            self._process()

    def _peer_closed(self) -> None:
        """The client closed its side: as asyncio does for a protocol without eof_received, close."""
        if self.transport is not None:
            self.transport.close()

    def _read_failed(self, _exc: OSError) -> None:
        if self.transport is not None:
            self.transport.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._reader.stop()
        if self.registry is not None:
            self.registry.discard(self)
        cb, self.on_disconnect = self.on_disconnect, None
        if cb is not None:
            cb()

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        if self.on_resume is not None:
            self.on_resume()

    # -- parsing --------------------------------------------------------------------------------
    def _process(self) -> None:
        while not self.busy and not self.closed and self.buf:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                if len(self.buf) > MAX_HEAD:
                    self._fail(431, b"request head too large")
                return
            head = bytes(self.buf[:end]).decode("latin-1")
            lines = head.split("\r\n")
            parts = lines[0].split(" ")
            if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
                self._fail(400, b"malformed request line")
                return
            method, path, version = parts
            headers: dict[str, str] = {}
            for line in lines[1:]:
                name, sep, value = line.partition(":")
                if not sep:
                    self._fail(400, b"malformed header line")
                    return
                headers[name.strip().lower()] = value.strip()
            if "chunked" in headers.get("transfer-encoding", "").lower():
                self._fail(411, b"chunked request bodies are not supported; send Content-Length")
                return
            try:
                length = int(headers.get("content-length", "0"))
            except ValueError:
                self._fail(400, b"bad Content-Length")
                return
            if length < 0 or length > MAX_BODY:
                self._fail(413, b"body too large")
                return
            if len(self.buf) < end + 4 + length:
                if headers.get("expect", "").lower() == "100-continue" and not self._continued:
                    self._continued = True
                    assert self.transport is not None
                    self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")
                return
            self._continued = False
            body = bytes(self.buf[end + 4 : end + 4 + length])
            del self.buf[: end + 4 + length]
            conn = headers.get("connection", "").lower()
            self.keep_alive = conn != "close" if version == "HTTP/1.1" else conn == "keep-alive"
            self.busy = True
            self.handler(HttpRequest(method, path.split("?", 1)[0], headers, body, self.arrived), self)

    def _fail(self, status: int, message: bytes) -> None:
        self.keep_alive = False
        self.busy = True
        self.respond(status, message, "text/plain")

    # -- responses ------------------------------------------------------------------------------
    def _head(self, status: int, content_type: str, extra: str) -> bytes:
        conn = "keep-alive" if self.keep_alive else "close"
        return (
            f"HTTP/1.1 {status} {_REASONS.get(status, 'Unknown')}\r\n"
            f"date: {formatdate(usegmt=True)}\r\nserver: llmload-sim\r\n"
            f"content-type: {content_type}\r\nconnection: {conn}\r\n{extra}\r\n"
        ).encode("latin-1")

    def respond(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        """A whole response; then the connection serves its next request (or closes)."""
        if self.transport is not None and not self.closed:
            self.transport.write(self._head(status, content_type, f"content-length: {len(body)}\r\n") + body)
        self._finish()

    def start_stream(self, status: int = 200, content_type: str = "text/event-stream; charset=utf-8") -> None:
        if self.transport is not None and not self.closed:
            self.transport.write(self._head(status, content_type, "transfer-encoding: chunked\r\n"))

    def send(self, data: bytes) -> None:
        """One chunk of a streamed response."""
        if self.transport is not None and not self.closed and data:
            self.transport.write(b"%x\r\n%b\r\n" % (len(data), data))

    def end_stream(self, last: bytes = b"") -> None:
        if self.transport is not None and not self.closed:
            tail = b"%x\r\n%b\r\n0\r\n\r\n" % (len(last), last) if last else b"0\r\n\r\n"
            self.transport.write(tail)
        self._finish()

    def _finish(self) -> None:
        self.busy = False
        self.on_disconnect = None
        self.on_resume = None
        if self.transport is None or self.closed:
            return
        if not self.keep_alive:
            self.transport.close()
        elif self.buf:
            asyncio.get_running_loop().call_soon(self._process)
