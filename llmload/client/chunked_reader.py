"""The batch reader's reads in C: each ready socket read once, kernel-stamped, its framing taken off.

With the reads in Python, the read path above a bare Python epoll loop cost as much again as the loop
(bench/bench_readpath.py): a ``recvmsg`` call with its ancillary data worked out, the clocks, the
HTTP parser's feed and its buffer, the stamp, four Python frames a read. Here one C call a wake-up
(``_chunked.poll``, llmload/client/_chunked.c) polls the epoll set, reads every ready socket with
its kernel receive stamp (SO_TIMESTAMPNS, as stamped_socket.py asks), takes the HTTP/1.1 chunked
framing off and returns, for each, the read's monotonic time, its client delay and the body bytes
it completed; Python hands them to the stream's consumer (``GeventResponse.took_read``).
bench_readpath.py, 2026-12-08, one client core, medians of 2: the stream client at 10,000 chunks/s
39.4 -> 32.2 us a chunk (user 28.7 -> 22.1), at 25,000 28.4 -> 20.6 (separate runs) and 27.4 -> 24.0
(in one run); a whole ``llmload run`` (bench_ab.py) 34.8 -> 28.6 and 40.8 -> 29.8, and its reads
coalesced 4.1% -> 0.02% at 25,000 (docs/development.md, Benchmarks).

The C reader takes a body from its first byte: the connection's socket reads each response's headers
alone (``StampedSocket.split_headers``: one peek a response finds their end), so geventhttpclient's
parser, which reads the headers, holds none of the body and no chunk state to hand over. Bodies that
are not chunked (a Content-Length, or up to the close), TLS sockets and user-space stamps keep the
Python read (response.py); so does a build without a C compiler (``AVAILABLE``).
"""

from __future__ import annotations

import os
from typing import Any

try:
    from llmload.client import _chunked
except ImportError:  # built without a C compiler (setup.py): the reads stay in Python
    _chunked = None  # type: ignore[assignment]

AVAILABLE = _chunked is not None
BLOCK = 65536  # bytes a read takes at most, as the Python reads (transport.py's block_size)
Read = tuple[int, float, float, bytes, int]  # (fd, monotonic time, client delay or -1, body, code)
# a read's codes (_chunked.c): the body goes on, ended, the peer closed, nothing there (an error-queue
# wake-up), not chunked framing, a socket with no decoder (read in Python); below 0: -errno
MORE, END, EOF, AGAIN, BAD, FOREIGN = 0, 1, 2, 3, 4, 5


def decoder_for(resp: Any) -> Any:
    """A chunked-framing decoder for ``resp`` (geventhttpclient's response, its headers read and
    none of its body), or None: no C reader, a body not chunked, or already complete."""
    if _chunked is None or resp.message_complete or resp._body_buffer:
        return None
    te = resp.get("transfer-encoding")
    if not isinstance(te, str) or te.strip().lower() != "chunked":
        return None
    return _chunked.Decoder()


def poll(epoll: Any, decoders: dict[int, Any]) -> list[Read]:
    """Read every socket of ``epoll`` that is ready now, once: the sockets in ``decoders`` in C, the
    others given back as ``FOREIGN`` (their reader reads them)."""
    return _chunked.poll(epoll.fileno(), decoders, BLOCK)


def failure(code: int) -> str:
    """What a read's failing code says (EOF, BAD, -errno): a ConnectFailed's message."""
    if code == EOF:
        return "connection closed by the server before the body ended"
    if code == BAD:
        return "bad HTTP framing: not a chunked body"
    return os.strerror(-code) if code < 0 else f"read code {code}"
