"""A scripted OpenAI-style SSE server for timing and wire-format tests (and `make bench`).

Real HTTP/1.1 on a real socket (asyncio, hand-written framing, keep-alive,
chunked transfer-encoding), run as its own process:

    python tests/sse_server.py --port 0 --port-file PATH [--tls CERT KEY]

``--tls`` serves HTTPS with that certificate (a TLS target: the client keeps user-space stamps).

The request body's ``llmload_test`` object chooses the behaviour:

- ``{"mode": "timed", "n": 50, "first_ms": 30, "interval_ms": 20, "tokens_per_chunk": 1}``:
  role chunk at once, then ``n`` content chunks scheduled on absolute times (first at ``first_ms`` after the
  request arrived, then every ``interval_ms``). Each chunk (compact JSON, as vLLM's) carries ``x_ts``
  (CLOCK_MONOTONIC at the write) and ``x_t0`` (when the request arrived: on plain HTTP the kernel's receive
  stamp of its last byte, not this loop's read of it), so a test can compare what the client measured with
  what the server actually did. ``"with_headers": true`` holds the response headers and the role chunk back
  and sends them in one write with the first content chunk. ``"send_stamps": true`` (plain HTTP on Linux)
  adds the kernel's send stamp of each chunk's last byte on the same clock (tests/send_stamps.py), known
  only after its write: chunk i carries chunk i-1's as ``x_txp``, and the usage chunk the last one's.
- ``{"mode": "raw", "status": 200, "frames": [[delay_ms, "text"], ...], "cut": false}``:
  writes each frame verbatim as one chunk after its delay; ``cut`` closes the
  socket without ending the chunked body (a cut stream). A status other than 200 answers
  ``body`` as JSON, or ``text`` verbatim as ``content_type`` (default text/html); with
  ``"echo_auth": true`` its error message repeats the Authorization and X-Api-Key headers;
  ``"retry_after": 1`` adds that Retry-After header.
- ``{"mode": "stall", "stall_at": T_MONO, "stall_s": 2.0, ...timed options}``: like
  ``timed``, but a request arriving while ``stall_at <= now < stall_at + stall_s`` waits
  until the stall ends before answering (a server that freezes for a while). With
  ``"stall_key": K, "stall_after_s": S`` instead of ``stall_at``, the stall starts S
  seconds after the first request carrying that key.
- ``{"mode": "hang"}``: take the request, never answer. ``"reset": "before_headers"`` (any mode)
  answers with a TCP RST; ``"reset": true`` in raw mode sends the frames, then a RST.
- ``{"mode": "cycle", "key": K, "specs": [spec, ...]}``: each request takes the next spec of the
  list, in arrival order; GET /llmload_test/stats?key=K says how many arrived, per spec.

Requests that carry ``X-Request-Id`` (llmload sends ``<run_id>-<target>-<index>``) are logged in
timed mode: GET /llmload_test/requests answers ``{id: {"arrived": t, "first_sent": t, "first_sent_wall": t,
"n": N}}`` (the server's CLOCK_MONOTONIC when the first request with that id arrived and when its
first content chunk was written, the wall clock at that write, the clock of requests.jsonl's
``start_time``, and how many requests carried the id), so a benchmark joins each line of requests.jsonl
to what the server did for it.

GET /llmload_test/sent answers ``{"chunks": N}``, the content chunks written so far in timed mode
(a benchmark's count of what any client read, llmload or a peer such as ``vllm bench serve``, which
sends ``llmload_test`` with ``--extra-body``).

Any other path answers /health and /v1/models so readiness checks pass.
"""

from __future__ import annotations

import argparse
import asyncio
import heapq
import json
import os
import signal
import socket
import struct
import time

import orjson
from send_stamps import SendStamps

MONO = time.CLOCK_MONOTONIC
SO_TIMESTAMPNS = 35  # Linux (asm-generic socket.h), as llmload/client/stamped_socket.py
STALL_FIRST: dict[str, float] = {}
CYCLES: dict[str, dict[str, object]] = {}  # cycle key -> {"received": n, "by_spec": [n, ...]}
STREAM_HEAD = b"HTTP/1.1 %d X\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
REQUESTS: dict[str, dict[str, float]] = {}  # X-Request-Id -> {"arrived": t, "first_sent": t} (timed mode)
SENT = {"chunks": 0}  # content chunks written in timed mode (GET /llmload_test/sent)


