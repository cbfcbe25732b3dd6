"""One loop per process reads every ready stream: no greenlet switch per chunk.

With one greenlet per stream, every chunk costs a wake-up of that greenlet: the hub's callback for
its socket, a switch to the greenlet and back, and the generator steps between the socket and the
parser. A py-spy profile of a full run at 9,800 chunks/s put that machinery near half of the
client's Python time (docs/development.md, Benchmarks). Here one greenlet per event loop holds an
epoll set of every streaming socket and waits on the epoll's own descriptor (one hub watcher,
however many streams). Each time it wakes it reads every ready socket once, stamped as before
(llmload/client/stamped_socket.py), feeds the bytes to the response's HTTP parser, and hands the
body to the stream's consumer (the stream client's parser and timers) in the same greenlet. The
request's own greenlet sends, reads the headers, then waits once for the body's end.

Ready streams are read from the request greenlets too (``read_now``): as one resumes at its body's
end, and as it sends its next request. Streams of the same length end together (a closed loop's
cohort), and the hub then runs their greenlets one after another, each request's bookkeeping and
next send (100-200 us) before it polls again: the loop's next read came 5-15 ms late, long enough
for a stream's next chunk to arrive and share the read. Read in between, a whole ``llmload run`` at
20,000 chunks/s (400 streams, one core, 8 runs each, alternated, 2026-12-07) had a median 0.58% of
its reads coalesced where it had 1.27%, and a client delay p99 of 6.6 ms where it had 12.6.

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
from llmload.client import chunked_reader
from llmload.client.failures import ConnectFailed

OnBlock = Callable[[float, bytes], bool]  # (the read's stamp, body bytes) -> stop reading
# Linux's epoll, as the select module had it before gevent's monkey patching (which takes it away)
AVAILABLE = sys.platform == "linux"
_EPOLLIN = 0x001


class Ready(Protocol):
    def read_ready(self, on_block: OnBlock) -> bool | None:
        """One read of a socket the reader found ready: True when the body ended, False when
        ``on_block`` asked to stop, None while more is to come (response.GeventResponse)."""
        ...

    def took_read(self, on_block: OnBlock, read: chunked_reader.Read) -> bool | None:
        """The same for a read made in C (llmload/client/chunked_reader.py)."""
        ...


class _Stream:
    __slots__ = ("on_block", "resp", "result")

    def __init__(self, resp: Ready, on_block: OnBlock) -> None:
        self.resp = resp
        self.on_block = on_block
        self.result: AsyncResult = AsyncResult()


class BatchReader:
    """The epoll set of one event loop's streams and the greenlet that reads them."""

    def __init__(self) -> None:
        self._epoll: Any = get_original("select", "epoll")()
        self._streams: dict[int, _Stream] = {}
        self._decoders: dict[int, Any] = {}  # the streams read in C, by socket (chunked_reader.py)
        self._greenlet: gevent.Greenlet | None = None
        self.reads = 0  # reads the loop made (tests/test_batch_reader.py: every body read is one)

    @classmethod
    def of_hub(cls) -> BatchReader:
        """This thread's reader (one per gevent hub), made at its first stream."""
        return per_hub("llmload_batch_reader", cls)

    def follow(self, resp: Ready, fd: int, on_block: OnBlock, decoder: Any = None) -> bool:
        """Read ``fd`` (``resp``'s socket) until its body ends (True) or ``on_block`` stops (False);
        the read's TimedOut or ConnectFailed, or anything ``on_block`` raised, is raised here."""
        stream = _Stream(resp, on_block)
        self._streams[fd] = stream
        if decoder is not None:
            self._decoders[fd] = decoder
        self._epoll.register(fd, _EPOLLIN)
        if self._greenlet is None or self._greenlet.dead:
            self._greenlet = gevent.spawn(self._loop)
        try:
            ended = bool(stream.result.get())
        finally:
            self._end(fd, stream)  # killed while it waited: nothing of it is left in the set
        self.read_now()  # before this request's bookkeeping (module docstring)
        return ended

    def read_now(self) -> None:
        """Read the streams that are ready now, in the calling greenlet (a batch is the same work in
        any greenlet: none switches within one)."""
        if self._streams:
            self._poll()

    def _loop(self) -> None:
        hub = gevent.get_hub()
        watcher = hub.loop.io(self._epoll.fileno(), 1)
        streams = self._streams
        try:
            while streams:
                hub.wait(watcher)
                self._poll()
        finally:
            watcher.close()
            self._greenlet = None
            for fd, stream in list(streams.items()):  # killed: no stream is left waiting for ever
                self._end(fd, stream)
                stream.result.set_exception(ConnectFailed("the batch reader stopped (the process is ending)"))

    def _poll(self) -> None:
        """One read of each ready stream, handed on (in C where its body's framing is: chunked_reader.py);
        a stream that ended or failed gets its result."""
        streams = self._streams
        reads = chunked_reader.poll(self._epoll, self._decoders) if self._decoders else self._epoll.poll(0)
        for read in reads:
            # a stream whose result is set has left ``streams`` (``_end``, ``follow``), and no
            # greenlet runs within a batch to add one: the lookup is the only check needed
            stream = streams.get(read[0])
            if stream is None:
                continue
            self.reads += 1
            try:
                if len(read) == 2 or read[4] == chunked_reader.FOREIGN:  # (fd, events): read in Python
                    ended = stream.resp.read_ready(stream.on_block)
                else:
                    ended = stream.resp.took_read(stream.on_block, read)
            except Exception as e:  # noqa: BLE001 - the request's greenlet raises it
                self._end(read[0], stream)
                stream.result.set_exception(e)
                continue
            if ended is not None:
                self._end(read[0], stream)
                stream.result.set(ended)

    def _end(self, fd: int, stream: _Stream) -> None:
        """Stop watching a stream whose result is set (its greenlet runs later), or whose greenlet left."""
        if self._streams.get(fd) is stream:
            del self._streams[fd]
            self._decoders.pop(fd, None)
            try:
                self._epoll.unregister(fd)
            except OSError:  # closed meanwhile: the kernel dropped it from the set
                pass
