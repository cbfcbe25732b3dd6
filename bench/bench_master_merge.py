"""What one worker report costs a master: its bytes on the wire, and the master's CPU to decode and merge it.

A worker's report each interval (client.report_interval, 2 s by default) carries llmload's delta
(llmload/measure/runstate.py Collector.drain: exact histograms per target and level, request lines,
windows, stamps, loop lag) inside Locust's stats message. This bench builds one interval's delta per
load (chunks/s per worker, targets), through the same Collector a worker uses, from request records with
the load's token gaps (200 tokens a request, gaps spread +-50% around the mean, and a TTFT spread),
serializes it with Locust's own Message (msgpack), and times on this host the master's share:
unpack, Aggregator.merge (histograms, live window, request lines handed to the results sink), for
a fleet of N such workers: the mean per report (the median of several passes) and the p99 of one
report's merge over every pass (how long one report holds the master's loop). It projects master
CPU at 10, 100, 300 and 1,000 workers on a 2 s interval as N x (decode + merge) / 2 s.

What it leaves out, and why it is a floor, not the fleet figure (bench/bench_fleet.py measures a
real master against a synthetic fleet of real connections): ZeroMQ's receive, Locust's own stats merge and heartbeats,
the per-interval timeseries rows and the lost-worker checks; and the writing of request lines
(the results sink is a list here).

    python bench/bench_master_merge.py [--reps 20]
"""

from __future__ import annotations

import argparse
import random
import time

from locust.rpc.protocol import Message

from llmload.measure.records import RequestRecord
from llmload.measure.runstate import Aggregator, Collector

INTERVAL_S = 2.0
TOKENS = 200
LOADS = [(2_000, 1), (10_000, 1), (25_000, 1), (10_000, 4)]  # chunks/s per worker, targets
FLEETS = [10, 100, 300, 1000]
LAG_PERIOD_S = 0.01  # a worker samples its event loop's lag each 10 ms (measure/loop_lag.py)
PASSES = 7  # each load's deltas merged into a fresh master this many times


def delta(
    chunks_per_s: int,
    targets: int,
    worker: str,
    seed: int,
    names: list[str] | None = None,
    step: tuple[str, str] = ("main", "1"),
    requests: int | None = None,
) -> dict:
    """One interval's delta of a worker streaming ``chunks_per_s`` spread over ``targets`` (named
    ``names``, in the plan's ``step``), with every part a streaming worker's delta fills: request
    lines and histograms, the live TTFT, token windows, kernel read stamps with their delays, the
    event loop's lag (tests/test_synthetic_worker.py holds its shape to a real worker's). ``requests``:
    that many requests instead of the interval's at the load."""
    rng = random.Random(seed)
    names = names or [f"t{i}" for i in range(targets)]
    c = Collector(names, worker=worker)
    now = time.time()
    for t in names:
        c.streamed.open(t, *step, now - INTERVAL_S)
        c.stamps[t].source = "kernel"
    for _ in range(int(INTERVAL_S / LAG_PERIOD_S)):
        c.loop_lag.record(rng.expovariate(1 / 0.0005))
    nominal = int(chunks_per_s * INTERVAL_S / TOKENS)  # the interval's requests at the load
    gap = 1.0 / (chunks_per_s / (nominal / INTERVAL_S)) if nominal else 0.02  # per stream
    requests = nominal if requests is None else requests  # a report of another count, same streams
    for i in range(requests):
        t = names[i % targets]
        itl = [gap * rng.uniform(0.5, 1.5) for _ in range(TOKENS - 1)]
        rec = RequestRecord(target=t, index=seed * 1_000_000 + i, worker=worker, phase=step[0], level=step[1])
        rec.start_time = now - rng.uniform(0, INTERVAL_S)
        rec.ttft_s = rec.ttfo_s = rng.uniform(0.05, 0.4)  # no reasoning: the first token answers
        rec.itl_s = itl
        rec.e2e_s = rec.ttft_s + sum(itl)
        rec.output_tokens = rec.answer_tokens = rec.chunks = TOKENS
        rec.output_tokens_source = "usage"
        rec.prompt_tokens = rec.prompt_tokens_client = 512
        rec.finish_reason, rec.http_status = "length", 200
        c.started(t)
        c.first_token(t, rec.ttft_s)
        tokens = c.streamed.request(t)
        c.streamed.add(tokens, TOKENS)
        st = c.stamps[t]
        st.kernel_reads, st.first_tokens = st.kernel_reads + TOKENS, st.first_tokens + 1
        for _ in range(TOKENS):  # one read per token, each read some 0.2 ms after the kernel had it
            st.delay.record(rng.expovariate(1 / 0.0002))
        c.streamed.done(tokens, rec)
        c.record(rec)
    return c.drain()


def master_cost(wire: list[bytes], targets: int) -> list[float]:
    """Seconds of this process's CPU to unpack and merge each delta, once each (the fleet's interval)."""
    agg = Aggregator([f"t{i}" for i in range(targets)])
    sunk: list[int] = []
    agg.line_sinks.append(lambda lines: sunk.append(len(lines)))
    out = []
    for b in wire:
        t0 = time.process_time()
        agg.merge(Message.unserialize(b).data["llmload"])
        out.append(time.process_time() - t0)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=20, help="distinct workers' deltas timed per load")
    a = ap.parse_args()
    print(f"master cost per worker report ({INTERVAL_S:g} s interval; decode + Aggregator.merge only)")
    head = f"{'chunks/s/worker':>15} {'targets':>7} {'KiB/report':>10} {'merge ms':>9} {'p99 ms':>7}"
    print(head + "".join(f" {f'CPU% @{n}':>11}" for n in FLEETS))
    for rate, targets in LOADS:
        wire = [
            Message("stats", {"llmload": delta(rate, targets, f"w{i}", i)}, f"w{i}").serialize()
            for i in range(a.reps)
        ]
        each = [master_cost(wire, targets) for _ in range(PASSES)]
        passes = sorted(sum(x) / len(x) for x in each)
        per = passes[len(passes) // 2]  # the median pass: another process on the core only adds
        merges = sorted(x for one in each for x in one)
        p99 = merges[min(len(merges) - 1, int(len(merges) * 0.99))]  # one report's merge, any pass
        kib = sum(len(b) for b in wire) / len(wire) / 1024
        cpu = "".join(f" {100 * n * per / INTERVAL_S:>10.1f}%" for n in FLEETS)
        print(f"{rate:>15,} {targets:>7} {kib:>10.1f} {per * 1000:>9.2f} {p99 * 1000:>7.2f}{cpu}")
    print(
        "(CPU% of one core: N workers x merge time / interval; a floor of the master's load, see the docstring)"
    )


if __name__ == "__main__":
    main()