def now() -> float:
    return time.clock_gettime(MONO)


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


class Scheduler:
    """One timer for all timed streams: writes every due chunk, then sleeps to the next."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.heap: list[tuple[float, int, object]] = []
        self.seq = 0
        self.handle: asyncio.TimerHandle | None = None

    def add(self, due: float, fn: object) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (due, self.seq, fn))
        if self.heap[0][1] == self.seq:
            self._arm()

    def _arm(self) -> None:
        if self.handle is not None:
            self.handle.cancel()
        if self.heap:
            delay = max(0.0, self.heap[0][0] - now())
            self.handle = self.loop.call_later(delay, self._run)

    def _run(self) -> None:
        self.handle = None
        t = now()
        while self.heap and self.heap[0][0] <= t + 0.0002:
            _, _, fn = heapq.heappop(self.heap)
            fn()  # type: ignore[operator]
        self._arm()


class Conn(asyncio.Protocol):
    def __init__(self, sched: Scheduler) -> None:
        self.sched = sched
        self.buf = b""
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.rsock: socket.socket | None = None  # plain HTTP: the connection read with kernel stamps
        self.arrived: float | None = None  # the kernel's receive time of the last read (CLOCK_MONOTONIC)
        self.written = 0  # bytes given to the transport
        self.sends: SendStamps | None = None  # the kernel's send stamps, once a request asked for them

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        if transport.get_extra_info("sslcontext") is None:
            self._read_stamped()

    def _read_stamped(self) -> None:
        """Read requests with the kernel's receive stamps (SO_TIMESTAMPNS) instead of the transport, so
        a request "arrived" when its last byte reached this host, not when this busy loop read it:
        a TTFT measured from the client's kernel send then compares with the server's own exactly."""
        assert self.transport is not None
        # a second descriptor of the same socket: asyncio lets no reader near a transport's own
        self.rsock = socket.socket(fileno=os.dup(self.transport.get_extra_info("socket").fileno()))
        self.rsock.setblocking(False)
        self.rsock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        self.transport.pause_reading()
        asyncio.get_running_loop().add_reader(self.rsock.fileno(), self._readable, self.rsock.fileno())

    def _readable(self, fd: int) -> None:
        assert self.rsock is not None and self.transport is not None
        try:
            data, ancillary, _, _ = self.rsock.recvmsg(65536, socket.CMSG_SPACE(16))
        except (BlockingIOError, InterruptedError):
            if self.sends is not None:
                self.sends.take()
            return
        except OSError:
            asyncio.get_running_loop().remove_reader(fd)
            self.transport.abort()
            return
        if not data:  # the client closed
            asyncio.get_running_loop().remove_reader(fd)
            self.transport.close()
            return
        self.arrived = None
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(payload) >= 16:
                sec, nsec = struct.unpack_from("@qq", payload)
                self.arrived = now() - (time.time() - (sec + nsec * 1e-9))
        self.data_received(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.rsock is not None:
            try:
                asyncio.get_running_loop().remove_reader(self.rsock.fileno())
            except (OSError, ValueError):
                pass
            self.rsock.close()

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while True:
            head_end = self.buf.find(b"\r\n\r\n")
            if head_end < 0:
                return
            head = self.buf[:head_end].decode("latin-1")
            lines = head.split("\r\n")
            method, path, _ = lines[0].split(" ", 2)
            headers = {}
            for ln in lines[1:]:
                k, _, v = ln.partition(":")
                headers[k.strip().lower()] = v.strip()
            length = int(headers.get("content-length", "0"))
            if len(self.buf) < head_end + 4 + length:
                return
            body = self.buf[head_end + 4 : head_end + 4 + length]
            self.buf = self.buf[head_end + 4 + length :]
            self.req_headers = headers
            self.handle(method, path, body)

    def write(self, data: bytes) -> None:
        if not self.closed and self.transport is not None:
            self.transport.write(data)
            self.written += len(data)

    def simple(self, status: int, obj: object, extra: bytes = b"") -> None:
        body = json.dumps(obj).encode()
        self.write(
            b"HTTP/1.1 %d X\r\nContent-Type: application/json\r\n%sContent-Length: %d\r\n\r\n%s"
            % (status, extra, len(body), body)
        )

    def start_stream(self, status: int = 200) -> None:
        self.write(STREAM_HEAD % status)

    def handle(self, method: str, path: str, body: bytes) -> None:
        # when the request's last byte reached this host (kernel stamp), else when this loop read it
        t0 = self.arrived if self.arrived is not None else now()
        if method == "GET":
            if path.startswith("/llmload_test/stats"):  # what a cycle key received, per behaviour
                key = path.partition("key=")[2]
                self.simple(200, CYCLES.get(key, {"received": 0, "by_spec": []}))
            elif path.startswith("/llmload_test/requests"):  # the request-id log (timed mode)
                self.simple(200, REQUESTS)
            elif path.startswith("/llmload_test/sent"):  # content chunks written so far (timed mode)
                self.simple(200, SENT)
            elif path.startswith("/v1/models"):
                self.simple(200, {"object": "list", "data": [{"id": "test-model", "object": "model"}]})
            else:
                self.simple(200, {"status": "ok"})
            return
        try:
            req = json.loads(body or b"{}")
        except ValueError:
            self.simple(400, {"error": {"message": "bad json"}})
            return
        spec = req.get("llmload_test") or {"mode": "timed", "n": 10, "first_ms": 5, "interval_ms": 5}
        mode = spec.get("mode", "timed")
        if mode == "cycle":  # the next behaviour of a list, in the order requests arrive; counted
            specs = spec["specs"]
            tally = CYCLES.setdefault(spec["key"], {"received": 0, "by_spec": [0] * len(specs)})
            i = int(tally["received"]) % len(specs)  # type: ignore[call-overload]
            tally["received"] = int(tally["received"]) + 1  # type: ignore[call-overload]
            tally["by_spec"][i] += 1  # type: ignore[index]
            spec = specs[i]
            mode = spec.get("mode", "timed")
        if mode == "hang":  # accept the request, never answer
            return
        if spec.get("reset") == "before_headers":
            self._reset()
            return
        if mode == "raw":
            self.raw(spec)
        elif mode == "stall":
            key = spec.get("stall_key")
            if key is not None:  # relative: the stall starts stall_after_s after the key's first request
                first = STALL_FIRST.setdefault(key, t0)
                spec = {**spec, "stall_at": first + float(spec.get("stall_after_s", 3.0))}
            start = float(spec["stall_at"])
            end = start + float(spec.get("stall_s", 2.0))
            if start <= t0 < end:
                self.sched.add(end, lambda: self.timed(spec, now()))
            else:
                self.timed(spec, t0)
        else:
            self.timed(spec, t0)

    def raw(self, spec: dict) -> None:
        status = int(spec.get("status", 200))
        frames = spec.get("frames", [])
        if status != 200 and "text" in spec:  # a page as a proxy sends it (e.g. an HTML 502)
            page = str(spec["text"]).encode()
            ctype = str(spec.get("content_type", "text/html")).encode()
            self.write(
                b"HTTP/1.1 %d X\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n%s"
                % (status, ctype, len(page), page)
            )
            return
        if status != 200:
            body = spec.get("body", {"error": {"message": f"status {status}"}})
            if spec.get("echo_auth"):  # a careless server that repeats the credentials it was sent
                auth = self.req_headers.get("authorization", "") + " " + self.req_headers.get("x-api-key", "")
                body = {"error": {"message": f"invalid credentials: {auth.strip()}"}}
            retry = spec.get("retry_after")
            self.simple(
                status, body, b"Retry-After: %s\r\n" % str(retry).encode() if retry is not None else b""
            )
            return
        self.start_stream()
        t = now()
        for delay_ms, text in frames:
            t += delay_ms / 1000.0
            data = text.encode()
            self.sched.add(t, lambda d=data: self.write(chunk(d)))
        if spec.get("reset"):
            self.sched.add(t + 0.001, self._reset)
        elif spec.get("cut"):
            self.sched.add(t + 0.001, self._cut)
        else:
            self.sched.add(t + 0.0005, lambda: self.write(b"0\r\n\r\n"))

    def _cut(self) -> None:
        if self.transport is not None:
            self.transport.close()

    def _reset(self) -> None:
        """Close with a TCP RST (SO_LINGER 0), as a crashed proxy or a killed engine does."""
        if self.transport is not None:
            sock = self.transport.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.transport.abort()

    def timed(self, spec: dict, t0: float) -> None:
        n = int(spec.get("n", 10))
        first = float(spec.get("first_ms", 20)) / 1000.0
        step = float(spec.get("interval_ms", 20)) / 1000.0
        k = int(spec.get("tokens_per_chunk", 1))
        role = chunk(
            b'data: {"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}\n\n'
        )
        held = bool(spec.get("with_headers"))
        if not held:
            self.start_stream()
            self.write(role)
        if spec.get("send_stamps") and self.sends is None and self.rsock is not None:
            self.sends = SendStamps.start(self.rsock, self.written)  # None where refused: no x_txp
        sent_at: dict[int, float] = {}  # chunk index -> the kernel's send stamp of its last byte
        rid = self.req_headers.get("x-request-id")
        log = REQUESTS.setdefault(rid, {"arrived": t0, "n": 0}) if rid else None
        if log is not None:
            log["n"] += 1  # requests that carried this id (a client that sends one twice shows here)

        def send(i: int) -> None:
            ev = {
                "object": "chat.completion.chunk",  # vLLM sends it; AIPerf drops a chunk without it
                "choices": [{"index": 0, "delta": {"content": " tok" * k}, "finish_reason": None}],
                "x_ts": now(),
                "x_t0": t0,
                "x_i": i,
            }
            if i - 1 in sent_at:
                ev["x_txp"] = sent_at[i - 1]  # the previous chunk's send stamp (known only after its write)
            if i == n - 1:
                ev["choices"][0]["finish_reason"] = "length"
            if i == 0 and log is not None:
                log["first_sent"] = ev["x_ts"]  # type: ignore[assignment]
                log["first_sent_wall"] = time.time()
            data = chunk(b"data: " + orjson.dumps(ev) + b"\n\n")
            SENT["chunks"] += 1
            if held and i == 0:
                self.write(STREAM_HEAD % 200 + role + data)
            else:
                self.write(data)
            if self.sends is not None:
                self.sends.expect(self.written, lambda t, i=i: sent_at.__setitem__(i, t))
                self.sends.take()
            if i == n - 1:
                usage = {"prompt_tokens": 10, "completion_tokens": n * k, "total_tokens": 10 + n * k}
                last = {"object": "chat.completion.chunk", "choices": [], "usage": usage}
                last.update({"x_txp": sent_at[i]} if i in sent_at else {})
                tail = b"data: " + orjson.dumps(last) + b"\n\ndata: [DONE]\n\n"
                self.write(chunk(tail) + b"0\r\n\r\n")
            else:  # the next chunk once this one is out: one entry a stream in the timer's heap
                self.sched.add(t0 + first + (i + 1) * step, lambda: send(i + 1))

        self.sched.add(t0 + first, lambda: send(0))


async def serve(host: str, port: int, port_file: str | None, tls: list[str] | None = None) -> None:
    loop = asyncio.get_running_loop()
    sched = Scheduler(loop)
    context = None
    if tls:
        import ssl

        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(tls[0], tls[1])
    server = await loop.create_server(lambda: Conn(sched), host, port, backlog=2048, ssl=context)
    bound = server.sockets[0].getsockname()[1]
    if port_file:
        tmp = port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(str(bound))
        os.replace(tmp, port_file)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    server.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file")
    ap.add_argument("--tls", nargs=2, metavar=("CERT", "KEY"))
    a = ap.parse_args()
    asyncio.run(serve(a.host, a.port, a.port_file, a.tls))


if __name__ == "__main__":
    main()
