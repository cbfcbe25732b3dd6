"""Synthetic llmload workers for bench/bench_fleet.py: one process holds many worker connections.

Each speaks Locust's worker protocol (client_ready until acknowledged, a heartbeat each second,
spawning, a stats report each 3 s, client_stopped, quit) and llmload's messages as a worker does
(the scenario asked for, clock probes, readiness, one MSG_SENT before each request, the delta in
each report), with the product's own names and classes. The deltas are built by the Collector a
worker uses (bench_master_merge.delta: 200-token requests at the load's chunk rate, one target),
one per count of requests a report carries, then re-stamped per report: that interval's request
lines with the worker's own indexes and start times, its window, its running sent count. Nothing
is sent to the target.

    fleet = start(n, host, port)
    drive(fleet, Template.build(chunks_per_s), until, Drive())

Alone, it is a fleet for any master (tests/test_synthetic_worker.py holds one against a real worker):

    python bench/synthetic_worker.py --master-port PORT [--workers 1] [--chunks 2000]
"""

from __future__ import annotations

import argparse
import socket
import sys
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

TARGET = "fast"
LEVEL = ("constant-vus", "constant-vus")  # the phase and level of a plain `load: {users, duration}`
TOKENS = 200
REPORT_S = 3.0  # Locust's WORKER_REPORT_INTERVAL
HEARTBEAT_S = 1.0
TICK_S = 0.01
CPU_PERCENT = 50.0  # what each worker says of its own CPU, in heartbeats and deltas
LONGEST_S = 600.0  # a fleet run alone ends when its master says quit, or after this


@dataclass
class Template:
    """A report's delta at the load for each count of request lines (its histograms hold exactly
    the requests its lines name, as a worker's do), and Locust's stats part of a report."""

    chunks_per_s: int
    line: dict[str, Any]
    locust: dict[str, Any]
    rate: float  # requests/s per worker
    deltas: dict[int, dict[str, Any]] = field(default_factory=dict)  # by request count, built once each

    @classmethod
    def build(cls, chunks_per_s: int) -> Template:
        d = collector_delta(chunks_per_s, 1, "w", 1, [TARGET], LEVEL)
        stats = RequestStats()
        for x in d["lines"]:
            stats.log_request("POST", TARGET, x["e2e_ms"], x["output_tokens"])
        locust = {
            "stats": stats.serialize_stats(),
            "stats_total": stats.total.get_stripped_report(),
            "errors": {},
        }
        tpl = cls(chunks_per_s, d["lines"][0], locust, chunks_per_s / TOKENS)
        # every count a report is likely to carry, built before the fleet starts (at 10,000 chunks/s,
        # 4 s of CPU that the master's measured run should not share)
        for k in range(int(tpl.rate * REPORT_S) + 4):
            tpl.delta(k)
        return tpl

    def delta(self, requests: int) -> dict[str, Any]:
        """A delta whose histograms count ``requests`` requests (a master's figures then match the
        lines it writes: with one delta for every report, a summary said 80 sent beside 79 lines)."""
        d = self.deltas.get(requests)
        if d is None:
            d = self.deltas[requests] = collector_delta(
                self.chunks_per_s, 1, "w", 1, [TARGET], LEVEL, requests=requests
            )
        return d


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
            w.send("quit", None)


def start(n: int, host: str, port: int) -> list[Synth]:
    """n workers, each connecting and answering its master."""
    fleet = []
    for i in range(n):
        wid = f"{socket.gethostname()}_{uuid.uuid4().hex}"  # as Locust names a worker
        w = Synth(i, zmqrpc.Client(host, port, wid), wid)
        fleet.append(w)
        gevent.spawn(listen, w)
        gevent.spawn(connect, w)
    return fleet


def connect(w: Synth) -> None:
    """client_ready until the master acknowledges it (Locust's worker retries every few seconds)."""
    while not w.acked and not w.quit:
        w.send("client_ready", LOCUST_VERSION)
        gevent.sleep(1.0)


def report(w: Synth, tpl: Template, now: float) -> int:
    """One stats message: Locust's part and llmload's delta for the requests done since the last."""
    d = dict(tpl.delta(w.sent - w.reported))
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
    # its window so far (cumulative, as a worker's): every reported request's tokens since the step
    d["windows"] = [
        [TARGET, *LEVEL, w.t_start, None, w.t_start, now, w.reported * TOKENS, float(w.reported), w.reported]
    ]
    d["clock"] = w.clock.to_wire()
    d["cpu"] = CPU_PERCENT
    data = {**tpl.locust, "user_count": sum(w.users.values()), "user_classes_count": w.users, "llmload": d}
    w.send("stats", data)
    return len(lines)


@dataclass
class Drive:
    """What the fleet sent: announcements and reports."""

    sent: int = 0
    reports: int = 0


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
                        "current_cpu_usage": CPU_PERCENT,
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
        gevent.sleep(max(0.0, TICK_S - (time.monotonic() - t0)))


def main() -> None:
    ap = argparse.ArgumentParser(description="a synthetic fleet for a master on this host")
    ap.add_argument("--master-host", default="127.0.0.1")
    ap.add_argument("--master-port", type=int, required=True)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--chunks", type=int, default=2000, help="chunks/s each worker reports")
    a = ap.parse_args()
    fleet = start(a.workers, a.master_host, a.master_port)
    out = Drive()
    drive(fleet, Template.build(a.chunks), time.time() + LONGEST_S, out)
    print(
        f"sent {out.sent} requests, {out.reports} reports; quit by the master: {all(w.quit for w in fleet)}"
    )


if __name__ == "__main__":
    main()
