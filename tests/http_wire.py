"""Loopback HTTP test servers: gevent's StreamServer on a free port, and the requests that arrive on
a connection."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from gevent.server import StreamServer


@contextmanager
def serving(handle: Callable[..., None]) -> Iterator[str]:
    """``handle(sock, address)`` serving each connection on a free loopback port: its base URL."""
    server = StreamServer(("127.0.0.1", 0), handle)
    server.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.stop(timeout=2)


def after_request(buf: bytes) -> bytes | None:
    """The bytes after the first whole request in ``buf`` (its headers and a Content-Length body),
    or None while it is not all there."""
    head, sep, rest = buf.partition(b"\r\n\r\n")
    if not sep:
        return None
    lengths = (int(x.split(b":")[1]) for x in head.split(b"\r\n") if x.lower().startswith(b"content-length:"))
    length = next(lengths, 0)
    return rest[length:] if len(rest) >= length else None


def requests(sock: socket.socket, before_read: Callable[[bool], bool] | None = None) -> Iterator[None]:
    """Once for each whole request read from ``sock``, until the peer closes it, or ``before_read``
    (asked before each read, with whether part of a request is held) returns False."""
    buf = b""
    while before_read is None or before_read(bool(buf)):
        data = sock.recv(65536)
        if not data:
            return
        buf += data
        while (rest := after_request(buf)) is not None:
            buf = rest
            yield
