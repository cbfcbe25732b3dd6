"""Timing accuracy of the stream client on one core, against a server with known send times.

The server (tests/sse_server.py, its own process pinned to the other core) stamps
every chunk with CLOCK_MONOTONIC at the write; the client (this process, pinned
to one core) stamps each line with the perf_counter of the recv that delivered
it (same clock on Linux). Error = client stamp - server stamp.

Prints TTFT and ITL error p50/p99 at several stream counts of 50 tokens/s each,
the chunk rate and client CPU, and the highest load whose p99 error stays under
2 ms. Baseline in the same run: the same load read with Locust-style
``iter_content(1024)``-like fixed 1 KB reads (what DESIGN.md warns about).

    python bench/bench_stream.py [--levels 100,200,500] [--seconds 8]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import gevent

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from llmload.gctune import freeze_startup_objects  # noqa: E402
from llmload.openai_stream import build_request, stream_request  # noqa: E402
from llmload.records import RequestRecord  # noqa: E402
from llmload.transport import GeventTransport  # noqa: E402

INTERVAL_MS = 20.0  # 50 tokens/s per stream
CHUNKS = 50  # one request = 1 s of streaming
READ_TIMEOUT = 120.0


class Tap(GeventTransport):
    def __init__(self, base_url: str, sink: list[tuple[float, bytes]], fixed_1k: bool = False) -> None:
        super().__init__(base_url, block_size=1024 if fixed_1k else 65536, read_timeout_s=READ_TIMEOUT)
        self.sink = sink
        self.fixed_1k = fixed_1k

    def send(self, method, path, headers, body):  # type: ignore[override]
        resp = super().send(method, path, headers, body)
        inner = resp.blocks
        sink = self.sink
        fixed = self.fixed_1k

        def blocks():
            if not fixed:
                for t, data in inner():
                    sink.append((t, data))
                    yield t, data
                return
            # Baseline: deliver only whole 1 KB pieces, as iter_content(1024) does.
            pending = b""
            for _t, data in inner():
                pending += data
                while len(pending) >= 1024:
                    piece, pending = pending[:1024], pending[1024:]
                    now = time.perf_counter()
                    sink.append((now, piece))
                    yield now, piece
            if pending:
                now = time.perf_counter()
                sink.append((now, pending))
                yield now, pending

        resp.blocks = blocks  # type: ignore[method-assign]
        return resp


def pct(xs: list[float], p: float) -> float:
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))]


def measure(url: str, streams: int, seconds: float, fixed_1k: bool = False) -> dict:
    taps: list[list[tuple[float, bytes]]] = []  # one list per stream: lines never interleave
    records: list[RequestRecord] = []
    spec = {"mode": "timed", "n": CHUNKS, "first_ms": 20, "interval_ms": INTERVAL_MS}
    end = time.perf_counter() + seconds

    def user(i: int) -> None:
        mine: list[tuple[float, bytes]] = []
        taps.append(mine)
        tr = Tap(url, mine, fixed_1k)
        gevent.sleep(i * (1.0 / streams))  # spread starts over one second
        req = build_request(
            api="chat", model="m", prompt="hi", max_tokens=CHUNKS, extra_body={"llmload_test": spec}
        )
        while time.perf_counter() < end:
            records.append(stream_request(tr, req, RequestRecord(target="b")))
        tr.close()

    freeze_startup_objects()  # as llmload's load processes do
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    gevent.joinall([gevent.spawn(user, i) for i in range(streams)], timeout=seconds + 30)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime) / wall * 100
    errs: list[float] = []
    first_errs: list[float] = []
    for stream in taps:
        partial = b""
        for t, data in stream:
            data = partial + data
            lines = data.split(b"\n")
            partial = lines.pop()
            for line in lines:
                if line.startswith(b"data: {") and b'"x_ts"' in line:
                    ev = json.loads(line[6:])
                    e = (t - ev["x_ts"]) * 1000
                    errs.append(e)
                    if ev["x_i"] == 0:
                        first_errs.append(e)
    # ITL error: client gap minus server gap, from consecutive chunks of the same stream
    ok = [r for r in records if r.status == "ok"]
    itl_err = [abs(g * 1000 - INTERVAL_MS) for r in ok for g in r.itl_s]
    return {
        "streams": streams,
        "chunks_per_s": round(len(errs) / wall),
        "client_cpu_percent": round(cpu, 1),
        "requests_ok": len(ok),
        "requests_failed": len(records) - len(ok),
        "ttft_err_p50_ms": round(pct(first_errs, 50), 3),
        "ttft_err_p99_ms": round(pct(first_errs, 99), 3),
        "chunk_err_p50_ms": round(pct(errs, 50), 3),
        "chunk_err_p99_ms": round(pct(errs, 99), 3),
        "itl_err_p50_ms": round(pct(itl_err, 50), 3),
        "itl_err_p99_ms": round(pct(itl_err, 99), 3),
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--levels", default="100,200,300,500")
    ap.add_argument("--seconds", type=float, default=8.0)
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp())
    port_file = tmp / "port"
    cores = sorted(os.sched_getaffinity(0))
    server = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "sse_server.py"), "--port-file", str(port_file)]
    )
    try:
        while not port_file.exists():
            time.sleep(0.02)
        url = f"http://127.0.0.1:{port_file.read_text()}"
        if len(cores) >= 2:
            os.sched_setaffinity(server.pid, {cores[1]})
            os.sched_setaffinity(0, {cores[0]})
        print(
            f"stream timing accuracy: client on core {cores[0]}, server on core {cores[-1]}, 50 tokens/s per stream"
        )
        results = []
        for n in [int(x) for x in a.levels.split(",")]:
            res = measure(url, n, a.seconds)
            results.append(res)
            print(json.dumps(res))
        base = measure(url, 100, a.seconds, fixed_1k=True)
        ok = [r for r in results if r["chunk_err_p99_ms"] < 2.0 and r["requests_failed"] == 0]
        best = max(ok, key=lambda r: r["streams"]) if ok else None
        print("baseline (fixed 1 KB reads, like iter_content(1024)) at 100 streams:", json.dumps(base))
        r100 = next((r for r in results if r["streams"] == 100), results[0])
        ratio = base["ttft_err_p50_ms"] / max(r100["ttft_err_p50_ms"], 1e-3)
        print(
            f"TTFT error p50: recv-sized reader {r100['ttft_err_p50_ms']} ms vs 1 KB reads {base['ttft_err_p50_ms']} ms "
            f"(x{ratio:.0f})"
        )
        if best:
            print(
                f"highest load with chunk error p99 < 2 ms on one core: {best['streams']} streams x 50 tok/s "
                f"= {best['chunks_per_s']} chunks/s (target: 200 streams, 10,000 chunks/s)"
            )
        else:
            print("no level kept chunk error p99 under 2 ms on this machine")
    finally:
        server.terminate()
        server.wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
