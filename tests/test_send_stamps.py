"""Kernel send stamps (llmload/client/stamped_socket.py): a request starts when the kernel sent it.

A greenlet blocks the event loop for 0.3 s while a new connection's connect waits, between the
stream client's own start stamp and the send. With the kernel's send stamp the request starts
after the block, and its TTFT holds none of it; with a user-space start (a transport that stamps
nothing) it starts before. Both are causal bounds, not timings: the send cannot happen while the
only thread is blocked, and a user-space stamp taken before the block cannot come after it.
"""

from __future__ import annotations

import time

import gevent
import gevent.monkey
import pytest

from llmload.client.openai_stream import build_request, stream_request
from llmload.client.transport import KERNEL_STAMPS, GeventTransport
from llmload.measure.client_health import figure_flags
from llmload.measure.records import RequestRecord
from llmload.measure.stamps import ReadStamps

pytestmark = pytest.mark.skipif(not KERNEL_STAMPS, reason="kernel stamps: Linux on x86-64/arm64")

BLOCK_S = 1.0  # longer than a busy host's server takes to its first token (it must not enter TTFT)
SLACK_S = 0.05  # the record's wall-clock start, moved onto the monotonic clock (a tiny offset)


def blocked_send(base_url: str, *, kernel: bool) -> tuple[RequestRecord, float, ReadStamps]:
    """One request on a new connection, the loop blocked while it connects: the record, when the
    block ended (monotonic), the target's stamps."""
    stamps = ReadStamps()
    tr = GeventTransport(base_url, stamps=stamps, kernel_stamps=kernel)
    spec = {"mode": "timed", "n": 2, "first_ms": 5, "interval_ms": 5}
    req = build_request(api="chat", model="m", prompt="hi", max_tokens=2, extra_body={"llmload_test": spec})
    blocking_sleep = gevent.monkey.get_original("time", "sleep")
    unblocked: list[float] = []

    def block_the_loop() -> None:  # runs at the client's first switch: the connect's wait
        blocking_sleep(BLOCK_S)
        unblocked.append(time.perf_counter())

    blocker = gevent.spawn(block_the_loop)
    try:
        rec = stream_request(tr, req, RequestRecord(target="t"))
    finally:
        blocker.join()
        tr.close()
    assert rec.status == "ok", rec.error
    return rec, unblocked[0], stamps


def monotonic(wall: float) -> float:
    return wall - (time.time() - time.perf_counter())


def test_a_request_starts_at_the_kernels_send_after_a_blocked_loop(sse_server: str) -> None:
    rec, unblocked, stamps = blocked_send(sse_server, kernel=True)
    assert (stamps.kernel_sends, stamps.user_sends) == (1, 0)
    assert monotonic(rec.start_time) >= unblocked - SLACK_S, (monotonic(rec.start_time), unblocked)
    # a transport without stamps starts the same request before the block, and its TTFT holds it
    user, unblocked, stamps = blocked_send(sse_server, kernel=False)
    assert (stamps.kernel_sends, stamps.user_sends) == (0, 1)
    assert monotonic(user.start_time) <= unblocked - BLOCK_S + SLACK_S
    assert user.ttft_s is not None and rec.ttft_s is not None
    assert user.ttft_s >= BLOCK_S > rec.ttft_s, (user.ttft_s, rec.ttft_s)


def test_every_request_on_a_kept_connection_gets_its_own_send_stamp(sse_server: str) -> None:
    """One connection, several requests: each is matched to the stamp of its own last byte."""
    stamps = ReadStamps()
    tr = GeventTransport(sse_server, stamps=stamps)
    spec = {"mode": "timed", "n": 3, "first_ms": 5, "interval_ms": 5}
    recs = []
    for i in range(4):
        req = build_request(
            api="chat", model="m", prompt="hi" * (i + 1), max_tokens=3, extra_body={"llmload_test": spec}
        )
        before = time.time()
        recs.append((before, stream_request(tr, req, RequestRecord(target="t"))))
    tr.close()
    assert (stamps.kernel_sends, stamps.user_sends) == (4, 0)
    for before, rec in recs:  # each starts at its own send, after the client began it
        assert rec.status == "ok" and rec.start_time >= before, (rec.start_time, before)


def test_user_space_starts_flag_ttft_only_while_the_client_was_late() -> None:
    s = ReadStamps(source="kernel", kernel_reads=1000, first_tokens=100, kernel_sends=60, user_sends=40)
    s.delay.record(0.0002)
    flags = figure_flags("t", s, lagging=True, lag_p99=40.0)
    assert [f.metric for f in flags] == ["ttft"]
    assert "40 of 100 requests' starts were stamped in user space" in flags[0].why
    assert figure_flags("t", s, lagging=False, lag_p99=0.1) == []  # on time: the client's clock was right
    s.kernel_sends, s.user_sends = 100, 0
    assert figure_flags("t", s, lagging=True, lag_p99=40.0) == []
