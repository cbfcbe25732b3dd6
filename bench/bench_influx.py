"""Benchmark: the InfluxDB sink's throughput and the event-loop lag it adds (prints figures).

    .venv/bin/python bench/bench_influx.py [--rate 100000] [--seconds 5] [--target null|influxd]

Runs under gevent monkey-patching, like the load generator. Three greenlets share one core:
a lag probe that sleeps 10 ms again and again and records how late it wakes, a feeder that
hands the sink ``--rate`` request points per second (in 1 ms ticks), and the sink's writer.
The same run is made first with the sink off (the feeder's loop with no sink call: the
baseline) and then on; the script prints the lag percentiles of both, their ratio, the points
written per second and the process CPU per point. The server is a null HTTP server in a
separate process (answers 204 to every write, so the server's own cost is out of the
figures) or, with ``--target influxd``, a real InfluxDB 1.x on a free loopback port.

The process is pinned to one core (the null server to the other) and freezes its start-up
objects (the bench's records among them) as llmload's load processes do (llmload/base/gctune.py). Last,
the formatter alone, in the same run: the fast path (PointFormatter.request) against the generic
encoding of the same fields (lineproto.format_point), points/s and their ratio.

Target: 100,000 points/s sustained with the added loop lag p99 under 1 ms.
"""

from __future__ import annotations

from gevent import monkey

monkey.patch_all()

import argparse  # noqa: E402
import gc  # noqa: E402
import os  # noqa: E402
import resource  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import gevent  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from llmload.base.gctune import freeze_startup_objects  # noqa: E402
from llmload.config.influx_config import InfluxConfig  # noqa: E402
from llmload.measure.records import RequestRecord  # noqa: E402
from llmload.sinks.influx import InfluxSink  # noqa: E402
from llmload.sinks.influx_points import PointFormatter  # noqa: E402
from llmload.sinks.lineproto import format_point, seconds_to_ns  # noqa: E402

NULL_SERVER = r"""
import socket, sys
srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", 0)); srv.listen(16)
print(srv.getsockname()[1], flush=True)
import threading
def serve(c):
    buf = b""
    while True:
        while b"\r\n\r\n" not in buf:
            d = c.recv(1 << 20)
            if not d: return
            buf += d
        head, _, buf = buf.partition(b"\r\n\r\n")
        n = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"): n = int(line.split(b":")[1])
        while len(buf) < n:
            d = c.recv(1 << 20)
            if not d: return
            buf += d
        buf = buf[n:]
        c.sendall(b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n")
while True:
    c, _ = srv.accept(); threading.Thread(target=serve, args=(c,), daemon=True).start()
"""


def percentile(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100.0 * (len(s) - 1))))]


def make_records(n: int) -> list[RequestRecord]:
    t0 = time.time()
    out = []
    for i in range(n):
        itl = [0.02 + (i % 7) * 0.001] * 50
        out.append(
            RequestRecord(
                target="vllm" if i % 2 else "aphrodite",
                index=i,
                start_time=t0 + i * 1e-5,
                intended_time=t0 + i * 1e-5,
                ttft_s=0.08 + (i % 13) * 0.001,
                e2e_s=1.1,
                itl_s=itl,
                prompt_tokens=512,
                output_tokens=51,
            )
        )
    return out


def run_phase(sink: InfluxSink | None, rate: int, seconds: float, records: list[RequestRecord]) -> dict:
    tags = {
        "vllm": {"target": "vllm", "kind": "vllm", "model": "m"},
        "aphrodite": {"target": "aphrodite", "kind": "aphrodite", "model": "m"},
    }
    lags: list[float] = []
    stop = False

    def probe() -> None:
        while not stop:
            t = time.perf_counter()
            gevent.sleep(0.010)
            lags.append((time.perf_counter() - t - 0.010) * 1000.0)

    fed = 0

    def feeder() -> None:
        nonlocal fed
        tick = 0.001
        per_tick = rate * tick
        owed = 0.0
        n = len(records)
        start = time.perf_counter()
        next_t = start
        while time.perf_counter() - start < seconds:
            owed += per_tick
            k = int(owed)
            owed -= k
            for _ in range(k):
                rec = records[fed % n]
                if sink is not None:
                    sink.request(rec, tags[rec.target])
                else:
                    tags[rec.target]  # the same lookup, no sink
                fed += 1
            next_t += tick
            gevent.sleep(max(0.0, next_t - time.perf_counter()))

    gc_pauses: list[float] = []
    gc_t0 = [0.0]

    def on_gc(phase: str, info: dict) -> None:
        if phase == "start":
            gc_t0[0] = time.perf_counter()
        else:
            gc_pauses.append((time.perf_counter() - gc_t0[0]) * 1000.0)

    gc.callbacks.append(on_gc)
    ru0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    g_probe = gevent.spawn(probe)
    gevent.spawn(feeder).join()
    feed_s = time.perf_counter() - t0
    pending_at_end = sink.pending if sink is not None else 0
    stats = sink.close(timeout_s=30) if sink is not None else {"written": 0, "spooled": 0}
    total_s = time.perf_counter() - t0
    stop = True
    g_probe.join()
    ru1 = resource.getrusage(resource.RUSAGE_SELF)
    gc.callbacks.remove(on_gc)
    cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    return {
        "fed": fed,
        "feed_s": feed_s,
        "total_s": total_s,
        "pending_at_end": pending_at_end,
        "written": stats["written"],
        "spooled": stats["spooled"],
        "lag_p50": percentile(lags, 50),
        "lag_p99": percentile(lags, 99),
        "lag_max": max(lags) if lags else float("nan"),
        "cpu_s": cpu,
        "gc_n": len(gc_pauses),
        "gc_max": max(gc_pauses) if gc_pauses else 0.0,
    }


