"""A connection socket that asks the kernel when each read's bytes arrived (receive stamps).

On plain-HTTP targets on Linux each body read is a ``recvmsg`` with
``SO_TIMESTAMPNS`` set on the socket, and the read is stamped with the kernel's receive time of
(the last segment in) that read, moved onto the client's monotonic clock. A greenlet switch, a
GC pause or another process on the core between the segment's arrival and the read is then not
counted as server latency: it is measured instead, as the client delay of the read (user-space
time minus kernel time, ``ReadStamps``). Checked here with the event loop blocked for 30 ms: the
kernel stamp showed the read 10 ms late that a user-space clock would have called server time.
The connection's socket does this for every read it makes (``StampedSocket``, which
llmload/client/transport.py makes the pool's socket factory), the reads geventhttpclient makes for
the response headers included, so body bytes that came with the headers (a server that sends its
first token with them) keep their arrival time too. The batch reader's reads ask for the same stamp
on the socket itself, in one frame (``read_ready`` in llmload/client/response.py, ``kernel_delay``).
TLS targets (no recvmsg on an SSL socket) and other systems keep the user-space stamp, counted apart
(llmload/measure/stamps.py).

Where the body is read in C (llmload/client/chunked_reader.py), each response's headers are read
alone (``split_headers``): the C reader then takes the body from its first byte.

Its sends are stamped too (``SO_TIMESTAMPING``, software send stamps from the error queue): after each
``sendall``, ``sent_at`` is when the kernel sent its last byte, so a request starts at its send and
not at the client's decision to send it (llmload/client/openai_stream.py).
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
RECV_ANCILLARY = socket.CMSG_SPACE(_TIMESPEC.size) if KERNEL_STAMPS else 0
# A kernel stamp further back than this is not trusted (the wall clock was stepped): user stamp.
_MAX_DELAY_S = 60.0
# Segments that wait in the socket while the client is behind share one stamp: the kernel merges
# them in its receive queue and the merged buffer keeps the newest arrival time. Reading them one
# event at a time (peek, then read up to the first event's end) was tried and measured: it gains
# nothing for that reason, and its extra syscalls made the client fall further behind (ITL error
# p99 at 8,000 chunks/s with both cores busy: 0.05 ms reading whole, 22 ms splitting). Such
# reads are counted instead (coalesced_reads) and flag the ITL (llmload/measure/client_health.py).


# Send stamps (SO_TIMESTAMPING, Linux's Documentation/networking/timestamping.rst): the kernel's
# software stamp of the moment each send's last byte went to the device, read back from the
# socket's error queue, keyed by that byte's offset in the connection (OPT_ID, OPT_ID_TCP: counted
# from 0 as the socket sends), without the data (OPT_TSONLY); RX_FILTER keeps them off the reads.
SO_TIMESTAMPING = 37  # also the ancillary type (SCM_TIMESTAMPING): struct scm_timestamping, ts[0] software
_TX_SOFTWARE = 1 << 1
_SOFTWARE = 1 << 4
_OPT_ID = 1 << 7
_OPT_TSONLY = 1 << 11
_OPT_ID_TCP = 1 << 16
_OPT_RX_FILTER = 1 << 17
SEND_STAMP_FLAGS = (  # the first the kernel takes (OPT_ID_TCP since 6.2, RX_FILTER since 6.12)
    _TX_SOFTWARE | _SOFTWARE | _OPT_ID | _OPT_TSONLY | _OPT_ID_TCP | _OPT_RX_FILTER,
    _TX_SOFTWARE | _SOFTWARE | _OPT_ID | _OPT_TSONLY | _OPT_ID_TCP,
    _TX_SOFTWARE | _SOFTWARE | _OPT_ID | _OPT_TSONLY,
)
# struct sock_extended_err: errno, origin, type, code, pad, info, data (a send stamp's key)
_EXTENDED_ERR = struct.Struct("=IBBBBII")
_EE_ORIGIN_TIMESTAMPING = 4
# room for both messages of a stamp: the scm_timestamping, and the extended error with its offender address
_ERRQUEUE_ANCILLARY = (
    socket.CMSG_SPACE(3 * _TIMESPEC.size) + socket.CMSG_SPACE(_EXTENDED_ERR.size + 32) if KERNEL_STAMPS else 0
)


class StampedSocket(gevent.socket.socket):  # type: ignore[misc]  # gevent ships no types
    """A connection whose every ``recv`` is a ``recvmsg`` that asks for the kernel's receive stamp.

    After each read, ``read_at`` is when it returned (the client's monotonic clock), ``stamp`` when
    its (last) segment arrived on that clock, and ``delay`` the difference: the client delay, or
    None when the kernel gave no stamp (or one past ``_MAX_DELAY_S``) and ``stamp`` is ``read_at``.
    """

    read_at = 0.0
    stamp = 0.0
    delay: float | None = None
    want_send_stamps = False  # ask for send stamps at the first send (TCP takes them once connected)
    send_stamps = False  # the kernel stamps this connection's sends
    sent = 0  # bytes sent on this connection: the next send stamp's key is sent - 1
    # when the kernel sent the last byte given to sendall, on the monotonic clock (None: no stamp)
    sent_at: float | None = None
    split_headers = False  # each response's headers are read apart from its body (``_headers_left``)
    headers_pending = False  # a request was sent and its response's headers are not all read yet
    _tail = b""  # the last bytes of the headers read so far (their end may span two reads)

    def _enable_send_stamps(self) -> None:
        """Ask the kernel to stamp each send, in the first form it takes (it refuses OPT_ID on a TCP
        socket not yet connected); one that takes none leaves this connection's starts user-space."""
        self.want_send_stamps = False
        for flags in SEND_STAMP_FLAGS:
            try:
                self.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPING, flags)
            except OSError:
                continue
            self.send_stamps = True
            return

    def sendall(self, data: bytes, flags: int = 0) -> None:
        if self.want_send_stamps:
            self._enable_send_stamps()
        self.sent_at = None
        self.headers_pending, self._tail = self.split_headers, b""
        super().sendall(data, flags)
        self.sent += len(data)
        if self.send_stamps:
            self.take_send_stamps()

    def take_send_stamps(self) -> None:
        """Read the stamps waiting in the error queue; the last byte's sets ``sent_at``. Called after
        each send and whenever a read wakes to no data: a stamp left waiting makes the socket poll
        as errored, and a reader waiting on it would spin."""
        while True:
            try:
                _data, ancillary, _flags, _addr = self._sock.recvmsg(
                    1, _ERRQUEUE_ANCILLARY, socket.MSG_ERRQUEUE
                )
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # closed meanwhile
                return
            wall_stamp, key = None, None
            for level, kind, payload in ancillary:
                if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPING and len(payload) >= _TIMESPEC.size:
                    sec, nsec = _TIMESPEC.unpack_from(payload)
                    wall_stamp = sec + nsec * 1e-9
                elif len(payload) >= _EXTENDED_ERR.size:  # IP_RECVERR / IPV6_RECVERR
                    err = _EXTENDED_ERR.unpack_from(payload)
                    if err[1] == _EE_ORIGIN_TIMESTAMPING:
                        key = err[6]
            if wall_stamp and key == (self.sent - 1) & 0xFFFFFFFF:
                # the monotonic clock first, then the wall clock (the reverse of a read's): a pause
                # between them can only move the start earlier, so TTFT never reads short of the server's
                t = time.perf_counter()
                ago = time.time() - wall_stamp
                if 0.0 <= ago < _MAX_DELAY_S:
                    self.sent_at = t - ago

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
                if self.headers_pending:
                    bufsize = self._headers_left(bufsize)
                data, ancillary, _flags, _addr = self._sock.recvmsg(bufsize, RECV_ANCILLARY, flags)
                break
            except BlockingIOError:
                if self.timeout == 0.0:
                    raise
                if self.send_stamps:
                    self.take_send_stamps()
                self._wait(self._read_event)
        self._stamp_read(ancillary)
        return data

    def _headers_left(self, bufsize: int) -> int:
        """How much of what waits in the socket is still the response's headers: up to their end (a
        blank line), or all of it. The body's first byte is then the first a body reader reads, at a
        frame's start (llmload/client/chunked_reader.py). One peek a response."""
        peek: bytes = self._sock.recv(bufsize, socket.MSG_PEEK)  # BlockingIOError: nothing yet, as a read
        seen = self._tail + peek
        end = seen.find(b"\r\n\r\n")
        if end < 0:
            self._tail = seen[-3:]
            return len(peek) or bufsize
        self._tail = b""
        return end + 4 - (len(seen) - len(peek))

    def _stamp_read(self, ancillary: list[tuple[int, int, bytes]]) -> None:
        wall = time.time()  # first, then the monotonic clock: a pause between them only makes it late
        t = time.perf_counter()
        self.read_at = self.stamp = t
        self.delay = kernel_delay(ancillary, wall)
        if self.delay is not None:
            self.stamp = t - self.delay


def kernel_delay(ancillary: list[tuple[int, int, bytes]], wall: float) -> float | None:
    """Seconds from the kernel's receive stamp in a read's ``ancillary`` data to ``wall`` (the wall
    clock just after the read, taken before the monotonic one), or None: no stamp, or one past
    ``_MAX_DELAY_S``. Both are wall-clock times: the offset cancels."""
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(payload) >= _TIMESPEC.size:
            sec, nsec = _TIMESPEC.unpack_from(payload)
            delay = wall - (sec + nsec * 1e-9)
            return delay if 0.0 <= delay < _MAX_DELAY_S else None
    return None
