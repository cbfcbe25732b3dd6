"""The batch reader (llmload/client/batch_reader.py) against the greenlet-per-stream reader, on real
sockets (tests/sse_server.py): the same records from the same streams, no switch into a request's
greenlet per chunk, a request killed while it waits leaves nothing behind, and TLS keeps its greenlet.
"""

from __future__ import annotations

import time
from collections import Counter

import gevent
import gevent.monkey
import greenlet
import pytest

from llmload.client.batch_reader import BatchReader
from llmload.client.openai_stream import build_request, stream_request
from llmload.client.transport import GeventTransport
from llmload.measure.records import RequestRecord
from llmload.measure.stamps import FOLD_EVERY, ReadStamps

CHUNKS = 30


def _request(n: int = CHUNKS, interval_ms: float = 5.0) -> object:
    spec = {"mode": "timed", "n": n, "first_ms": 5, "interval_ms": interval_ms}
    return build_request(api="chat", model="m", prompt="hi", max_tokens=n, extra_body={"llmload_test": spec})


def _streams(url: str, *, batched: bool, streams: int, kernel: bool = True) -> list[RequestRecord]:
    req = _request()
    out: list[RequestRecord] = []

    def one() -> None:
        tr = GeventTransport(url, batched=batched, kernel_stamps=kernel)
        try:
            for _ in range(2):  # the second on the kept connection
                out.append(stream_request(tr, req, RequestRecord(target="t")))  # type: ignore[arg-type]
        finally:
            tr.close()

    gevent.joinall([gevent.spawn(one) for _ in range(streams)], timeout=60, raise_error=True)
    return out


@pytest.mark.parametrize(("batched", "kernel"), [(True, True), (True, False), (False, True)])
def test_both_readers_give_whole_records(sse_server: str, batched: bool, kernel: bool) -> None:
    # kernel False: the pool's plain sockets (client.timestamps: user) are read by the loop too
    reader = BatchReader.of_hub()
    reads0 = reader.reads
    recs = _streams(sse_server, batched=batched, streams=20, kernel=kernel)
    assert len(recs) == 40
    assert all(r.status == "ok" for r in recs), Counter(r.status for r in recs)
    assert all(r.output_tokens == CHUNKS and r.chunks == CHUNKS and len(r.itl_s) == CHUNKS - 1 for r in recs)
    assert all(r.ttft_s is not None and r.ttft_s > 0 for r in recs)
    read = reader.reads - reads0
    if batched:  # every body read went through the one loop; none was left registered
        assert read >= 40 and not reader._streams
    else:
        assert read == 0


def test_the_read_path_folds_its_client_delays_as_it_reads(sse_server: str) -> None:
    # Held until the drain, a second's delays at 20,000 chunks/s took 6-18 ms to fold: a stall of
    # the event loop each second (llmload/measure/stamps.py). The read path folds every FOLD_EVERY.
    shared = ReadStamps()
    req = _request(n=60)

    def one() -> None:
        tr = GeventTransport(sse_server, stamps=shared)
        try:
            for _ in range(2):
                stream_request(tr, req, RequestRecord(target="t"))  # type: ignore[arg-type]
        finally:
            tr.close()

    gevent.joinall([gevent.spawn(one) for _ in range(20)], timeout=60, raise_error=True)
    assert shared.source == "kernel" and shared.kernel_reads >= FOLD_EVERY  # a fold was due
    assert len(shared.delays) < FOLD_EVERY and shared.held_delay.count >= FOLD_EVERY
    assert shared.delay.count == shared.kernel_reads  # none lost in the folds


def test_a_ready_stream_is_read_by_the_greenlet_that_asks(sse_server: str) -> None:
    # The request greenlets read what is ready as they resume and send (read_now), between their
    # bookkeeping, rather than leave it to the loop's next turn. Here the test's greenlet blocks the
    # event loop, so the loop's greenlet cannot run: what was read, read_now read.
    reader = BatchReader.of_hub()
    tr = GeventTransport(sse_server)
    g = gevent.spawn(stream_request, tr, _request(n=10, interval_ms=50.0), RequestRecord(target="t"))
    for _ in range(2000):  # until its body is followed (its headers came)
        if reader._streams or g.dead:
            break
        gevent.sleep(0.005)
    assert reader._streams, "the stream never reached the batch reader"
    reads0 = reader.reads
    gevent.monkey.get_original("time", "sleep")(0.2)  # chunks arrive; no greenlet runs
    assert reader.reads == reads0
    reader.read_now()
    assert reader.reads > reads0
    rec = g.get(timeout=30)
    assert rec.status == "ok" and rec.chunks == 10
    tr.close()


@pytest.mark.parametrize("batched", [True, False])
def test_a_requests_greenlet_wakes_once_per_request_not_per_chunk(sse_server: str, batched: bool) -> None:
    # The point of the batch reader: the chunks are read and parsed in its loop, so the request's own
    # greenlet is switched into for its send, its headers and its end, not once per chunk.
    req = _request(n=CHUNKS, interval_ms=10.0)
    tr = GeventTransport(sse_server, batched=batched)
    switches = Counter[int]()
    user: list[greenlet.greenlet] = []

    def trace(event: str, args: tuple[greenlet.greenlet, greenlet.greenlet]) -> None:
        if event in ("switch", "throw") and user and args[1] is user[0]:
            switches[0] += 1

    def one() -> RequestRecord:
        return stream_request(tr, req, RequestRecord(target="t"))  # type: ignore[arg-type]

    g = gevent.spawn(one)
    user.append(g)
    old = greenlet.settrace(trace)
    try:
        rec = g.get(timeout=30)
    finally:
        greenlet.settrace(old)
        tr.close()
    assert rec.status == "ok" and rec.chunks == CHUNKS
    if batched:
        assert switches[0] < CHUNKS // 3, switches
    else:
        # one switch per read that brought tokens: a late server or client merges chunks in a read
        token_reads = 1 + sum(gap > 0 for gap in rec.itl_s)
        assert token_reads > CHUNKS // 3 and switches[0] >= token_reads, (switches, token_reads)


def test_a_request_killed_while_the_reader_reads_it_is_aborted_and_unregistered(sse_server: str) -> None:
    reader = BatchReader.of_hub()
    tr = GeventTransport(sse_server)
    req = _request(n=200, interval_ms=20.0)  # 4 s of chunks
    rec = RequestRecord(target="t")
    g = gevent.spawn(stream_request, tr, req, rec)
    reads, deadline = reader.reads, time.monotonic() + 30  # its first chunks, however busy the host
    while not (reader._streams and reader.reads > reads) and time.monotonic() < deadline:
        gevent.sleep(0.05)
    assert reader._streams and reader.reads > reads, "the stream was not in the batch reader"
    g.kill(block=True, timeout=5)
    assert rec.status == "aborted" and 0 < rec.chunks < 200
    assert not reader._streams
    # the connection left mid-body was not returned to the pool: the next request is whole
    again = stream_request(tr, _request(), RequestRecord(target="t"))  # type: ignore[arg-type]
    tr.close()
    assert again.status == "ok" and again.chunks == CHUNKS


def test_tls_targets_keep_a_greenlet_per_stream() -> None:
    assert GeventTransport("https://127.0.0.1:9")._batched is False
    assert GeventTransport("http://127.0.0.1:9")._batched is True
    assert GeventTransport("http://127.0.0.1:9", batched=False)._batched is False
