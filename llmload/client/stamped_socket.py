"""A connection socket that asks the kernel when each read's bytes arrived (receive stamps).

On plain-HTTP targets on Linux each body read is a ``recvmsg`` with
``SO_TIMESTAMPNS`` set on the socket, and the read is stamped with the kernel's receive time of
(the last segment in) that read, moved onto the client's monotonic clock. A greenlet switch, a
GC pause or another process on the core between the segment's arrival and the read is then not
counted as server latency: it is measured instead, as the client delay of the read (user-space
time minus kernel time, ``ReadStamps``). Checked here with the event loop blocked for 30 ms: the
kernel stamp showed the read 10 ms late that a user-space clock would have called server time.
The connection's socket does this for every read (``StampedSocket``, which llmload/client/transport.py
makes the pool's socket factory), the reads geventhttpclient makes for the response headers included, so body bytes that came with the headers (a server that
sends its first token with them) keep their arrival time too. TLS targets (no recvmsg on an SSL
socket) and other systems keep the user-space stamp, counted apart (llmload/measure/stamps.py).
"""

from __future__ import annotations

import platform
import socket
import struct
import sys
import time

import gevent

# SO_TIMESTAMPNS is 35 in Linux's asm-generic socket.h, which x86-64 and arm64 use (Python's socket
# module does not name it); SCM_TIMESTAMPNS has the same value, and its data is a struct timespec.
SO_TIMESTAMPNS = 35
KERNEL_STAMPS = sys.platform == "linux" and platform.machine() in ("x86_64", "aarch64", "arm64")
_TIMESPEC = struct.Struct("@qq")
_ANCILLARY = socket.CMSG_SPACE(_TIMESPEC.size) if KERNEL_STAMPS else 0
# A kernel stamp further back than this is not trusted (the wall clock was stepped): user stamp.
_MAX_DELAY_S = 60.0
# Segments that wait in the socket while the client is behind share one stamp: the kernel merges
# them in its receive queue and the merged buffer keeps the newest arrival time. Reading them one
# event at a time (peek, then read up to the first event's end) was tried and measured: it gains
# nothing for that reason, and its extra syscalls made the client fall further behind (ITL error
# p99 at 8,000 chunks/s with both cores busy: 0.05 ms reading whole, 22 ms splitting). Such
# reads are counted instead (coalesced_reads) and flag the ITL (llmload/measure/client_health.py).


class StampedSocket(gevent.socket.socket):  # type: ignore[misc]  # gevent ships no types
    """A connection whose every ``recv`` is a ``recvmsg`` that asks for the kernel's receive stamp.

    After each read, ``read_at`` is when it returned (the client's monotonic clock), ``stamp`` when
    its (last) segment arrived on that clock, and ``delay`` the difference: the client delay, or
    None when the kernel gave no stamp (or one past ``_MAX_DELAY_S``) and ``stamp`` is ``read_at``.
    """

    read_at = 0.0
    stamp = 0.0
    delay: float | None = None

    def recv(self, bufsize: int, flags: int = 0) -> bytes:
        # Wait for the socket first, then read. gevent's recvmsg reads first and waits on EAGAIN,
        # but a stream's next bytes are seldom there yet when it asks: each such read was a wasted
        # syscall and a raised exception (client CPU per chunk 42 -> 35 us at 18,000 chunks/s,
        # bench_stream). The socket is looked up after each wait, as gevent does: a close by another
        # greenlet meanwhile leaves a placeholder whose read raises OSError (EBADF).
        data: bytes
        if self.timeout != 0.0 and self._read_event is not None:  # None: closed, the read raises
            self._wait(self._read_event)
        while True:
            try:
                data, ancillary, _flags, _addr = self._sock.recvmsg(bufsize, _ANCILLARY, flags)
                break
            except BlockingIOError:
                if self.timeout == 0.0:
                    raise
                self._wait(self._read_event)
        wall = time.time()  # first, then the monotonic clock: a pause between them only makes it late
        t = time.perf_counter()
        self.read_at = self.stamp = t
        self.delay = None
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(payload) >= _TIMESPEC.size:
                sec, nsec = _TIMESPEC.unpack_from(payload)
                delay = wall - (sec + nsec * 1e-9)  # both wall clock: the offset cancels
                if 0.0 <= delay < _MAX_DELAY_S:
                    self.stamp, self.delay = t - delay, delay
        return data
