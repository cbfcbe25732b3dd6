"""CPU per chunk of a whole ``llmload run`` on one pinned core: the figure issue 27 is about.

The test SSE server (tests/sse_server.py, its own process pinned to one core) streams 200 chunks
per request at 20 ms gaps (50 chunks/s per stream); ``llmload run`` (pinned to the other core) runs
``rate / 50`` closed-loop users against it for ``--seconds``. The client's CPU (its whole process
tree, psutil) is sampled over the steady window, from ``--settle`` seconds after the start to two
seconds before the end, and divided by the chunks read in that window (each request's chunks
spread evenly over its own span, from requests.jsonl). Each rate runs with each reader the run can
use (``client.reader``: ``batched``, one loop reading every ready stream, and ``greenlet``, one
greenlet reading each stream), so the two are compared on the same host in the same run; the
ITL p99 beside it is the run's own, against the server's 20 ms beat.

    python bench/bench_fullrun.py [--rates 5000,10000,20000] [--seconds 20] [--readers batched,greenlet]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
PER_STREAM = 50.0  # chunks/s: one every 20 ms
CHUNKS = 200


def scenario(port: int, users: int, seconds: float, reader: str) -> str:
    test = {"mode": "timed", "n": CHUNKS, "first_ms": 20, "interval_ms": 20}
    target = {
        "name": "t",
        "kind": "openai",
        "base_url": f"http://127.0.0.1:{port}",
        "model": "test-model",
        "extra_body": {"llmload_test": test},
    }
    return json.dumps(
        {
            "name": "fullrun",
            "targets": [target],
            "workload": {"input_tokens": 40, "output_tokens": CHUNKS},
            "load": {"users": users, "spawn_rate": users * 2, "duration": f"{seconds:g}s", "warmup": "0s"},
            "client": {
                "selftest": "on",
                "reader": reader,
                "loop_lag_threshold_ms": 100000,
                "cpu_threshold_percent": 100,
            },
        }
    )


def tree_cpu(p: psutil.Process) -> tuple[float, float]:
    """(user, system) CPU seconds of ``p`` and its children."""
    user = system = 0.0
    for q in [p, *p.children(recursive=True)]:
        try:
            t = q.cpu_times()
        except psutil.Error:
            continue
        user, system = user + t.user, system + t.system
    return user, system


def chunks_in(requests: Path, lo: float, hi: float) -> float:
    n = 0.0
    for line in requests.open():
        r = json.loads(line)
        start, e2e = r["start_time"], (r.get("e2e_ms") or 0.0) / 1000
        if not r.get("chunks") or e2e <= 0:
            continue
        overlap = min(hi, start + e2e) - max(lo, start)
        if overlap > 0:
            n += r["chunks"] * overlap / e2e
    return n


def one(port: int, rate: float, seconds: float, settle: float, reader: str, core: int) -> dict:
    users = max(1, round(rate / PER_STREAM))
    with tempfile.TemporaryDirectory(prefix="llmload-fullrun-") as d:
        sc = Path(d) / "s.yaml"
        sc.write_text(scenario(port, users, seconds, reader))
        res = Path(d) / "r"
        cmd = [
            sys.executable,
            "-m",
            "llmload",
            "run",
            str(sc),
            "--results",
            str(res),
            "--no-reports",
            "--quiet",
        ]
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        os.sched_setaffinity(proc.pid, {core})
        p = psutil.Process(proc.pid)
        time.sleep(settle)
        cpu0, wall0 = tree_cpu(p), time.time()
        time.sleep(max(1.0, seconds - settle))
        cpu1, wall1 = tree_cpu(p), time.time()
        _, err = proc.communicate(timeout=seconds + 120)
        if proc.returncode not in (0, 3):
            raise SystemExit(f"llmload run exited {proc.returncode}: {err[-2000:]}")
        chunks = chunks_in(res / "requests.jsonl", wall0, wall1)
        summary = json.loads((res / "summary.json").read_text())
        itl = summary["targets"]["t"]["latency_ms"]["itl"]["p99"]
        client = summary["run"].get("client") or {}
        stamps = client["timestamps"]["t"]
        selftest = client.get("selftest") or {}
    window = wall1 - wall0
    cpu = sum(cpu1) - sum(cpu0)
    return {
        "reader": reader,
        "rate_asked": rate,
        "users": users,
        "chunks_per_s": round(chunks / window, 1),
        "cpu_percent": round(cpu / window * 100, 1),
        "us_per_chunk": round(cpu / max(chunks, 1.0) * 1e6, 1),
        "system_us_per_chunk": round((cpu1[1] - cpu0[1]) / max(chunks, 1.0) * 1e6, 1),
        "itl_p99_ms": itl,
        "coalesced_percent": round(stamps["coalesced_reads"] / max(stamps["kernel_reads"], 1) * 100, 2),
        "client_delay_p99_ms": stamps["client_delay_ms"]["p99"],
        "selftest_us_per_chunk": selftest.get("chunk_cost_us"),
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rates", default="5000,10000,20000")
    ap.add_argument("--seconds", type=float, default=24.0)
    ap.add_argument("--settle", type=float, default=10.0)
    ap.add_argument("--readers", default="batched,greenlet")
    args = ap.parse_args()
    cores = sorted(os.sched_getaffinity(0))
    with tempfile.TemporaryDirectory(prefix="llmload-fullrun-srv-") as d:
        port_file = Path(d) / "port"
        server = subprocess.Popen(
            [
                sys.executable,
                str(ROOT / "tests" / "sse_server.py"),
                "--port",
                "0",
                "--port-file",
                str(port_file),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            if len(cores) > 1:
                os.sched_setaffinity(server.pid, {cores[-1]})
            for _ in range(200):
                if port_file.exists() and port_file.read_text().strip():
                    break
                time.sleep(0.05)
            port = int(port_file.read_text())
            rows = []
            for rate in [float(r) for r in args.rates.split(",")]:
                for reader in args.readers.split(","):
                    row = one(port, rate, args.seconds, args.settle, reader, cores[0])
                    rows.append(row)
                    print(json.dumps(row), flush=True)
        finally:
            server.kill()
            server.wait()
    print("\nchunks/s asked | reader | chunks/s read | client CPU | us per chunk | ITL p99 (server: 20 ms)")
    for r in rows:
        print(
            f"{r['rate_asked']:>14,.0f} | {r['reader']:<8} | {r['chunks_per_s']:>13,.0f} | {r['cpu_percent']:>9.0f}% |"
            f" {r['us_per_chunk']:>12.1f} | {r['itl_p99_ms']}"
        )
    readers = args.readers.split(",")
    if len(readers) == 2:
        for rate in sorted({r["rate_asked"] for r in rows}):
            a, b = (next(r for r in rows if r["rate_asked"] == rate and r["reader"] == x) for x in readers)
            print(
                f"{rate:,.0f} chunks/s: {readers[0]} / {readers[1]} CPU per chunk = {a['us_per_chunk'] / b['us_per_chunk']:.2f}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
