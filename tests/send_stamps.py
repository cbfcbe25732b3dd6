"""The test server's send stamps: when the kernel sent a chunk's last byte (tests/sse_server.py).

The server stamps each chunk (``x_ts``) just before it writes it, in user space: a pause of its
process between that stamp and the write (this VM's steal time, the scheduler) reads as the client's
error. With ``"send_stamps": true`` in a timed request the connection asks the kernel for software
send stamps (SO_TIMESTAMPING, Linux's Documentation/networking/timestamping.rst, as the client's
llmload/client/stamped_socket.py does for its requests), read back from the socket's error queue and
keyed by the offset of the send's last byte. Each stamp is moved onto the server's monotonic clock
with the wall clock's offset, read between two monotonic reads (the tightest of three), so a pause
between the clock reads is seen and not taken.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Callable

SO_TIMESTAMPING = 37  # also the ancillary type (SCM_TIMESTAMPING); ts[0] is the software stamp
_TX_SOFTWARE, _SOFTWARE, _OPT_ID, _OPT_TSONLY, _OPT_ID_TCP = 1 << 1, 1 << 4, 1 << 7, 1 << 11, 1 << 16
FLAGS = (  # OPT_ID_TCP (Linux 6.2+): keys count the bytes written since the stamps began
    _TX_SOFTWARE | _SOFTWARE | _OPT_ID | _OPT_TSONLY | _OPT_ID_TCP,
    _TX_SOFTWARE | _SOFTWARE | _OPT_ID | _OPT_TSONLY,
)
_TIMESPEC = struct.Struct("@qq")
_EXTENDED_ERR = struct.Struct("=IBBBBII")  # struct sock_extended_err; data is the stamp's key
_ORIGIN_TIMESTAMPING = 4
_ANCILLARY = socket.CMSG_SPACE(3 * _TIMESPEC.size) + socket.CMSG_SPACE(_EXTENDED_ERR.size + 32)
MONO = time.CLOCK_MONOTONIC


def wall_offset() -> float:
    """The wall clock minus the monotonic one, from the tightest of three bracketed reads.

    A kernel stamp is a wall-clock time, placed on a monotonic clock by this offset when it is read,
    so a wall clock stepped between the stamp and its read moves it by the step. A VM catching its
    clock up steps it often: CI once read each of three first chunks 1.44 ms early after 270 ms in
    the socket (a wall clock 0.5% fast), and stepping it here by 44 us every 10 ms did as much. A test
    that holds such a stamp to a monotonic one takes this offset before and after, and allows the
    difference (0 on a steady clock)."""
    best = (float("inf"), 0.0)
    for _ in range(3):
        m1 = time.clock_gettime(MONO)
        w = time.time()
        m2 = time.clock_gettime(MONO)
        best = min(best, (m2 - m1, w - (m1 + m2) / 2))
    return best[1]


class SendStamps:
    """One connection's send stamps."""

    def __init__(self, sock: socket.socket, written: int) -> None:
        self.sock = sock
        self.base = written  # the connection's bytes written before: keys count from there
        self.waiting: dict[int, Callable[[float], None]] = {}

    @classmethod
    def start(cls, sock: socket.socket, written: int) -> SendStamps | None:
        """Ask the kernel to stamp the connection's sends, in the first form it takes (None: none)."""
        for flags in FLAGS:
            try:
                sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPING, flags)
            except OSError:
                continue
            return cls(sock, written)
        return None

    def expect(self, written: int, done: Callable[[float], None]) -> None:
        """Call ``done`` with the monotonic time the kernel sent byte ``written - 1`` of the connection."""
        self.waiting[(written - self.base - 1) & 0xFFFFFFFF] = done

    def take(self) -> None:
        """Read the error queue (a stamp left there makes the socket poll as errored)."""
        offset = None
        while True:
            try:
                _d, ancillary, _f, _a = self.sock.recvmsg(1, _ANCILLARY, socket.MSG_ERRQUEUE)
            except OSError:  # BlockingIOError: the queue is empty; or the connection closed
                return
            wall, key = None, None
            for level, kind, payload in ancillary:
                if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPING and len(payload) >= _TIMESPEC.size:
                    sec, nsec = _TIMESPEC.unpack_from(payload)
                    wall = sec + nsec * 1e-9
                elif len(payload) >= _EXTENDED_ERR.size:
                    err = _EXTENDED_ERR.unpack_from(payload)
                    key = err[6] if err[1] == _ORIGIN_TIMESTAMPING else None
            done = self.waiting.pop(key, None) if key is not None else None
            if wall and done is not None:
                offset = wall_offset() if offset is None else offset
                done(wall - offset)
