"""The event loop reads every ready stream itself: no greenlet switch per chunk.

With one greenlet per stream, every chunk costs a wake-up of that greenlet: the hub's callback for
its socket, a switch to the greenlet and back, and the generator steps between the socket and the
parser. A py-spy profile of a full run at 9,800 chunks/s put that machinery near half of the
client's Python time (docs/development.md, Benchmarks). Here each streaming socket has a read watcher
in the event loop (libev's, one epoll set for the whole process) whose callback reads it in the hub's
own greenlet, stamped as before (llmload/client/stamped_socket.py), feeds the bytes to the
response's HTTP parser and hands the body to the stream's consumer (the stream client's parser and
timers). The request's own greenlet sends, reads the headers, then waits once for the body's end.

The callbacks are the loop's own: a wake-up that finds a stream ready reads it at once. The reader
had been one greenlet waiting on an epoll set of its own, and each wake-up cost a switch into it and
back and a second epoll call, 4.3 us against 1.4 (timeit, one ready socket), where most wake-ups
found one or two streams ready (1.3 a wake-up at 10,000 chunks/s, 1.7 at 20,000). Reading only,
400 streams at 20,000 chunks/s on one core, 4 runs each, alternated: 23.4 us a chunk where 28.0
(bench/bench_readpath.py, 2026-12-07). Nothing a consumer does may switch greenlets (the hub runs it).

Ready streams are read from the request greenlets too (``read_now``, through an epoll set of the same
sockets that only it polls): as one resumes at its body's end, and as it sends its next request.
Streams of the same length end together (a closed loop's cohort), and the hub then runs their
greenlets one after another, each request's bookkeeping and next send (100-200 us) before it polls
again: the loop's next read came 5-15 ms late, long enough for a stream's next chunk to arrive and
share the read. Read in between, a whole ``llmload run`` at 20,000 chunks/s (400 streams, one core,
8 runs each, alternated, 2026-12-07) had a median 0.58% of its reads coalesced where it had 1.27%,
and a client delay p99 of 6.6 ms where it had 12.6.

Silences are ended as before: the transport's watchdog shuts a silent socket down, which makes it
ready, and its read then raises ``TimedOut``. Send stamps that reach the error queue after the
headers make the socket poll as errored: a read that finds no data drains them.

Plain-HTTP sockets only: a TLS socket has bytes the kernel cannot see (decrypted, buffered in the
SSL object), so those streams keep their greenlet (response.py). ``client.reader: greenlet`` asks
for that path everywhere (bench/bench_fullrun.py compares the two).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, Protocol

import gevent
from gevent.event import AsyncResult
from gevent.monkey import get_original

from llmload.base.hub_local import per_hub

OnBlock = Callable[[float, bytes], bool]  # (the read's stamp, body bytes) -> stop reading
# Linux's epoll, as the select module had it before gevent's monkey patching (which takes it away)
AVAILABLE = sys.platform == "linux"
_EPOLLIN = 0x001


class Ready(Protocol):
    def read_ready(self, on_block: OnBlock) -> bool | None:
        """One read of a socket the reader found ready: True when the body ended, False when
        ``on_block`` asked to stop, None while more is to come (response.GeventResponse)."""
        ...


class _Stream:
    __slots__ = ("on_block", "resp", "result", "watcher")

    def __init__(self, resp: Ready, on_block: OnBlock, watcher: Any) -> None:
        self.resp = resp
        self.on_block = on_block
        self.result: AsyncResult = AsyncResult()
        self.watcher = watcher


class BatchReader:
    """The streams of one event loop, read where the loop finds them ready."""

    def __init__(self) -> None:
        self._hub_loop: Any = gevent.get_hub().loop
        self._epoll: Any = get_original("select", "epoll")()  # for ``read_now``
        self._streams: dict[int, _Stream] = {}
        self.reads = 0  # reads made (tests/test_batch_reader.py: every body read is one)

    @classmethod
    def of_hub(cls) -> BatchReader:
        """This thread's reader (one per gevent hub), made at its first stream."""
        return per_hub("llmload_batch_reader", cls)

    def follow(self, resp: Ready, fd: int, on_block: OnBlock) -> bool:
        """Read ``fd`` (``resp``'s socket) until its body ends (True) or ``on_block`` stops (False);
        the read's TimedOut or ConnectFailed, or anything ``on_block`` raised, is raised here."""
        stream = _Stream(resp, on_block, self._hub_loop.io(fd, _EPOLLIN))
        self._streams[fd] = stream
        self._epoll.register(fd, _EPOLLIN)
        stream.watcher.start(self._ready, fd, stream)
        try:
            ended = bool(stream.result.get())
        finally:
            self._end(fd, stream)
        self.read_now()  # before this request's bookkeeping (module docstring)
        return ended

    def read_now(self) -> None:
        """Read the streams that are ready now, in the calling greenlet (a batch is the same work in
        any greenlet: none switches within one)."""
        if self._streams:
            streams = self._streams
            for fd, _events in self._epoll.poll(0):
                stream = streams.get(fd)
                if stream is not None:
                    self._ready(fd, stream)

    def _ready(self, fd: int, stream: _Stream) -> None:
        """One read of a ready stream, handed on; a stream that ended or failed gets its result."""
        self.reads += 1
        try:
            ended = stream.resp.read_ready(stream.on_block)
        except BaseException as e:  # noqa: BLE001 - the request's greenlet raises it
            self._end(fd, stream)
            stream.result.set_exception(e)
            if not isinstance(e, Exception):
                raise  # an exit or an interrupt: the hub's too
            return
        if ended is not None:
            self._end(fd, stream)
            stream.result.set(ended)

    def _end(self, fd: int, stream: _Stream) -> None:
        """Stop watching a stream whose result is set (its greenlet runs later)."""
        stream.watcher.close()
        if self._streams.get(fd) is stream:
            del self._streams[fd]
            try:
                self._epoll.unregister(fd)
            except OSError:  # closed meanwhile: the kernel dropped it from the set
                pass
