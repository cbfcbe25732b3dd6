"""One real master against a synthetic fleet: how many workers it carries, and where it stops.

A real `llmload run --expect-workers N` master on this host; one process holds N worker
connections that speak Locust's worker protocol (client_ready, heartbeats each second, spawning,
stats reports each 3 s, client_stopped, quit) and llmload's messages as a worker does (the
scenario asked for, clock probes, readiness, one MSG_SENT before each request, the delta in each
report), built from the product's own names and classes. The deltas are built by the Collector a
worker uses (bench_master_merge.delta: 200-token requests at the load's chunk rate, one target), then
re-stamped per report: this interval's request lines with the worker's own indexes and start times,
its running sent count, the window's times. Nothing is sent to the target; the master reads the
reports as it would a real fleet's.

Per fleet size it prints the master's CPU (% of one core over the steady window), its resident
memory, the heartbeat round trip a worker sees (the master answers each heartbeat from the same
message loop that merges reports: its delay is the report lag), the reports and announcements per
second the fleet actually sent (the generator shares the 2 cores, and says when it fell behind),
and the workers the master counted out. A fleet "held" when nobody was counted out, the master
stayed under half a core and the round trip p99 under 1 s.

    python bench/bench_fleet.py [--fleets 10,100,300,1000] [--chunks 10000] [--seconds 20]
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
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gevent
from locust import __version__ as LOCUST_VERSION
from locust.rpc import zmqrpc
from locust.rpc.protocol import Message
from locust.stats import RequestStats

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_master_merge import delta as collector_delta  # noqa: E402

from llmload.locust.clocks import MSG_CLOCK, MSG_CLOCK_BACK  # noqa: E402
from llmload.locust.conductor import MSG_SCENARIO, MSG_STEP  # noqa: E402
from llmload.locust.distribution import MSG_WANT  # noqa: E402
from llmload.locust.drain import MSG_DRAIN  # noqa: E402
from llmload.locust.fleet import MSG_SENT  # noqa: E402
from llmload.locust.readiness import MSG_REACH  # noqa: E402
from llmload.measure.clock_offset import ClockOffset  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TARGET = "fast"
LEVEL = ("constant-vus", "constant-vus")  # the phase and level of a plain `load: {users, duration}`
TOKENS = 200
REPORT_S = 3.0  # Locust's WORKER_REPORT_INTERVAL
HEARTBEAT_S = 1.0
TICK_S = 0.01
MAX_SENT_S = (
    20_000  # announcements/s one generator process sends on this 2-core host (measured: 15,000 kept up)
)


@dataclass
class Template:
    """One 3 s report's delta at the load, and Locust's stats part of the same report."""

    delta: dict[str, Any]
    line: dict[str, Any]
    locust: dict[str, Any]
    rate: float  # requests/s per worker

    @classmethod
    def build(cls, chunks_per_s: int) -> Template:
        d = collector_delta(chunks_per_s, 1, "w", 1)
        d = json.loads(json.dumps(d).replace('"t0"', f'"{TARGET}"'))
        d["levels"] = [[*LEVEL, x[2]] for x in d["levels"]]
        line = {**d["lines"][0], "phase": LEVEL[0], "level": LEVEL[1]}
        stats = RequestStats()
        for x in d["lines"]:
            stats.log_request("POST", TARGET, x["e2e_ms"], x["output_tokens"])
        locust = {
            "stats": stats.serialize_stats(),
            "stats_total": stats.total.get_stripped_report(),
            "errors": {},
        }
        return cls(d, line, locust, chunks_per_s / TOKENS)


@dataclass
class Synth:
    """One synthetic worker: its connection, where it is in the run, and what it saw."""

    n: int
    client: Any
    id: str
    running: bool = False
    users: dict[str, int] = field(default_factory=dict)
    t_start: float = 0.0
    sent: int = 0
    reported: int = 0  # requests whose lines went in a report
    next_report: float = 0.0
    hb_sent: float = 0.0
    rtts: list[float] = field(default_factory=list)
    clock: ClockOffset = field(default_factory=ClockOffset)
    quit: bool = False
    slot: int = -1
    acked: bool = False

    def send(self, kind: str, data: Any) -> None:
        self.client.send(Message(kind, data, self.id))


def listen(w: Synth) -> None:
    """A worker's side of the master's messages, as Locust's WorkerRunner and llmload's handlers answer."""
    while not w.quit:
        try:
            msg = w.client.recv()
        except Exception:  # noqa: BLE001 - its connection closed at the fleet's end
            return
        kind, data = msg.type, msg.data
        if kind == "ack":
            w.acked = True
            w.send(MSG_WANT, {})
        elif kind == MSG_SCENARIO:
            w.slot = int(data["slot"])
            for _ in range(8):
                w.send(MSG_CLOCK, {"t0": time.time()})
            w.send(MSG_REACH, {"state": "ready", "line": ""})
        elif kind == MSG_CLOCK_BACK:
            w.clock.sample(float(data["t0"]), float(data["t1"]), time.time())
        elif kind == "spawn":
            w.send("spawning", None)
            w.users = dict(data["user_classes_count"])
            w.send("spawning_complete", {"user_classes_count": w.users, "user_count": sum(w.users.values())})
        elif kind == MSG_STEP and not w.running:
            w.running, w.t_start = True, time.time()
            w.next_report = w.t_start + REPORT_S * (w.n % 97) / 97  # reports spread over the interval
        elif kind == MSG_DRAIN:
            w.running = False
        elif kind == "heartbeat" and w.hb_sent:
            w.rtts.append(time.monotonic() - w.hb_sent)
            w.hb_sent = 0.0
        elif kind == "stop":
            w.running = False
            w.send("client_stopped", None)
            w.send("client_ready", LOCUST_VERSION)
        elif kind == "quit":
            w.quit = True


def connect(w: Synth) -> None:
    """client_ready until the master acknowledges it (Locust's worker retries every few seconds)."""
    while not w.acked and not w.quit:
        w.send("client_ready", LOCUST_VERSION)
        gevent.sleep(1.0)


def report(w: Synth, tpl: Template, now: float) -> int:
    """One stats message: Locust's part and llmload's delta for the requests done since the last."""
    d = dict(tpl.delta)
    lines = []
    for i in range(w.reported, w.sent):
        line = dict(tpl.line)
        line.update(
            index=w.slot * 10_000_000 + i,
            worker=w.id,
            start_time=now - REPORT_S * (w.sent - i) / max(1, w.sent - w.reported),
        )
        lines.append(line)
    w.reported = w.sent
    d.update(worker=w.id, lines=lines, sent={TARGET: w.sent}, in_flight={TARGET: 0}, t=now)
    d["users"] = {TARGET: sum(w.users.values())}
    d["streamed"] = {TARGET: len(lines) * TOKENS}
    d["clock"] = w.clock.to_wire()
    data = {**tpl.locust, "user_count": sum(w.users.values()), "user_classes_count": w.users, "llmload": d}
    w.send("stats", data)
    return len(lines)


@dataclass
class Drive:
    """What the fleet sent: each kind of message, and when it fell behind."""

    sent: int = 0
    reports: int = 0
    behind_s: float = 0.0  # the longest a tick came late


def drive(fleet: list[Synth], tpl: Template, until: float, out: Drive) -> None:
    """Every tick: heartbeats due, MSG_SENT for each request due (one message per request, as a worker
    announces each before sending it), reports due."""
    last_hb = 0.0
    while time.time() < until and not all(w.quit for w in fleet):
        t0 = time.monotonic()
        now = time.time()
        if t0 - last_hb >= HEARTBEAT_S:
            last_hb = t0
            for w in fleet:
                w.hb_sent = w.hb_sent or time.monotonic()
                w.send(
                    "heartbeat",
                    {
                        "state": "running" if w.running else "ready",
                        "current_cpu_usage": 50.0,
                        "current_memory_usage": 1,
                    },
                )
        for w in fleet:
            if not w.running:
                if w.sent > w.reported:  # drained: the last requests' lines
                    report(w, tpl, now)
                continue
            due = int((now - w.t_start) * tpl.rate)
            while w.sent < due:
                w.sent += 1
                w.send(MSG_SENT, {"t": TARGET, "n": w.sent})
                out.sent += 1
            if now >= w.next_report:
                w.next_report += REPORT_S
                report(w, tpl, now)
                out.reports += 1
        spent = time.monotonic() - t0
        out.behind_s = max(out.behind_s, spent - TICK_S)
        gevent.sleep(max(0.0, TICK_S - spent))


def cpu_s(pid: int) -> float:
    parts = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def one_fleet(n: int, tpl: Template, seconds: float, tmp: Path, sim_url: str) -> dict[str, Any]:
    port = free_port()
    tag = f"{n}w-{tpl.rate:g}rps"
    scn = tmp / f"fleet-{tag}.yaml"
    scn.write_text(
        "client: {loop_lag_threshold_ms: 100000, cpu_threshold_percent: 100}\n"
        f"targets:\n  - {{name: {TARGET}, kind: openai, base_url: '{sim_url}', model: test-model-a}}\n"
        f"load: {{users: {n}, duration: {seconds:g}s, warmup: 0s, stop_grace: 10s}}\n"
    )
    out = tmp / f"r-{tag}"
    log = open(tmp / f"master-{tag}.log", "wb")  # noqa: SIM115 - closed below
    prof = ["-m", "cProfile", "-o", os.environ["PROFILE"]] if os.environ.get("PROFILE") else []
    cmd = [sys.executable, *prof, "-m", "llmload", "run", str(scn), "--results", str(out), "--quiet"]
    cmd += ["--expect-workers", str(n), "--master-bind-host", "127.0.0.1", "--master-bind-port", str(port)]
    master = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
    fleet: list[Synth] = []
    for i in range(n):
        wid = f"synth{i}_{uuid.uuid4().hex[:12]}"
        w = Synth(i, zmqrpc.Client("127.0.0.1", port, wid), wid)
        fleet.append(w)
        gevent.spawn(listen, w)
        gevent.spawn(connect, w)
    drv = Drive()
    me = os.getpid()
    started = time.monotonic()
    runner = gevent.spawn(drive, fleet, tpl, time.time() + seconds + 240, drv)
    while not all(w.running for w in fleet):  # every worker got its step
        gevent.sleep(0.1)
        if master.poll() is not None or time.monotonic() - started > 180:
            break
    ramp = time.monotonic() - started
    if master.poll() is not None:
        raise SystemExit(
            f"the master exited ({master.returncode}): {(tmp / f'master-{tag}.log').read_text()[-1500:]}"
        )
    gevent.sleep(2.0)  # the first reports
    for w in fleet:
        w.rtts.clear()
    c0, g0, d0, t0 = cpu_s(master.pid), cpu_s(me), (drv.sent, drv.reports), time.monotonic()
    window = max(1.0, seconds - 4.0)
    gevent.sleep(window)
    c1, g1, t1 = cpu_s(master.pid), cpu_s(me), time.monotonic()
    rss = rss_mb(master.pid)
    d1 = (drv.sent, drv.reports)
    while master.poll() is None and time.monotonic() - t1 < 240:
        gevent.sleep(0.2)
    if master.poll() is None:
        master.kill()
    runner.kill()
    for w in fleet:
        w.client.close(linger=0)
    log.close()
    rtts = sorted(x for w in fleet for x in w.rtts)
    summary = json.loads((out / "summary.json").read_text()) if (out / "summary.json").exists() else {}
    lost = len(summary.get("run", {}).get("lost_workers", []))
    agg = json.loads((out / "aggregate.json").read_text()) if (out / "aggregate.json").exists() else {}
    unreported = sum(agg.get("outcome", {}).get("unreported", {}).values())  # named in the verdict
    req = out / "requests.jsonl"
    counted = sum(1 for _ in req.open()) if summary and req.exists() else None  # the lines the master wrote
    el = t1 - t0
    return {
        "workers": n,
        "ramp_s": ramp,
        "master_cpu": (c1 - c0) / el * 100,
        "fleet_cpu": (g1 - g0) / el * 100,
        "rss_mb": rss,
        "rtt_p50_ms": rtts[len(rtts) // 2] * 1000 if rtts else float("nan"),
        "rtt_p99_ms": rtts[int(len(rtts) * 0.99)] * 1000 if rtts else float("nan"),
        "sent_s": (d1[0] - d0[0]) / el,
        "planned_sent_s": n * tpl.rate,
        "reports_s": (d1[1] - d0[1]) / el,
        "behind_s": drv.behind_s,
        "lost": lost,
        "reported": sum(w.reported for w in fleet),  # the fleet's request lines, each in one report
        "counted": counted,
        "unreported": unreported,
        "rc": master.returncode,
        "verdict": summary.get("run", {}).get("verdict", "(no summary.json)"),
    }


def table(chunks: int, fleets: list[int], seconds: float, tmp: Path, url: str) -> bool:
    """One load's table; False when the master lost count of what the fleet reported."""
    tpl = Template.build(chunks)
    print(
        f"\nsynthetic workers at {chunks:,} chunks/s each ({tpl.rate:g} requests/s of {TOKENS} tokens, one target)"
    )
    print(
        f"{'workers':>7} {'master CPU':>10} {'RSS MB':>7} {'hb rtt p50/p99 ms':>18} {'sent/s (plan)':>18}"
        f" {'reports/s':>9} {'fleet CPU':>9} {'lost':>4}  verdict"
    )
    held, good = 0, True
    for n in fleets:
        if n * tpl.rate > MAX_SENT_S:
            print(
                f"{n:>7} not run: {n * tpl.rate:,.0f} announcements/s is more than one generator process sends here"
            )
            continue
        r = one_fleet(n, tpl, seconds, tmp, url)
        if r["lost"] == 0 and r["master_cpu"] < 50 and r["rtt_p99_ms"] < 1000 and r["rc"] in (0, 1):
            held = n
        print(
            f"{n:>7} {r['master_cpu']:>9.0f}% {r['rss_mb']:>7.0f} {r['rtt_p50_ms']:>8.1f} / {r['rtt_p99_ms']:<8.0f}"
            f" {r['sent_s']:>8.0f} ({r['planned_sent_s']:>6.0f}) {r['reports_s']:>9.1f} {r['fleet_cpu']:>8.0f}%"
            f" {r['lost']:>4}  {r['verdict'][:60]}",
            flush=True,
        )
        # the protocol spoken right: every line the fleet reported written, or named as never reported
        if r["lost"] == 0 and r["counted"] is not None and r["counted"] + r["unreported"] != r["reported"]:
            print(
                f"check FAILED: the master wrote {r['counted']} request lines, the fleet reported {r['reported']}"
            )
            good = False
        elif r["unreported"]:
            print(
                f"{'':>7} {r['unreported']:,} requests' records came after the master's drain gave up: named in its verdict"
            )
    print(
        f"largest fleet that held (none lost, master under half a core, heartbeat p99 under 1 s): {held or 'none'}"
    )
    return good


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fleets", default="10,100,300,1000", help="worker counts, comma-separated")
    ap.add_argument(
        "--chunks", default="2000,10000", help="chunks/s each synthetic worker reports, one table each"
    )
    ap.add_argument("--seconds", type=float, default=20.0, help="each fleet's run")
    a = ap.parse_args()
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # the master inherits it: a socket a worker
    tmp = Path(tempfile.mkdtemp(prefix="llmload-fleet-"))
    print(f"one master, {a.seconds:g} s runs (the masters' logs and results: {tmp})")
    port_file = tmp / "sim.port"
    sim_cmd = [sys.executable, "-m", "llmload.sim", "--port", "0", "--port-file", str(port_file)]
    sim = subprocess.Popen([*sim_cmd, "--profile", "test-fast-a"], stdout=subprocess.DEVNULL, cwd=ROOT)
    try:
        while not port_file.exists():
            time.sleep(0.05)
        url = f"http://127.0.0.1:{int(port_file.read_text())}"
        fleets = [int(x) for x in a.fleets.split(",")]
        good = all([table(int(c), fleets, a.seconds, tmp, url) for c in a.chunks.split(",")])
    finally:
        sim.terminate()
        sim.wait(10)
    return 0 if good else 1


if __name__ == "__main__":
    raise SystemExit(main())
