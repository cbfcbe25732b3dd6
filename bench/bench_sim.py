"""Benchmark the simulator: streaming capacity on one core, and the calibration of the article profiles.

    .venv/bin/python bench/bench_sim.py                 # capacity: 20 then 400 streams x 50 tok/s
    .venv/bin/python bench/bench_sim.py --calibrate     # 40 closed-loop streams per RTX 6000 Ada profile,
                                                        # prompts from scenarios/quickstart.yaml's workload

The simulator runs as its own (single-threaded) process; this client uses plain non-blocking sockets
and selectors, no HTTP library (``--pin`` pins the simulator to CPU 0 and the client to CPU 1).  Capacity prints tokens/s received against the
model's own rate, how far the server's emission lagged the model clock (its llmload_sim_* metrics)
and how late tokens reached the client, for a light baseline and the heavy load measured in the
same run, with their ratios.  Calibration prints measured output tokens/s against the article's
figure and the model's analytic figure.
"""

from __future__ import annotations

import argparse
import json
import os
import selectors
import socket
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from llmload.sim.offline import closed_loop  # noqa: E402
from llmload.sim.process import SimProcess  # noqa: E402
from llmload.sim.profiles import load_profile  # noqa: E402
from llmload.sim.tokens import chat_token_ids  # noqa: E402

MARK = b'"delta":{"content":"'
END = b"data: [DONE]\n\n\r\n0\r\n\r\n"
KEEP = max(len(MARK), len(END))
PIN = False


@dataclass
class User:
    sock: socket.socket
    request: bytes
    repeat: bool
    buf_tail: bytes = b""
    sent_at: float = 0.0
    stamps: list[tuple[float, int]] = field(default_factory=list)  # (recv time, tokens in it) this request
    streams: list[tuple[float, list[tuple[float, int]]]] = field(default_factory=list)


def make_request(port: int, body: dict) -> bytes:
    payload = json.dumps(body).encode()
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(payload)}\r\n\r\n"
    )
    return head.encode() + payload


def drive(
    port: int,
    users: int,
    body: Callable[[int], dict],
    repeat: bool,
    duration_s: float,
    at: tuple[float, Callable[[], None]] | None = None,
) -> list[User]:
    """Open ``users`` keep-alive connections; each sends ``body(n)`` for its n-th request in all (again and
    again when ``repeat``).

    ``at=(seconds, callback)`` calls back once, that long after the start."""
    sel = selectors.DefaultSelector()
    sent = 0
    us: list[User] = []
    for _ in range(users):
        s = socket.create_connection(("127.0.0.1", port))
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        us.append(User(s, make_request(port, body(sent)), repeat))
        sent += 1
    for u in us:
        u.sent_at = time.perf_counter()
        u.sock.sendall(u.request)
        u.sock.setblocking(False)
        sel.register(u.sock, selectors.EVENT_READ, u)
    start = time.perf_counter()
    deadline = start + duration_s
    active = len(us)
    while active and time.perf_counter() < deadline + 60:
        if at is not None and time.perf_counter() - start >= at[0]:
            at[1]()
            at = None
        for key, _ in sel.select(timeout=1.0):
            u = key.data
            try:
                data = u.sock.recv(262144)
            except BlockingIOError:
                continue
            now = time.perf_counter()
            if not data:
                raise SystemExit("bench: the simulator closed a connection")
            window = u.buf_tail + data
            n = window.count(MARK) - u.buf_tail.count(MARK)
            if n:
                u.stamps.append((now, n))
            if END in window:
                u.streams.append((u.sent_at, u.stamps))
                u.stamps = []
                u.buf_tail = b""
                if u.repeat and now < deadline:
                    u.request = make_request(port, body(sent))
                    sent += 1
                    u.sent_at = time.perf_counter()
                    u.sock.sendall(u.request)  # small request: fits the socket buffer
                else:
                    sel.unregister(u.sock)
                    u.sock.close()
                    active -= 1
                continue
            u.buf_tail = window[-KEEP:]
    return us


