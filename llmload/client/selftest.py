"""The capacity self-test: can one process of this machine read the chunks the scenario asks for?

Before a run, :func:`measure` streams from a loopback server in its own process
(llmload/client/selftest_server.py) through llmload's own stream client (transport.py, openai_stream.py,
sse.py) for about two seconds, at the scenario's own chunk rate per process (clamped to
``MIN_RATE``..``MAX_RATE``): one stream per 100 chunks/s, one chunk each every ``INTERVAL_MS``.
The client thread's CPU time divided by the chunks read is this machine's cost per chunk at that
rate; its inverse, the chunks/s one core could read. The rate matters: the cost per chunk falls as
more sockets are ready at each wake-up (bench/bench_selftest.py measured 56 us at 4,000 chunks/s and
30 us at 28,000 on one core), so a test at a fixed low rate would warn far too early.

The scenario's expected rate (:func:`expected_chunks_per_s`) is its busiest plan step, every
active target together:

* closed loop: users x active targets x ``client.stream_tokens_per_s`` (one chunk per token, the
  decode speed a stream is expected to get: the scenario cannot know the server's);
* open loop: rate x active targets x the mean of ``workload.output_tokens`` (every arrival streams
  its tokens once), capped by what ``max_vus`` streams per target can read at the stream speed.

Each load process reads its share (``--workers N``: a worker's is 1/N). :func:`judge` compares the
share with ``LIMIT_PERCENT`` of one core's measured capacity and words the warning: above it, the
stream-timing bench (bench/bench_stream.py) sees tails grow fast. ``client.selftest``: ``auto`` runs
it when the share is at least ``AUTO_MIN_CHUNKS_PER_S`` (a smaller run cannot come near a core),
``on`` always, ``off`` never. It warns; it never stops the run.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import gevent

from llmload.base.children import spawn, stop, wait_port_file
from llmload.client import selftest_server
from llmload.client.openai_stream import build_request, stream_request
from llmload.client.transport import GeventTransport
from llmload.load.plan import PlanStep
from llmload.measure.records import RequestRecord
from llmload.schema.results_model import SelfTest

Mode = Literal["auto", "on", "off"]
LIMIT_PERCENT = 80.0
AUTO_MIN_CHUNKS_PER_S = 2000.0
INTERVAL_MS = 10.0  # 100 chunks/s per stream
MIN_RATE = 2000.0
MAX_RATE = 40000.0  # 400 streams: past a core on most machines, where the reads would coalesce
TOKENS = 50  # one request: half a second of chunks
SECONDS = 2.0
START_TIMEOUT_S = 20.0


def expected_chunks_per_s(
    plan: Sequence[PlanStep], output_tokens: float, stream_tokens_per_s: float
) -> float:
    """The busiest step's chunks/s, every active target together (module docstring)."""
    peak = 0.0
    for ps in plan:
        st, n = ps.step, len(ps.targets)
        if st.open_loop:
            rate = max(st.rate or 0.0, st.start_rate or 0.0)
            if st.arrivals:  # a trace: its busiest second
                rate = max(rate, _busiest_second(st.arrivals))
            per_target = min(rate * output_tokens, st.max_vus * stream_tokens_per_s)
        else:
            per_target = max(st.users, st.start_users or 0) * stream_tokens_per_s
        peak = max(peak, per_target * n)
    return peak


def _busiest_second(offsets: Sequence[float]) -> float:
    """The most arrivals within one second of a trace (offsets in order)."""
    best, lo = 0, 0
    for hi, t in enumerate(offsets):
        while t - offsets[lo] >= 1.0:
            lo += 1
        best = max(best, hi - lo + 1)
    return float(best)


def should_run(mode: Mode, per_process: float) -> bool:
    return mode == "on" or (mode == "auto" and per_process >= AUTO_MIN_CHUNKS_PER_S)


