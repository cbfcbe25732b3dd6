"""Where a chunk's CPU goes on the read path, against the floor of any reader written in Python (issue 27).

The test SSE server (tests/sse_server.py, pinned to one core) streams ``--streams`` closed-loop
requests of 200 chunks at 20 ms gaps; each client runs in its own process, pinned to the other core:

- ``floor``: a bare loop, no gevent: one epoll set of raw sockets, a ``recvmsg`` with the kernel's
  receive stamp (SO_TIMESTAMPNS, as llmload asks) for each ready one, and the next request when a
  body's last chunk came. Nothing is parsed. What the kernel's TCP receive costs plus one Python call
  a read: about the least a Python reader can pay;
- ``read``: llmload's transport and batch reader with a consumer that does nothing: the event loop,
  the HTTP parser, the stamps (llmload/client/response.py, batch_reader.py);
- ``client``: the stream client as a run calls it (``stream_request``: SSE, JSON, the request's
  state and record);
- ``read_py`` and ``client_py``: the same two with the chunked framing read in Python, as before the
  C reader (llmload/client/chunked_reader.py; the transport's ``framing_in_c=False``).

A whole ``llmload run`` adds Locust, the live windows and the reports: bench_fullrun.py. CPU is the
client process's own (user and system apart), over ``--seconds`` after ``--settle``; chunks are counted
by the server. ``read`` under ``floor`` is possible: its reads are in C, the floor's a Python call
each; ``client`` over ``read`` is the stream client's own work (SSE, JSON, the request's state).

    python bench/bench_readpath.py [--streams 400] [--seconds 6] [--repeats 2]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import select
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from clientcpu import CHUNKS, PER_STREAM, quiet, sent, sse_server  # noqa: E402

MODES = ("floor", "read", "client", "read_py", "client_py")
SO_TIMESTAMPNS = 35  # llmload/client/stamped_socket.py
SPEC = {"mode": "timed", "n": CHUNKS, "first_ms": 0, "interval_ms": 1000 / PER_STREAM}


def body() -> bytes:
    return json.dumps(
        {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True, "llmload_test": SPEC}
    ).encode()


class Window:
    """The client's own CPU (user and system apart) and the chunks the server sent, between ``open``
    and ``close``: one JSON line."""

    def __init__(self, mode: str, port: int) -> None:
        self.mode, self.port = mode, port

    def open(self) -> None:
        self.r0, self.n0, self.t0 = (
            resource.getrusage(resource.RUSAGE_SELF),
            sent(self.port),
            time.perf_counter(),
        )

    def close(self) -> None:
        r1, n1, t1 = resource.getrusage(resource.RUSAGE_SELF), sent(self.port), time.perf_counter()
        n = max(n1 - self.n0, 1)
        line = {
            "mode": self.mode,
            "chunks_per_s": round(n / (t1 - self.t0)),
            "user_us": round((r1.ru_utime - self.r0.ru_utime) / n * 1e6, 1),
            "system_us": round((r1.ru_stime - self.r0.ru_stime) / n * 1e6, 1),
        }
        print(json.dumps(line), flush=True)


def floor(port: int, streams: int, seconds: float, settle: float) -> None:
    b = body()
    req = (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(b)}\r\n\r\n"
    ).encode() + b
    ep = select.epoll()
    socks = {}
    for _ in range(streams):
        s = socket.create_connection(("127.0.0.1", port))
        s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        s.setblocking(False)
        s.sendall(req)
        socks[s.fileno()] = s
        ep.register(s.fileno(), select.EPOLLIN)
        time.sleep(1.0 / PER_STREAM / streams)  # spread over one beat, as the other clients
    ancillary = socket.CMSG_SPACE(16)

    def loop(seconds: float) -> None:
        until = time.perf_counter() + seconds
        while time.perf_counter() < until:
            for fd, _ in ep.poll(0.1):
                s = socks[fd]
                data, _anc, _flags, _addr = s.recvmsg(65536, ancillary)
                if data.endswith(b"0\r\n\r\n"):  # the chunked body's end: the stream's next request
                    s.sendall(req)

    w = Window("floor", port)
    loop(settle)
    w.open()
    loop(seconds)
    w.close()


def gevent_client(mode: str, port: int, streams: int, seconds: float, settle: float) -> None:
    import gevent

    from llmload.base.gctune import freeze_startup_objects
    from llmload.client.openai_stream import build_request, stream_request
    from llmload.client.transport import GeventTransport
    from llmload.measure.records import RequestRecord

    b = body()
    req = build_request(
        api="chat", model="m", prompt="hi", max_tokens=CHUNKS, extra_body={"llmload_test": SPEC}
    )

    in_c = not mode.endswith("_py")

    def user(i: int) -> None:
        tr = GeventTransport(
            f"http://127.0.0.1:{port}", read_timeout_s=60.0, kernel_stamps=True, framing_in_c=in_c
        )
        gevent.sleep(i / PER_STREAM / streams)
        while True:
            if mode.startswith("client"):
                stream_request(tr, req, RequestRecord(target="t"))
            else:
                r = tr.send("POST", "/v1/chat/completions", {"Content-Type": "application/json"}, b)
                r.close(r.consume(lambda _t, _d: False))

    freeze_startup_objects()  # as llmload's load processes do
    users = [gevent.spawn(user, i) for i in range(streams)]
    w = Window(mode, port)
    gevent.sleep(settle)
    w.open()  # two blocking HTTP calls to the server's count: a millisecond's pause of the loop
    gevent.sleep(seconds)
    w.close()
    gevent.killall(users, timeout=5)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--streams", type=int, default=400)
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--settle", type=float, default=2.5)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--client", choices=MODES, help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.client == "floor":
        floor(a.port, a.streams, a.seconds, a.settle)
        return 0
    if a.client:
        gevent_client(a.client, a.port, a.streams, a.seconds, a.settle)
        return 0
    cores = sorted(os.sched_getaffinity(0))
    rows: list[dict] = []
    with sse_server(cores[-1]) as port:
        for _ in range(a.repeats):
            for mode in MODES:  # in turn, so the host's drift falls on every mode alike
                quiet(port)
                cmd = [sys.executable, __file__, "--client", mode, "--port", str(port)]
                cmd += ["--streams", str(a.streams), "--seconds", str(a.seconds), "--settle", str(a.settle)]
                p = subprocess.run(
                    ["taskset", "-c", str(cores[0]), *cmd], capture_output=True, text=True, timeout=120
                )
                lines = [x for x in p.stdout.splitlines() if x.startswith("{")]
                if not lines:
                    raise SystemExit(f"{mode} printed nothing: {p.stderr[-2000:]}")
                r = json.loads(lines[-1])
                rows.append(r)
                print(json.dumps(r), flush=True)
    print(f"\n{a.streams} streams, CPU per chunk of one client core (medians of {a.repeats})")
    print("mode      | chunks/s | user us | system us | us per chunk")
    total = {}
    for mode in MODES:
        mine = [r for r in rows if r["mode"] == mode]
        user = statistics.median(r["user_us"] for r in mine)
        system = statistics.median(r["system_us"] for r in mine)
        total[mode] = user + system
        rate = statistics.median(r["chunks_per_s"] for r in mine)
        print(f"{mode:<9} | {rate:>8,.0f} | {user:>7.1f} | {system:>9.1f} | {user + system:>12.1f}")
    print(
        f"the read path / the floor: {total['read'] / total['floor']:.2f}; the stream client / the floor:"
        f" {total['client'] / total['floor']:.2f} (the interpreter's work above the floor:"
        f" {total['client'] - total['floor']:.1f} us per chunk)"
    )
    print(
        f"the framing in C / in Python: the read path {total['read'] / total['read_py']:.2f}, the stream"
        f" client {total['client'] / total['client_py']:.2f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