def sim_metrics(base: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for fam in text_string_to_metric_families(httpx.get(base + "/metrics", timeout=60).text):
        for s in fam.samples:
            if s.name.startswith("llmload_sim_") and not s.labels:
                out[s.name] = s.value
            if s.name == "llmload_sim_step_lag_seconds_bucket":
                out[f"lag_le_{s.labels['le']}"] = s.value
    return out


def lag_quantile(m: dict[str, float], q: float) -> float:
    count = m["llmload_sim_step_lag_seconds_count"]
    for key in sorted((k for k in m if k.startswith("lag_le_")), key=lambda k: float(k[7:])):
        if m[key] >= q * count:
            return float(key[7:])
    return float("inf")


def cpu_seconds(pid: int) -> float:
    f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def host_busy_seconds() -> float:
    """CPU seconds all processes on this host spent busy (user+nice+system+irq+softirq+steal)."""
    f = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in f[:8])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def capacity(streams: int, step_ms: float, tokens: int) -> dict[str, float]:
    prof = load_profile("test-fast-a").model_dump(mode="json")
    prof.update(name="bench-capacity", max_num_seqs=1024, max_num_batched_tokens=65536, prefix_caching=False)
    prof["step"] = {
        "base_ms": step_ms,
        "per_decode_seq_ms": 0,
        "per_prefill_token_ms": 0,
        "per_context_ktoken_ms": 0,
    }
    req = {"messages": [{"role": "user", "content": "bench"}], "max_tokens": tokens, "ignore_eos": True,
           "stream": True}  # fmt: skip
    with SimProcess(["--profile-json", json.dumps(prof), "--log-level", "error"]) as sim:
        assert sim.proc is not None
        if PIN:
            os.sched_setaffinity(sim.proc.pid, {0})
        cpu0, t0, host0, me0 = (
            cpu_seconds(sim.proc.pid),
            time.perf_counter(),
            host_busy_seconds(),
            cpu_seconds(os.getpid()),
        )
        steady: dict[str, float] = {}

        def mark() -> None:  # server figures once every stream is running (after start-up)
            steady.update(sim_metrics(sim.base_url))

        users = drive(sim.port, streams, lambda _r: req, repeat=False, duration_s=tokens * step_ms / 1000 * 2 + 10,
                      at=(2.0, mark))  # fmt: skip
        wall = time.perf_counter() - t0
        cpu = cpu_seconds(sim.proc.pid) - cpu0
        others = host_busy_seconds() - host0 - cpu - (cpu_seconds(os.getpid()) - me0)
        m = sim_metrics(sim.base_url)
    step = step_ms / 1000
    late: list[float] = []
    firsts, lasts, total = [], [], 0
    for u in users:
        ((_, stamps),) = u.streams
        times = [t for t, n in stamps for _ in range(n)]
        # lateness against the model schedule, anchored on the stream's least-delayed token
        anchor = min(t - k * step for k, t in enumerate(times))
        late += [t - (anchor + k * step) for k, t in enumerate(times)]
        total += len(times)
        firsts.append(stamps[0][0])
        lasts.append(stamps[-1][0])
    span = max(lasts) - min(firsts)
    return {
        "streams": streams,
        "tokens": total,
        "expected_tokens": streams * tokens,
        "tok_s": total / span,
        "model_tok_s": streams / step,
        "server_cpu": cpu / wall,
        "other_cpu": others / wall,
        "steady_late_steps": m["llmload_sim_late_steps_total"]
        - steady.get("llmload_sim_late_steps_total", 0),
        "steady_steps": m["llmload_sim_steps_total"] - steady.get("llmload_sim_steps_total", 0),
        "lag_p50_ms": lag_quantile(m, 0.5) * 1000,
        "lag_p99_ms": lag_quantile(m, 0.99) * 1000,
        "lag_max_ms": m["llmload_sim_clock_lag_max_seconds"] * 1000,
        "late_steps": m["llmload_sim_late_steps_total"],
        "steps": m["llmload_sim_steps_total"],
        "client_late_p50_ms": pct(late, 0.5) * 1000,
        "client_late_p99_ms": pct(late, 0.99) * 1000,
    }


def scenario_messages(path: str) -> Callable[[int], list[dict[str, str]]]:
    """Request i's chat messages from a scenario's workload: what ``llmload run`` would send."""
    from llmload.config.scenario import load_scenario
    from llmload.load.workload import WorkloadSource

    src = WorkloadSource(load_scenario(path).workload)
    return lambda i: src.get(i).messages


