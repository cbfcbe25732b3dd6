"""What one worker report costs a master: its bytes on the wire, and the master's CPU to decode and merge it.

A worker's report each interval (client.report_interval, 2 s by default) carries llmload's delta
(llmload/measure/runstate.py Collector.drain: exact histograms per target and level, request lines,
windows, stamps) inside Locust's stats message. This bench builds one interval's delta per load
(chunks/s per worker, targets), through the same Collector a worker uses, from request records with
the load's token gaps (200 tokens a request, gaps spread +-50% around the mean, and a TTFT spread),
serializes it with Locust's own Message (msgpack), and times on this host the master's share:
unpack, Aggregator.merge (histograms, live window, request lines handed to the results sink), for
a fleet of N such workers. It projects master CPU at 10, 100, 300 and 1,000 workers on a 2 s
interval as N x (decode + merge) / 2 s.

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
PASSES = 7  # each load's deltas merged into a fresh master this many times


def delta(chunks_per_s: int, targets: int, worker: str, seed: int) -> dict:
    """One interval's delta of a worker streaming ``chunks_per_s`` spread over ``targets``."""
    rng = random.Random(seed)
    names = [f"t{i}" for i in range(targets)]
    c = Collector(names, worker=worker)
    now = time.time()
    for t in names:
        c.streamed.open(t, "main", "1", now - INTERVAL_S)
    requests = int(chunks_per_s * INTERVAL_S / TOKENS)
    gap = 1.0 / (chunks_per_s / (requests / INTERVAL_S)) if requests else 0.02  # per stream
    for i in range(requests):
        t = names[i % targets]
        itl = [gap * rng.uniform(0.5, 1.5) for _ in range(TOKENS - 1)]
        rec = RequestRecord(target=t, index=seed * 1_000_000 + i, worker=worker, phase="main", level="1")
        rec.start_time = now - rng.uniform(0, INTERVAL_S)
        rec.ttft_s = rng.uniform(0.05, 0.4)
        rec.itl_s = itl
        rec.e2e_s = rec.ttft_s + sum(itl)
        rec.output_tokens = rec.chunks = TOKENS
        rec.prompt_tokens = rec.prompt_tokens_client = 512
        rec.finish_reason = "length"
        c.started(t)
        c.record(rec)
    return c.drain()


def master_cost(wire: list[bytes], targets: int) -> float:
    """Seconds of this process's CPU to unpack and merge each delta once (the fleet's interval)."""
    agg = Aggregator([f"t{i}" for i in range(targets)])
    sunk: list[int] = []
    agg.line_sinks.append(lambda lines: sunk.append(len(lines)))
    t0 = time.process_time()
    for b in wire:
        agg.merge(Message.unserialize(b).data["llmload"])
    return time.process_time() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=20, help="distinct workers' deltas timed per load")
    a = ap.parse_args()
    print(f"master cost per worker report ({INTERVAL_S:g} s interval; decode + Aggregator.merge only)")
    head = f"{'chunks/s/worker':>15} {'targets':>7} {'KiB/report':>10} {'merge ms':>9}"
    print(head + "".join(f" {f'CPU% @{n}':>11}" for n in FLEETS))
    for rate, targets in LOADS:
        wire = [
            Message("stats", {"llmload": delta(rate, targets, f"w{i}", i)}, f"w{i}").serialize()
            for i in range(a.reps)
        ]
        passes = sorted(master_cost(wire, targets) / len(wire) for _ in range(PASSES))
        per = passes[len(passes) // 2]  # the median pass: another process on the core only adds
        kib = sum(len(b) for b in wire) / len(wire) / 1024
        cpu = "".join(f" {100 * n * per / INTERVAL_S:>10.1f}%" for n in FLEETS)
        print(f"{rate:>15,} {targets:>7} {kib:>10.1f} {per * 1000:>9.2f}{cpu}")
    print(
        "(CPU% of one core: N workers x merge time / interval; a floor of the master's load, see the docstring)"
    )


if __name__ == "__main__":
    main()
