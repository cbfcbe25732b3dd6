"""A streaming response of the hot-path transport: its body read and stamped, read by read.

Not geventhttpclient's ``readline`` (4 KB recvs in a loop) nor Locust's ``iter_content(1024)`` (which
waits for 1 KB, 50-80 ms of TTFT): each block handed on is what one read delivered, stamped with
that read's time (DESIGN.md). Two ways to read a body, the same blocks either way:

* ``consume(on_block)``: on a plain-HTTP socket, the process's batch reader reads it
  (llmload/client/batch_reader.py: one loop, no greenlet switch per chunk; ``took_read`` per read
  of a chunked body, read in C by chunked_reader.py, ``read_ready`` for the rest, read here with
  geventhttpclient's C parser); on a TLS socket, this greenlet (``blocks``);
* ``blocks()``: an iterator in the request's own greenlet.

Receive stamps: on plain-HTTP targets on Linux each read carries the kernel's receive time
(llmload/client/stamped_socket.py); TLS targets and other systems keep the user-space stamp,
counted apart (llmload/measure/stamps.py).

Read timeouts: a socket timeout makes gevent create and cancel a timer for every ``recv``, so the
sockets block without one, each read stamps the stream's last-read time, and the event loop's
watchdog (llmload/client/watchdog.py) shuts down a stream silent past its limit (its read then ends
as ``TimedOut``). The limit is the first-byte timeout until the stream client reports the first
token (the headers and a long prefill), the read timeout after it (silence between chunks).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import gevent
import gevent.socket
from geventhttpclient._parser import HTTPResponseParser
from geventhttpclient.response import HTTPParseError, HTTPSocketPoolResponse

from llmload.client import chunked_reader
from llmload.client.batch_reader import BatchReader, OnBlock
from llmload.client.failures import TIMEOUTS, ConnectFailed, TimedOut, parse_retry_after
from llmload.client.stamped_socket import RECV_ANCILLARY, StampedSocket, kernel_delay
from llmload.client.watchdog import Watchdog
from llmload.measure.stamps import FOLD_EVERY, ReadStamps

# the C parser's feed without geventhttpclient's wrapper (which mends only a HEAD response's body)
_FEED = HTTPResponseParser.feed


class GeventResponse:
    def __init__(
        self,
        resp: HTTPSocketPoolResponse,
        block_size: int,
        read_timeout: float | None = None,
        first_token_timeout: float | None = None,
        stamps: ReadStamps | None = None,
        reader: BatchReader | None = None,
    ) -> None:
        self._resp = resp
        # The body's bytes go straight into its buffer: the C parser looks its callback up by name at
        # each chunk, and a bound builtin found there spares a Python frame. With the parser's own
        # feed in _took: 1.18 -> 0.62 us a chunk (timeit, one vLLM-shaped chunk a feed, 2026-12-07).
        setattr(resp, "_on_body", resp._body_buffer.extend)  # noqa: B010 - a method replaced on purpose
        self.reader = reader  # None: the body is read in the request's own greenlet
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
        self.decoder: Any = None  # the body's chunked framing, read in C (chunked_reader.py), or None

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

    def consume(self, on_block: OnBlock) -> bool:
        """Hand each block (the read's stamp, its body bytes) to ``on_block`` until it returns True
        (False: stopped before the end) or the body ends (True). Plain-HTTP sockets are read by the
        batch reader when the transport has one; the rest in this greenlet (``blocks``)."""
        sock = self._resp._sock
        if self.reader is None or sock is None or not _plain(sock):
            for t, data in self.blocks():
                if on_block(t, data):
                    return False
            return True
        first = self._headers_block()
        if first is not None and on_block(*first):
            return False
        if self._resp.message_complete:
            return True
        with self._watched():
            return self.reader.follow(self, sock.fileno(), on_block, self.decoder)

    def took_read(self, on_block: OnBlock, read: chunked_reader.Read) -> bool | None:
        """A read the C reader made (chunked_reader.py), handed on as ``read_ready`` hands its own."""
        _fd, t, delay, body, code = read
        self.last_read = t
        if self.timed_out:
            raise TimedOut(self._silence())
        if code == chunked_reader.END:  # the connection goes back to the pool, whatever on_block says
            self._resp.message_complete = True
        elif code == chunked_reader.AGAIN:  # an error-queue wake-up: send stamps (stamped_socket.py)
            sock = self._resp._sock
            if isinstance(sock, StampedSocket) and sock.send_stamps:
                sock.take_send_stamps()
            return None
        elif code != chunked_reader.MORE:
            raise ConnectFailed(chunked_reader.failure(code))
        if body and on_block(self._stamped(t, delay if delay >= 0.0 else None), body):
            return False
        return True if code == chunked_reader.END else None

    def read_ready(self, on_block: OnBlock) -> bool | None:
        """One read of a socket the batch reader found ready, handed on: True when the body ended,
        False when ``on_block`` stopped, None while more is to come (nothing was there: drained
        send stamps made the socket poll as errored)."""
        resp = self._resp
        sock = resp._sock
        if sock is None:
            return True
        # The read and its stamp in this frame: through the socket's stamped read (two calls more) and
        # a histogram's record per read (three), 2-3 us a chunk more (200 streams, 10,000 chunks/s:
        # reading only 31.9 against 29.6, the stream client too 39.8 against 36.2; 2026-12-07)
        stamped = isinstance(sock, StampedSocket)
        try:
            if stamped:
                data, ancillary, _flags, _addr = sock._sock.recvmsg(self._block, RECV_ANCILLARY)
                wall = time.time()  # first, then the monotonic clock: a pause between them only makes it late
                t = time.perf_counter()
                delay = kernel_delay(ancillary, wall)
            else:
                data = sock._sock.recv(self._block)
                t = time.perf_counter()
                delay = None
        except (BlockingIOError, InterruptedError):
            if stamped and sock.send_stamps:
                sock.take_send_stamps()
            return None
        except OSError as e:
            raise self._failed(e) from e
        block = self._took(resp, data, t, delay)
        if block is not None and on_block(*block):
            return False
        if not data:
            self._ended(resp)
            return True
        return True if resp.message_complete else None

    def blocks(self) -> Iterator[tuple[float, bytes]]:
        first = self._headers_block()
        if first is not None:
            yield first
        with self._watched():
            yield from self._read(self._resp)

    @contextmanager
    def _watched(self) -> Iterator[None]:
        """The event loop's watchdog follows this stream while its body is read (with a silence limit)."""
        dog = Watchdog.of_hub() if self.limit is not None else None
        if dog is not None:
            self.last_read = time.perf_counter()
            dog.add(self)
        try:
            yield
        finally:
            if dog is not None:
                dog.remove(self)

    def _headers_block(self) -> tuple[float, bytes] | None:
        """The body bytes read with the headers, inside geventhttpclient, with that read's stamp."""
        resp = self._resp
        buf = resp._body_buffer
        if not buf:
            return None
        data = bytes(buf)
        del buf[:]
        sock = resp._sock  # None when the whole response came with the headers (released)
        if isinstance(sock, StampedSocket):
            return self._stamped(sock.read_at, sock.delay), data
        return self._stamped(time.perf_counter(), None), data

    def _read(self, resp: HTTPSocketPoolResponse) -> Iterator[tuple[float, bytes]]:
        while not resp.message_complete:
            sock = resp._sock
            if sock is None:
                return
            try:
                data = sock.recv(self._block)
            except OSError as e:  # socket.timeout included
                raise self._failed(e) from e
            except gevent.Timeout as e:
                raise TimedOut(self._silence()) from e
            if isinstance(sock, StampedSocket):
                block = self._took(resp, data, sock.read_at, sock.delay)
            else:
                block = self._took(resp, data, time.perf_counter(), None)
            if block is not None:
                yield block
            if not data:
                self._ended(resp)
                return

    def _failed(self, e: BaseException) -> Exception:
        """A read that raised: a timeout or a socket the watchdog shut is TimedOut, the rest ConnectFailed."""
        if isinstance(e, TIMEOUTS) or self.timed_out:
            return TimedOut(self._silence())
        return ConnectFailed(str(e))

    def _took(
        self, resp: HTTPSocketPoolResponse, data: bytes, t: float, delay: float | None
    ) -> tuple[float, bytes] | None:
        """Feed a read's bytes (read at ``t``, ``delay`` after the kernel's receive stamp where there is
        one) to the HTTP parser: the body bytes they completed with the read's stamp, or None. An
        empty read is the peer's close: the parser is told (a close-delimited body ends there) and
        what it held is given with the read's own time."""
        self.last_read = t
        if self.timed_out:
            raise TimedOut(self._silence())
        buf = resp._body_buffer
        if not data:
            try:
                resp.feed(b"")
            except HTTPParseError:
                pass
            stamp = t
        else:
            stamp = self._stamped(t, delay)
            try:
                _FEED(resp, data)
            except HTTPParseError as e:
                raise ConnectFailed(f"bad HTTP framing: {e}") from e
        if not buf:
            return None
        out = bytes(buf)
        del buf[:]
        return stamp, out

    @staticmethod
    def _ended(resp: HTTPSocketPoolResponse) -> None:
        """The peer closed: an error unless the body had ended."""
        if not resp.message_complete:
            raise ConnectFailed("connection closed by the server before the body ended")

    def _stamped(self, t: float, delay: float | None) -> float:
        """The stamp of a read made at ``t`` (the kernel's, ``delay`` before it, where there is one),
        counted by source; never before a stamp already given (that one was late)."""
        stamps = self._stamps
        if delay is not None and stamps.source == "kernel":
            stamp, by_kernel = t - delay, True
            stamps.kernel_reads += 1
            delays = stamps.delays
            delays.append(delay)
            if len(delays) >= FOLD_EVERY:
                stamps.fold()
        else:
            stamp, by_kernel = t, False
            stamps.user_reads += 1
        if stamp < self._stamp:
            stamp = self._stamp
        self._stamp, self._kernel_stamped = stamp, by_kernel
        return stamp

    def _end_if_there(self, resp: HTTPSocketPoolResponse) -> None:
        """The body's end, if it waits in the socket, read without waiting: the stream client stops at
        [DONE], and a server that writes the end apart (uvicorn, just after) cost the connection when
        the read came between the two (200 requests to a uvicorn StreamingResponse on loopback, two
        runs each way, 2026-12-08: 1 and 2 connections without this, 1 and 1 with). Anything else
        there is the rest of a body not read: the connection goes."""
        sock = resp._sock
        if sock is None or self.timed_out or not _plain(sock):
            return
        try:
            data = sock._sock.recv(self._block, socket.MSG_DONTWAIT)
        except OSError:
            return
        if not data:
            return
        if self.decoder is not None:
            if self.decoder.feed(data)[1] == chunked_reader.END:
                resp.message_complete = True
            return
        try:
            _FEED(resp, data)  # its end sets message_complete (and returns the socket to the pool)
        except HTTPParseError:
            pass

    def read_body(self, limit: int = 65536) -> bytes:
        out = bytearray()
        for _, data in self.blocks():
            out += data
            if len(out) >= limit:
                break
        return bytes(out[:limit])

    def close(self, complete: bool) -> None:
        resp = self._resp
        if not resp.message_complete:
            self._end_if_there(resp)
        if resp.message_complete:
            resp.release()
            return
        # Unread body left on the socket: never return it to the pool.
        pool, sock = resp._pool, resp._sock
        resp._sock = None
        resp._pool = None
        if pool is not None and sock is not None:
            pool.release_socket(sock)


def _plain(sock: object) -> bool:
    """A plain-HTTP socket, its bytes all the kernel's (a TLS socket holds decrypted bytes of its own)."""
    return isinstance(sock, StampedSocket) or type(sock) is gevent.socket.socket