def calibrate(
    name: str, users: int, duration_s: float, warmup_s: float, target: float, scenario: str
) -> dict[str, float]:
    prof = load_profile(name)
    messages = scenario_messages(scenario)

    def ids(i: int) -> list[int]:
        return chat_token_ids([(m["role"], m["content"]) for m in messages(i)])

    prompt_len = statistics.mean(len(ids(i)) for i in range(1000))
    analytic = closed_loop(prof, users, 30 * users, ids, 256).throughput

    def body(r: int) -> dict:
        return {"model": prof.model, "messages": messages(r), "max_tokens": 256, "ignore_eos": True,
                "stream": True, "stream_options": {"include_usage": True}}  # fmt: skip

    with SimProcess(["--profile", name, "--log-level", "error"]) as sim:
        assert sim.proc is not None
        if PIN:
            os.sched_setaffinity(sim.proc.pid, {0})
        t0 = time.perf_counter()
        us = drive(sim.port, users, body, repeat=True, duration_s=warmup_s + duration_s)
        m = sim_metrics(sim.base_url)
    w0, w1 = t0 + warmup_s, t0 + warmup_s + duration_s
    got = sum(n for u in us for _, st in u.streams for t, n in st if w0 <= t < w1)
    done = sum(len(u.streams) for u in us)
    ttfts = [st[0][0] - sent for u in us for sent, st in u.streams if st]
    return {
        "measured_tok_s": got / duration_s,
        "target_tok_s": target,
        "analytic_tok_s": analytic,
        "error_pct": (got / duration_s / target - 1) * 100,
        "requests": done,
        "prompt_tokens": prompt_len,
        "ttft_p50_ms": statistics.median(ttfts) * 1000,
        "lag_max_ms": m["llmload_sim_clock_lag_max_seconds"] * 1000,
        "late_steps": m["llmload_sim_late_steps_total"],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calibrate", action="store_true", help="measure the RTX 6000 Ada profiles (40 users)")
    ap.add_argument("--streams", type=int, default=400)
    ap.add_argument(
        "--step-ms", type=float, default=20.0, help="model step time (400 x 1/20 ms = 20,000 tok/s)"
    )
    ap.add_argument("--tokens", type=int, default=500, help="tokens per stream")
    ap.add_argument("--users", type=int, default=40)
    ap.add_argument(
        "--scenario", default=str(ROOT / "scenarios" / "quickstart.yaml"), help="workload for --calibrate"
    )
    ap.add_argument("--duration", type=float, default=40.0)
    ap.add_argument("--warmup", type=float, default=10.0)
    ap.add_argument("--pin", action="store_true", help="pin the simulator to CPU 0 and this client to CPU 1")
    args = ap.parse_args()
    global PIN
    PIN = args.pin and hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) > 1
    if PIN:
        os.sched_setaffinity(0, {1})
    if args.calibrate:
        for name, target in (("vllm-awq-llama3-70b-2x-rtx6000ada", 2210.0),
                             ("aphrodite-exl2-4.5bpw-llama3-70b-2x-rtx6000ada", 2840.0)):  # fmt: skip
            r = calibrate(name, args.users, args.duration, args.warmup, target, args.scenario)
            print(f"{name}: {args.users} closed-loop streams, {args.scenario} prompts ({r['prompt_tokens']:.0f} "
                  f"tokens on average), 256 tokens, {args.duration:.0f} s window after {args.warmup:.0f} s warm-up")  # fmt: skip
            print(f"  measured {r['measured_tok_s']:.1f} tok/s  target {r['target_tok_s']:.0f}  "
                  f"analytic {r['analytic_tok_s']:.1f}  error {r['error_pct']:+.2f}%  "
                  f"ratio measured/analytic {r['measured_tok_s'] / r['analytic_tok_s']:.4f}")  # fmt: skip
            print(f"  requests {r['requests']}  TTFT p50 {r['ttft_p50_ms']:.1f} ms  "
                  f"server lag max {r['lag_max_ms']:.1f} ms  late steps {r['late_steps']:.0f}")  # fmt: skip
        return 0
    base = capacity(20, args.step_ms, args.tokens // 2)
    heavy = capacity(args.streams, args.step_ms, args.tokens)
    for label, r in (("baseline", base), ("heavy", heavy)):
        print(f"{label}: {r['streams']} streams x {1000 / args.step_ms:.0f} tok/s: received {r['tok_s']:.0f} tok/s "
              f"(model {r['model_tok_s']:.0f}, ratio {r['tok_s'] / r['model_tok_s']:.4f}), "
              f"tokens {r['tokens']}/{r['expected_tokens']}, server CPU {r['server_cpu'] * 100:.0f}%, "
              f"other processes {r['other_cpu'] * 100:.0f}% of one core")  # fmt: skip
        print(f"  server emission lag behind model clock: p50 <= {r['lag_p50_ms']:.1f} ms, p99 <= "
              f"{r['lag_p99_ms']:.1f} ms, max {r['lag_max_ms']:.1f} ms, late steps {r['late_steps']:.0f}/"
              f"{r['steps']:.0f} (after start-up {r['steady_late_steps']:.0f}/{r['steady_steps']:.0f}); "
              f"client-side token lateness p50 {r['client_late_p50_ms']:.1f} ms, "
              f"p99 {r['client_late_p99_ms']:.1f} ms")  # fmt: skip
    print(f"heavy/baseline: tok/s x{heavy['tok_s'] / base['tok_s']:.1f}, server CPU x"
          f"{heavy['server_cpu'] / max(base['server_cpu'], 1e-9):.1f}, client lateness p99 x"
          f"{heavy['client_late_p99_ms'] / max(base['client_late_p99_ms'], 1e-3):.1f}")  # fmt: skip
    ok = heavy["tok_s"] >= 0.98 * heavy["model_tok_s"] >= 0.98 * 20000 and heavy["steady_late_steps"] == 0
    print(
        "capacity target (>= 20,000 tok/s without falling behind the model clock):",
        "MET" if ok else "NOT MET",
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