def judge(
    mode: Literal["auto", "on"],
    chunks: int,
    cpu_s: float,
    expected: float,
    processes: int,
    limit_percent: float = LIMIT_PERCENT,
) -> SelfTest:
    """The self-test's figures and, above ``limit_percent`` of one core, its one-line warning."""
    cost = cpu_s / max(chunks, 1)
    capacity = 1.0 / cost if cost > 0 else float("inf")
    share = expected / max(processes, 1)
    load = share / capacity * 100
    warning = None
    if load > limit_percent:
        split = f" ({expected:,.0f} over {processes} processes)" if processes > 1 else ""
        warning = (
            f"self-test: the scenario's {share:,.0f} chunks/s per process{split} "
            f"is {load:.0f}% of what one core here reads ({capacity:,.0f} chunks/s, {cost * 1e6:.0f} us "
            f"per chunk), above {limit_percent:g}%: timings will degrade; add workers (--workers N) "
            "or lower the load"
        )
    return SelfTest(
        mode=mode,
        chunks=chunks,
        cpu_s=round(cpu_s, 4),
        chunk_cost_us=round(cost * 1e6, 2),
        capacity_chunks_per_s=round(capacity, 1),
        expected_chunks_per_s=round(expected, 1),
        processes=processes,
        expected_per_process=round(share, 1),
        load_percent=round(load, 1),
        limit_percent=limit_percent,
        warning=warning,
    )


def streams_for(rate: float) -> int:
    """Streams of one chunk per INTERVAL_MS that make ``rate`` chunks/s, clamped (module docstring)."""
    return round(min(max(rate, MIN_RATE), MAX_RATE) * INTERVAL_MS / 1000)


def measure(
    seconds: float = SECONDS, streams: int = streams_for(MIN_RATE), interval_ms: float = INTERVAL_MS
) -> tuple[int, float]:
    """Stream from a loopback server for about ``seconds``: (token chunks read, client CPU seconds).

    The CPU is this thread's (the event loop's): the server runs in its own process, and other
    threads of this process (a sink's writer) are not counted.
    """
    with tempfile.TemporaryDirectory(prefix="llmload-selftest-") as d:
        port_file = Path(d) / "port"
        server = spawn(
            selftest_server.command(port_file, interval_ms), tied=True, own_session=False, quiet=True
        )
        try:
            port = wait_port_file(
                server, port_file, START_TIMEOUT_S, what="self-test server", sleep=gevent.sleep
            )
            chunks, cpu_s = _drive(f"http://127.0.0.1:{port}", seconds, streams, interval_ms)
        finally:
            stop(server, 5.0)
    if not chunks:
        raise RuntimeError("the self-test read no chunks from its loopback server")
    return chunks, cpu_s


def _drive(url: str, seconds: float, streams: int, interval_ms: float) -> tuple[int, float]:
    req = build_request(api="chat", model="selftest", prompt="selftest", max_tokens=TOKENS)
    chunks = [0]
    end = time.perf_counter() + seconds

    def user(i: int) -> None:
        tr = GeventTransport(url, read_timeout_s=10.0)
        gevent.sleep(i * interval_ms / 1000 / streams)  # spread over one beat: one chunk per read
        try:
            while time.perf_counter() < end:
                rec = stream_request(tr, req, RequestRecord(target="selftest"), total_timeout_s=30.0)
                chunks[0] += rec.chunks
        finally:
            tr.close()

    cpu0 = time.thread_time()
    users = [gevent.spawn(user, i) for i in range(streams)]
    try:
        gevent.joinall(users, timeout=seconds + 30.0, raise_error=True)
    finally:
        gevent.killall(users)  # none left streaming once the server is gone
    return chunks[0], time.thread_time() - cpu0


def run_selftest(
    mode: Mode, plan: Sequence[PlanStep], output_tokens: float, stream_tokens_per_s: float, processes: int
) -> SelfTest | None:
    """The self-test for this scenario, or None when ``mode`` says to skip it."""
    expected = expected_chunks_per_s(plan, output_tokens, stream_tokens_per_s)
    if mode == "off" or not should_run(mode, expected / max(processes, 1)):
        return None
    chunks, cpu_s = measure(streams=streams_for(expected / max(processes, 1)))
    return judge(mode, chunks, cpu_s, expected, processes)
