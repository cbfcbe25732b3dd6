"""The capacity self-test: can one process of this machine read the chunks the scenario asks for?

Before a run, :func:`measure` streams from a loopback server in its own process
(llmload/client/selftest_server.py) through the path a run's requests take: llmload's transport and
batch reader, the stream client, the live token windows, each request's record and a drain and merge
of the figures every second (``_drive``). It streams for about three seconds at the scenario's own chunk
rate per process (clamped to ``MIN_RATE``..``MAX_RATE``), one stream per ``client.stream_tokens_per_s``
chunks/s, one chunk each at that beat. The event loop's CPU time over the steady window (after
``WARM_S``) divided by the chunks read in it is this machine's cost per chunk at that rate; its
inverse, the chunks/s one core could read. The rate matters: the cost per chunk falls as more
sockets are ready at each wake-up, so a test at a fixed low rate would warn far too early.
bench/bench_fullrun.py holds the prediction to a whole ``llmload run`` at the same rate.

It then names the rate at which reads start to coalesce on this host (two chunks of one stream in one
read, which flags ITL: docs/metrics.md): up to ``STEPS`` more levels of ``STEP_FACTOR`` times the
streams, ``STEP_S`` each, until one has ``COALESCED_PERCENT`` of its reads coalesced or fills the core.

The scenario's expected rate (:func:`expected_chunks_per_s`) is its busiest plan step, every
active target together:

* closed loop: users x active targets x ``client.stream_tokens_per_s`` (one chunk per token, the
  decode speed a stream is expected to get: the scenario cannot know the server's);
* open loop: rate x active targets x the mean of ``workload.output_tokens`` (every arrival streams
  its tokens once), capped by what ``max_vus`` streams per target can read at the stream speed.

Each load process reads its share (``--workers N``: a worker's is 1/N). :func:`judge` compares the
share with ``LIMIT_PERCENT`` of one core's measured capacity, and with the rate where reads
coalesced, and words the warning. ``client.selftest``: ``auto`` runs it when the share is at least
``AUTO_MIN_CHUNKS_PER_S`` (a smaller run cannot come near a core), ``on`` always, ``off`` never. It
warns; it never stops the run.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import gevent

from llmload.base.children import spawn, stop, wait_port_file
from llmload.client import selftest_server
from llmload.client.openai_stream import build_request, stream_request
from llmload.client.transport import GeventTransport
from llmload.load.plan import PlanStep
from llmload.measure.records import RequestRecord
from llmload.measure.runstate import Aggregator, Collector
from llmload.schema.results_model import SelfTest, SelfTestLevel

Mode = Literal["auto", "on", "off"]
LIMIT_PERCENT = 80.0
AUTO_MIN_CHUNKS_PER_S = 2000.0
INTERVAL_MS = 20.0  # 50 chunks/s per stream, client.stream_tokens_per_s's default
MIN_INTERVAL_MS = 2.0  # the fastest beat, whatever the scenario's stream speed
MAX_STREAMS = 800  # connections (file descriptors, here and in the server): a slow beat speeds up past it
MIN_RATE = 2000.0
MAX_RATE = 40000.0  # past a core on most machines, where the reads would coalesce
TOKENS = 200  # chunks per request, when the scenario does not say (its mean output tokens)
MIN_TOKENS, MAX_TOKENS = 10, 4000
SECONDS = 3.0
WARM_S = 0.5  # the streams' first requests connect: not in the window
REPORT_S = 1.0
STEPS, STEP_FACTOR, STEP_S = 3, 1.6, 0.8  # the search for the rate at which reads coalesce
COALESCED_PERCENT = 1.0
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
    levels: Sequence[Level] = (),
) -> SelfTest:
    """The self-test's figures and, above ``limit_percent`` of one core or past the rate at which
    reads coalesced (``levels``: the first is the one ``chunks`` and ``cpu_s`` come from), its
    one-line warning."""
    cost = cpu_s / max(chunks, 1)
    capacity = 1.0 / cost if cost > 0 else float("inf")
    share = expected / max(processes, 1)
    load = share / capacity * 100
    rows = [
        SelfTestLevel(
            chunks_per_s=round(lv.chunks / lv.seconds, 1),
            cpu_percent=round(lv.cpu_s / lv.seconds * 100, 1),
            coalesced_percent=round(lv.coalesced_percent, 2),
        )
        for lv in levels
        if lv.seconds > 0
    ]
    onset = next((r.chunks_per_s for r in rows if r.coalesced_percent >= COALESCED_PERCENT), None)
    problems = []
    if load > limit_percent:
        problems.append(
            f"is {load:.0f}% of what one core here reads ({capacity:,.0f} chunks/s, {cost * 1e6:.0f} us "
            f"per chunk), above {limit_percent:g}%"
        )
    if onset is not None and share >= onset:
        problems.append(f"is past {onset:,.0f} chunks/s, where reads coalesced here (ITL will be flagged)")
    warning = None
    if problems:
        split = f" ({expected:,.0f} over {processes} processes)" if processes > 1 else ""
        warning = (
            f"self-test: the scenario's {share:,.0f} chunks/s per process{split} {' and '.join(problems)}: "
            "timings will degrade; add workers (--workers N) or lower the load"
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
        levels=rows,
        coalescing_from_chunks_per_s=onset,
        warning=warning,
    )


def streamed_rate(rate: float) -> float:
    """The chunks/s the self-test streams at for a share of ``rate``: it, within MIN_RATE..MAX_RATE."""
    return min(max(rate, MIN_RATE), MAX_RATE)


def streams_for(rate: float, tokens_per_s: float = 1000 / INTERVAL_MS) -> int:
    """Streams of ``tokens_per_s`` chunks each that make ``rate`` chunks/s, clamped (module docstring)."""
    return max(1, round(streamed_rate(rate) / tokens_per_s))


@dataclass
class Level:
    """One rate the self-test streamed at, over its steady window (after ``WARM_S``)."""

    streams: int
    chunks: int  # token chunks read in the window
    cpu_s: float  # the event loop thread's CPU in the window
    seconds: float  # the window
    reads: int  # body reads of the whole level, and those that held more than one token chunk
    coalesced: int

    @property
    def coalesced_percent(self) -> float:
        return self.coalesced / max(self.reads, 1) * 100


def measure(
    seconds: float = SECONDS,
    streams: int = streams_for(MIN_RATE),
    interval_ms: float = INTERVAL_MS,
    steps: int = 0,
    tokens: int = TOKENS,
) -> list[Level]:
    """Stream from a loopback server: the level of ``streams`` streams for about ``seconds``, then
    up to ``steps`` levels of STEP_FACTOR more streams each (STEP_S each), until one coalesces
    (``COALESCED_PERCENT`` of its reads) or fills the core. The server runs in its own process;
    other threads of this one (a sink's writer) are not counted."""
    with tempfile.TemporaryDirectory(prefix="llmload-selftest-") as d:
        port_file = Path(d) / "port"
        server = spawn(
            selftest_server.command(port_file, interval_ms), tied=True, own_session=False, quiet=True
        )
        try:
            port = wait_port_file(
                server, port_file, START_TIMEOUT_S, what="self-test server", sleep=gevent.sleep
            )
            url = f"http://127.0.0.1:{port}"
            levels = [_drive(url, seconds, streams, interval_ms, tokens)]
            while len(levels) <= steps and not _saturated(levels[-1]):
                n = min(
                    round(levels[-1].streams * STEP_FACTOR), round(MAX_RATE * interval_ms / 1000), MAX_STREAMS
                )
                if n <= levels[-1].streams:
                    break
                levels.append(_drive(url, STEP_S, n, interval_ms, tokens))
        finally:
            stop(server, 5.0)
    if not levels[0].chunks:
        raise RuntimeError("the self-test read no chunks from its loopback server")
    return levels


def _saturated(level: Level) -> bool:
    """Reads coalesce, or the loop used the core: a higher rate would say nothing more."""
    return level.coalesced_percent >= COALESCED_PERCENT or level.cpu_s >= 0.95 * level.seconds


def _drive(url: str, seconds: float, streams: int, interval_ms: float, tokens: int) -> Level:
    """``streams`` closed-loop streams for ``seconds`` through the path a run's requests take: the
    transport and its batch reader, the stream client, the live token windows and first-token
    histogram, the request's record, and a drain and merge each REPORT_S (llmload/measure/runstate.py).

    Requests are ``tokens`` chunks long, as the scenario's, so each chunk carries its share of a
    request's own cost (its send, headers and record: about 0.3 ms here). Stream i's first request
    is i/streams of that, so requests end spread over time as in a long run, not all at once; the
    streams still reading when the time is up are cut (their chunks past the window are not counted)."""
    t = "selftest"
    collector, agg = Collector([t]), Aggregator([t])
    read = [0]
    end = time.perf_counter() + seconds

    def user(i: int) -> None:
        tr = GeventTransport(url, read_timeout_s=10.0, stamps=collector.stamps[t])
        gevent.sleep(i * interval_ms / 1000 / streams)  # spread over one beat: one chunk per read
        n = max(1, tokens * (i + 1) // streams)
        try:
            while time.perf_counter() < end:
                _request(tr, collector, n, read)
                n = tokens
        finally:
            tr.close()

    def reporter() -> None:
        while True:
            gevent.sleep(REPORT_S)
            agg.merge(collector.drain())

    users = [gevent.spawn(user, i) for i in range(streams)]
    report = gevent.spawn(reporter)
    try:
        gevent.sleep(min(WARM_S, seconds / 2))
        cpu0, chunks0, t0 = time.thread_time(), read[0], time.perf_counter()
        gevent.sleep(max(0.0, end - time.perf_counter()))
        cpu_s, chunks, window = time.thread_time() - cpu0, read[0] - chunks0, time.perf_counter() - t0
        failed = next((g.exception for g in users if g.exception is not None), None)
        if failed is not None:
            raise failed
    finally:
        gevent.killall([*users, report])  # none left streaming once the server is gone
    agg.merge(collector.drain())  # each drain takes the reads counted since the last
    st = agg.stamps[t]
    return Level(streams, chunks, cpu_s, window, st.kernel_reads + st.user_reads, st.coalesced_reads)


def _request(tr: GeventTransport, collector: Collector, n: int, read: list[int]) -> None:
    """One request of ``n`` chunks as a run makes it: counted sent, its tokens in the live windows as
    they come (and in ``read``), its first token in the live TTFT, its record kept."""
    t = collector.targets[0]
    windows = collector.streamed
    collector.started(t)
    tokens_in = windows.request(t)

    def progress(k: int) -> None:
        windows.add(tokens_in, k)
        read[0] += k

    rec = RequestRecord(target=t, phase="selftest", level="selftest")
    stream_request(
        tr,
        build_request(api="chat", model="selftest", prompt="selftest", max_tokens=n),
        rec,
        total_timeout_s=30.0,
        progress=progress,
        first_token=lambda ttft_s: collector.first_token(t, ttft_s),
    )
    windows.done(tokens_in, rec)
    collector.record(rec)


def run_selftest(
    mode: Mode, plan: Sequence[PlanStep], output_tokens: float, stream_tokens_per_s: float, processes: int
) -> SelfTest | None:
    """The self-test for this scenario, or None when ``mode`` says to skip it."""
    expected = expected_chunks_per_s(plan, output_tokens, stream_tokens_per_s)
    if mode == "off" or not should_run(mode, expected / max(processes, 1)):
        return None
    rate = streamed_rate(expected / max(processes, 1))
    # the scenario's beat, faster where that would take more than MAX_STREAMS streams
    interval_ms = max(MIN_INTERVAL_MS, min(1000 / stream_tokens_per_s, MAX_STREAMS * 1000 / rate))
    streams = streams_for(rate, 1000 / interval_ms)
    tokens = min(max(round(output_tokens), MIN_TOKENS), MAX_TOKENS)
    levels = measure(streams=streams, interval_ms=interval_ms, steps=STEPS, tokens=tokens)
    first = levels[0]
    return judge(mode, first.chunks, first.cpu_s, expected, processes, levels=levels)