def formatter_rates(records: list[RequestRecord], rounds: int = 3) -> tuple[float, float]:
    """(fast path, generic encoding) points/s formatting and joining ``records``; best of ``rounds``."""
    tags = {"target": "vllm", "kind": "vllm", "model": "m"}

    def fast() -> bytes:
        f = PointFormatter("bench", "local")
        return ("\n".join([f.request(r, tags) or "" for r in records]) + "\n").encode()

    def generic() -> bytes:
        lines = []
        for r in records:
            itl = r.itl_s
            fields = {
                "index": r.index,
                "output_tokens": r.output_tokens,
                "prompt_tokens": r.prompt_tokens,
                "ttft_ms": None if r.ttft_s is None else round(r.ttft_s * 1000.0, 3),
                "e2e_ms": None if r.e2e_s is None else round(r.e2e_s * 1000.0, 3),
                "tpot_ms": None if r.tpot_s is None else round(r.tpot_s * 1000.0, 3),
                "itl_mean_ms": round(sum(itl) / len(itl) * 1000.0, 3) if itl else None,
                "itl_max_ms": round(max(itl) * 1000.0, 3) if itl else None,
            }
            full = {**tags, "run_id": "bench", "status": r.status, "worker": "local", "phase": r.phase}
            lines.append(format_point("llm_request", full, fields, seconds_to_ns(r.start_time)) or "")
        return ("\n".join(lines) + "\n").encode()

    best = {fast: 0.0, generic: 0.0}
    for _ in range(rounds):
        for fn in best:
            t0 = time.perf_counter()
            fn()
            best[fn] = max(best[fn], len(records) / (time.perf_counter() - t0))
    return best[fast], best[generic]


def start_null_server() -> tuple[subprocess.Popen[bytes], str]:
    proc = subprocess.Popen([sys.executable, "-c", NULL_SERVER], stdout=subprocess.PIPE)
    assert proc.stdout is not None
    port = int(proc.stdout.readline())
    return proc, f"http://127.0.0.1:{port}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", type=int, default=100_000, help="points per second to feed")
    ap.add_argument("--seconds", type=float, default=5.0, help="feeding time per phase")
    ap.add_argument("--target", choices=["null", "influxd"], default="null")
    args = ap.parse_args()

    records = make_records(20_000)
    tmp = Path(tempfile.mkdtemp(prefix="bench-influx-"))
    server_ctx = None
    cores = sorted(os.sched_getaffinity(0))
    if args.target == "null":
        proc, url = start_null_server()
        if len(cores) >= 2:
            os.sched_setaffinity(proc.pid, {cores[1]})
    else:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
        from servers import influxdb_server  # type: ignore[import-not-found]

        server_ctx = influxdb_server(tmp)
        handle = server_ctx.__enter__()
        handle.create_database("llmload")
        url, proc = handle.url, None
    os.sched_setaffinity(0, {cores[0]})
    freeze_startup_objects()
    try:
        base = run_phase(None, args.rate, args.seconds, records)
        config = InfluxConfig(url=url, database="llmload", batch_size=5000, flush_interval_s=0.5)
        sink = InfluxSink(config, run_id="bench", spool_dir=tmp / "influx-spool")
        sink.start()
        on = run_phase(sink, args.rate, args.seconds, records)
    finally:
        if proc is not None:
            proc.terminate()
        if server_ctx is not None:
            server_ctx.__exit__(None, None, None)

    print(f"bench_influx: target={args.target} rate={args.rate}/s seconds={args.seconds} pid={os.getpid()}")
    for name, r in (("sink off (baseline)", base), ("sink on", on)):
        print(
            f"  {name:20s} fed={r['fed']:>8d} feed_rate={r['fed'] / r['feed_s']:>9.0f}/s "
            f"written={r['written']:>8d} spooled={r['spooled']} pending_at_feed_end={r['pending_at_end']} "
            f"lag p50={r['lag_p50']:.3f} ms p99={r['lag_p99']:.3f} ms max={r['lag_max']:.3f} ms "
            f"cpu={r['cpu_s']:.2f} s gc={r['gc_n']} (max pause {r['gc_max']:.1f} ms)"
        )
    written_rate = on["written"] / on["total_s"] if on["total_s"] else 0.0
    added_p99 = on["lag_p99"] - base["lag_p99"]
    cpu_per_point_us = (on["cpu_s"] - base["cpu_s"]) / max(1, on["written"]) * 1e6
    print(f"  written rate (incl. final flush) = {written_rate:,.0f} points/s")
    print(f"  sink CPU per point = {cpu_per_point_us:.2f} us (sink-on CPU minus baseline CPU)")
    print(
        f"  loop lag p99 ratio on/off = {on['lag_p99'] / base['lag_p99']:.2f}x; added p99 = {added_p99:.3f} ms "
        f"(target < 1 ms: {'PASS' if added_p99 < 1.0 else 'MISS'})"
    )
    capacity = 1e6 / cpu_per_point_us if cpu_per_point_us > 0 else float("inf")
    print(f"  one-core capacity of the sink at that cost = {capacity:,.0f} points/s (1e6 / CPU per point)")
    kept_up = on["written"] == on["fed"] and on["pending_at_end"] <= max(10_000, args.rate // 2)
    print(
        f"  sustained {args.rate:,}/s (all written, backlog at feed end <= 0.5 s of points): "
        f"{'PASS' if kept_up else 'MISS'}"
    )
    fast, generic = formatter_rates(records)
    print(
        f"  formatter alone: fast path {fast:,.0f} points/s, generic encoding {generic:,.0f} points/s "
        f"(x{fast / generic:.2f})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
