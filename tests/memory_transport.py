"""An in-memory transport for the stream client: a scripted HTTP response, no sockets.

    transport = MemoryTransport(200, [b"data: {...}\\n\\n", b"data: [DONE]\\n\\n"])
    stream_request(transport, req, rec, clock=transport.clock)

Each block is one read, stamped one millisecond after the last on the transport's own clock (or
``gaps_s[i]`` after it, to script when a server wrote each block), so a record's figures depend only
on the bytes, how they were split and the gaps given. ``cut=True`` ends the body as
a dropped connection does (the real transport's ConnectFailed).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from llmload.client.failures import ConnectFailed


class MemoryResponse:
    sent_at: float | None = None  # no kernel: the request's start is the stream client's own stamp

    def __init__(
        self, status: int, blocks: list[bytes], clock: MemoryClock, cut: bool, gaps_s: list[float] | None
    ) -> None:
        self.status = status
        self._blocks = blocks
        self._gaps = gaps_s
        self._clock = clock
        self._cut = cut
        self.closed_complete: bool | None = None

    def blocks(self) -> Iterator[tuple[float, bytes]]:
        for i, b in enumerate(self._blocks):
            yield self._clock.tick(self._gaps[i] if self._gaps is not None else 0.001), b
        if self._cut:
            raise ConnectFailed("connection reset by peer")

    def consume(self, on_block: Callable[[float, bytes], bool]) -> bool:
        for t, data in self.blocks():
            if on_block(t, data):
                return False
        return True

    def read_body(self, limit: int = 65536) -> bytes:
        return b"".join(self._blocks)[:limit]

    def token_arrived(self) -> None:
        pass

    @property
    def retry_after_s(self) -> float | None:
        return None

    def close(self, complete: bool) -> None:
        self.closed_complete = complete


class MemoryClock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t

    def tick(self, gap_s: float = 0.001) -> float:
        self.t += gap_s
        return self.t


class MemoryTransport:
    def __init__(
        self, status: int, blocks: list[bytes], *, cut: bool = False, gaps_s: list[float] | None = None
    ) -> None:
        assert gaps_s is None or len(gaps_s) == len(blocks)
        self.clock = MemoryClock()
        self.response = MemoryResponse(status, blocks, self.clock, cut, gaps_s)

    def send(self, method: str, path: str, headers: dict[str, str], body: bytes) -> MemoryResponse:
        return self.response
