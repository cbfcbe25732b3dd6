"""When a request's bytes reached the simulator: the kernel's receive stamp of each read.

The simulator's TTFT, E2E and queue histograms count from a request's arrival, as llmload's own
figures count from its send. Stamping the arrival when the event loop got round to parsing the
request left out the time it waited in the socket while the simulator's process was busy (its
steps, another process on the core). Measured with ``make demo`` on a busy 2-core host (40 streams
per target, 2026-12-05): stamped at parse time, llmload's TTFT mean sat 5-19 ms above the
simulator's (+13.5 to +41 %: "differs"); stamped from the kernel's receive time, 1.7-2.2 ms (+3.2 to
+5.1 %), the same offset as E2E's. With ``SO_TIMESTAMPNS`` on the connection, each read is a
``recvmsg`` that returns the kernel's receive time of (the last segment in) that read.

The connection's asyncio transport keeps writing; its reading is paused and a reader on a duplicate
of its descriptor reads instead (``loop.add_reader`` refuses a descriptor a transport owns, and
asyncio's own read path drops the ancillary data). Where the kernel gives no stamps (not Linux, a
socket that refuses the option), the transport reads as before and a read is stamped when it is
handled. llmload/client/stamped_socket.py does the same on the client's side.
"""

from __future__ import annotations

import asyncio
import os
import socket
import struct
import sys
import time
from collections.abc import Callable, Iterable

# SO_TIMESTAMPNS is 35 in Linux's asm-generic socket.h (x86-64, arm64); Python's socket module does
# not name it. Its control message carries a struct timespec of the wall clock.
SO_TIMESTAMPNS = 35
_TIMESPEC = struct.Struct("@qq")
_ANCILLARY = socket.CMSG_SPACE(_TIMESPEC.size) if sys.platform == "linux" else 0
_MAX_DELAY_S = 60.0  # a stamp further back than this is not trusted (the wall clock was stepped)
READ_SIZE = 256 * 1024


def stamp_listeners(socks: Iterable[socket.socket]) -> None:
    """Turn on receive stamps for every connection the listening ``socks`` accept, from their first byte.

    A connection accepted later inherits the option, and the kernel stamps a segment only if some
    socket asked for stamps when it arrived: set on the accepted connection alone, a request that
    arrived before the busy simulator called accept() had no stamp and counted from its parse (seen
    in CI, 2026-12-06: a request that waited 0.3 s read as a 3.7 ms TTFT). Nothing where the kernel
    gives no stamps."""
    for sock in socks:
        if sys.platform != "linux" or sock.family not in (socket.AF_INET, socket.AF_INET6):
            continue
        try:
            sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        except OSError:
            pass


class StampedReader:
    """Reads one connection with receive stamps: ``on_data(bytes, arrived)`` per read, ``arrived``
    on the loop's clock; ``on_eof()`` when the peer closed its side; ``on_error(exc)`` on a failed
    read. ``start`` returns False (and changes nothing) where the kernel gives no stamps."""

    def __init__(
        self,
        on_data: Callable[[bytes, float], None],
        on_eof: Callable[[], None],
        on_error: Callable[[OSError], None],
    ) -> None:
        self.on_data, self.on_eof, self.on_error = on_data, on_eof, on_error
        self._sock: socket.socket | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self, transport: asyncio.Transport) -> bool:
        sock = transport.get_extra_info("socket")
        if sys.platform != "linux" or sock is None or sock.family not in (socket.AF_INET, socket.AF_INET6):
            return False
        try:
            sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
            dup = socket.socket(fileno=os.dup(sock.fileno()))
        except OSError:
            return False
        dup.setblocking(False)
        transport.pause_reading()  # before the transport's reader is added: it never reads
        self._sock, self._loop = dup, asyncio.get_running_loop()
        self._loop.add_reader(dup.fileno(), self._read)
        return True

    def stop(self) -> None:
        """Stop reading and close the duplicate descriptor (the transport closes its own)."""
        if self._sock is not None and self._loop is not None:
            self._loop.remove_reader(self._sock.fileno())
            self._sock.close()
        self._sock = None

    def _read(self) -> None:
        assert self._sock is not None and self._loop is not None
        try:
            data, ancillary, _flags, _addr = self._sock.recvmsg(READ_SIZE, _ANCILLARY)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self.stop()
            self.on_error(exc)
            return
        if not data:
            self.stop()
            self.on_eof()
            return
        wall = time.time()  # first, then the loop's clock: a pause between them only makes it late
        arrived = self._loop.time()
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(payload) >= _TIMESPEC.size:
                sec, nsec = _TIMESPEC.unpack_from(payload)
                delay = wall - (sec + nsec * 1e-9)
                if 0.0 <= delay < _MAX_DELAY_S:
                    arrived -= delay
        self.on_data(data, arrived)
