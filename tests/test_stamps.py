"""Kernel receive stamps (llmload/client/transport.py, llmload/measure/stamps.py) and what they make of a run.

The scripted server stamps each chunk with its CLOCK_MONOTONIC at the write (``x_ts``), the clock
the client's ``time.perf_counter`` reads on Linux, so a test compares the client's stamp of a
chunk with the moment the server sent it. A greenlet that blocks the event loop stands in for a
busy client: the kernel stamp sees through it, a user-space stamp does not.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import gevent
import gevent.monkey
import httpx
import pytest

from llmload.client.openai_stream import build_request, stream_request
from llmload.client.transport import KERNEL_STAMPS, GeventTransport
from llmload.config.scenario import Client
from llmload.measure.client_health import client_health
from llmload.measure.histogram import Histogram
from llmload.measure.records import RequestRecord
from llmload.measure.stamps import ReadStamps
from tests.conftest import ROOT, llmload_run, start_port_file_process
from tests.send_stamps import wall_offset
from tests.servers import require_binary, stop_process

pytestmark = pytest.mark.skipif(not KERNEL_STAMPS, reason="kernel receive stamps: Linux on x86-64/arm64")

BLOCK_S = 0.3  # the event loop is blocked this long, from 10 ms after the send
FIRST_MS = 40  # the first token is written while the loop is blocked (a server late by 270 ms is not)
MIN_WAIT_MS = 20.0  # a try counts when its first chunk waited this long for the blocked loop
TRIES = 10


@dataclass
class Blocked:
    error_ms: float  # the client's stamp of the first content chunk minus the server's send time
    waited_ms: float  # the loop's unblocking minus the server's send time: how late any read was
    stamps: ReadStamps
    drift_ms: float  # how far the wall clock moved against the monotonic one over the try


def within_ms(b: Blocked, bound: float) -> bool:
    """A kernel stamp's error at most ``bound`` ms, give or take the wall clock's drift over the try
    (tests/send_stamps.py's ``wall_offset`` says why)."""
    return abs(b.error_ms) <= bound + abs(b.drift_ms)


def first_chunk_error_ms(base_url: str, *, kernel: bool, with_headers: bool = False) -> Blocked:
    """The first content chunk, sent while the client's loop was blocked (a busy host may delay the
    server past the block: such a try is made again, up to ``TRIES`` times)."""
    for _ in range(TRIES):
        b = _first_chunk(base_url, kernel=kernel, with_headers=with_headers)
        if b.waited_ms >= MIN_WAIT_MS:
            return b
    pytest.fail(f"in {TRIES} tries the server never wrote its first chunk while the loop was blocked")


def _first_chunk(base_url: str, *, kernel: bool, with_headers: bool) -> Blocked:
    stamps = ReadStamps()
    tr = GeventTransport(base_url, stamps=stamps, kernel_stamps=kernel)
    spec = {"mode": "timed", "n": 2, "first_ms": FIRST_MS, "interval_ms": 600, "with_headers": with_headers}
    req = build_request(api="chat", model="m", prompt="hi", max_tokens=4, extra_body={"llmload_test": spec})
    blocking_sleep = gevent.monkey.get_original("time", "sleep")

    unblocked: list[float] = []

    def block_the_loop() -> None:
        gevent.sleep(0.01)
        blocking_sleep(BLOCK_S)  # no switch: every greenlet, the reader included, waits
        unblocked.append(time.perf_counter())

    blocker = gevent.spawn(block_the_loop)
    offset = wall_offset()
    resp = tr.send(req.method, req.path, req.headers, req.body)
    found = None
    try:
        for t, data in resp.blocks():
            for line in data.split(b"\n"):
                if line.startswith(b"data: {") and b'"content"' in line:
                    obj = json.loads(line[6:])
                    if obj["choices"][0]["delta"].get("content") and "x_ts" in obj:
                        found, sent = (t - obj["x_ts"]) * 1000.0, obj["x_ts"]
                        break
            if found is not None:
                break
    finally:
        resp.close(False)
        blocker.join()
        tr.close()
    assert found is not None, "no content chunk with x_ts"
    return Blocked(found, (unblocked[0] - sent) * 1000.0, stamps, (wall_offset() - offset) * 1000.0)


def test_kernel_stamps_see_through_a_blocked_event_loop(sse_server: str) -> None:
    kernel: list[Blocked] = []
    user: list[float] = []
    for _ in range(3):
        b = first_chunk_error_ms(sse_server, kernel=True)
        kernel.append(b)
        assert b.stamps.source == "kernel" and b.stamps.kernel_reads >= 1
        # the read came once the loop was free: that lateness is measured as client delay
        assert b.stamps.delay.summary_ms()["max"] >= b.waited_ms - b.error_ms - 0.01
        b = first_chunk_error_ms(sse_server, kernel=False)
        user.append(b.error_ms)
        assert b.stamps.source == "user" and b.stamps.kernel_reads == 0 and b.stamps.delay.count == 0
        # the user-space stamp counts the blocked loop as server time; the kernel's does not
        assert b.error_ms >= b.waited_ms - 0.01, (b.error_ms, b.waited_ms)
    # within 1 ms of the server's write (the best of three: a server preempted between taking its
    # stamp and writing is late on its own side), and a tenth of the user-space error at most
    assert any(within_ms(b, 1.0) for b in kernel), [(b.error_ms, b.drift_ms) for b in kernel]
    assert statistics.median(b.error_ms for b in kernel) <= 0.1 * statistics.median(user), (kernel, user)


def test_a_first_token_sent_with_the_headers_keeps_its_kernel_stamp(sse_server: str) -> None:
    """The server holds its headers back and writes them with the first token, while the client's
    loop is blocked: geventhttpclient reads them, and the token still gets the kernel's stamp."""
    tries = []
    for _ in range(3):
        b = first_chunk_error_ms(sse_server, kernel=True, with_headers=True)
        tries.append(b)
        assert b.stamps.user_reads == 0 and b.stamps.kernel_reads >= 1, b.stamps
        assert b.stamps.delay.summary_ms()["max"] >= b.waited_ms - b.error_ms - 0.01
    assert any(within_ms(b, 1.0) for b in tries), [(b.error_ms, b.drift_ms) for b in tries]
    # Through the stream client: the first token's read is counted as kernel-stamped
    stamps = ReadStamps()
    tr = GeventTransport(sse_server, stamps=stamps)
    spec = {"mode": "timed", "n": 3, "first_ms": 5, "interval_ms": 5, "with_headers": True}
    req = build_request(api="chat", model="m", prompt="hi", max_tokens=3, extra_body={"llmload_test": spec})
    rec = stream_request(tr, req, RequestRecord(target="t"))
    tr.close()
    assert rec.status == "ok" and rec.output_tokens == 3
    assert (stamps.first_tokens, stamps.user_first_tokens, stamps.user_reads) == (1, 0, 0)


def test_each_chunk_is_stamped_after_the_servers_kernel_sent_it(sse_server: str) -> None:
    """Kernel to kernel: the server reports its kernel's send stamp of each chunk (``x_txp``,
    tests/send_stamps.py), and the client's receive stamp is never before it, while a user-space
    stamp before the write (``x_ts``) can be late on the server's own side (a preempted server)."""
    tr = GeventTransport(sse_server, stamps=ReadStamps())
    spec = {"mode": "timed", "n": 20, "first_ms": 5, "interval_ms": 5, "send_stamps": True}
    req = build_request(api="chat", model="m", prompt="hi", max_tokens=20, extra_body={"llmload_test": spec})
    chunks: list[dict[str, float]] = []
    offset = wall_offset()
    resp = tr.send(req.method, req.path, req.headers, req.body)
    try:
        for t, data in resp.blocks():
            for line in data.split(b"\n"):
                if line.startswith(b"data: {"):
                    obj = json.loads(line[6:])
                    if "x_txp" in obj:  # the previous chunk's send stamp, known after its write
                        chunks[-1]["tx"] = obj["x_txp"]
                    if "x_ts" in obj:
                        chunks.append({"t": t, "x_ts": obj["x_ts"]})
    finally:
        resp.close(False)
        tr.close()
    slack = 1e-5 + abs(wall_offset() - offset)
    assert len(chunks) == 20 and all("tx" in c for c in chunks), chunks
    # each send stamp is after the server's stamp before that write (one clock), and each receive
    # after its send; 10 us for the wall-to-monotonic conversion on either side, and the wall
    # clock's drift over the request (tests/send_stamps.py's wall_offset)
    assert all(c["tx"] >= c["x_ts"] - slack for c in chunks), (chunks, slack)
    assert all(c["t"] >= c["tx"] - slack for c in chunks), ([(c["t"] - c["tx"]) * 1e3 for c in chunks], slack)


def test_a_read_that_brings_several_chunks_is_counted(sse_server: str) -> None:
    def chunk(text: str) -> str:
        return "data: " + json.dumps({"choices": [{"index": 0, "delta": {"content": text}}]}) + "\n\n"

    frames = [
        [5, chunk("a")],
        [20, chunk("b") + chunk("c") + chunk("d")],  # one write: one read, one stamp for three tokens
        [20, chunk("e")],
        [
            5,
            "data: " + json.dumps({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}) + "\n\n",
        ],
        [1, "data: [DONE]\n\n"],
    ]
    # Counted by the parser whatever stamps the reads (user-space ones here)
    stamps = ReadStamps()
    tr = GeventTransport(sse_server, stamps=stamps, kernel_stamps=False)

    def send(frames: list) -> RequestRecord:
        spec = {"mode": "raw", "frames": frames}
        req = build_request(
            api="chat", model="m", prompt="hi", max_tokens=8, extra_body={"llmload_test": spec}
        )
        return stream_request(tr, req, RequestRecord(target="t"))

    rec = send(frames)
    assert rec.status == "ok" and rec.chunks == 5
    assert rec.coalesced_reads >= 1  # b, c, d (a busy host may join more to them)
    assert stamps.user_reads >= 1 and stamps.kernel_reads == 0
    # the first token written with the next one: its read is coalesced, and its TTFT is theirs
    frames[:2] = [[5, chunk("a") + chunk("b")], [20, chunk("c")]]
    first = send(frames)
    tr.close()
    assert first.status == "ok" and first.first_coalesced and first.coalesced_reads >= 1


@pytest.mark.integration
def test_a_tls_target_keeps_user_space_stamps_and_says_so(tmp_path: Path) -> None:
    openssl = require_binary("openssl")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1"]
        + ["-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
        timeout=60,
    )
    server, port = start_port_file_process(
        [sys.executable, str(ROOT / "tests" / "sse_server.py"), "--tls", str(cert), str(key)], tmp_path, "tls"
    )
    try:
        timed = "{llmload_test: {mode: timed, n: 5, first_ms: 5, interval_ms: 5}}"
        scenario = tmp_path / "tls.yaml"
        scenario.write_text(
            f"targets:\n  - {{name: tls, kind: openai, base_url: 'https://127.0.0.1:{port}', model: test-model, "
            f"extra_body: {timed}}}\n"
            "load: {users: 2, max_requests: 8}\n"
            "client: {loop_lag_threshold_ms: 5000, cpu_threshold_percent: 100}\n"
        )
        out, _ = llmload_run(scenario, tmp_path / "r", env={**os.environ, "SSL_CERT_FILE": str(cert)})
    finally:
        stop_process(server)
    assert out.returncode == 0, out.stderr[-3000:]
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["targets"]["tls"]["requests"]["ok"] == 8
    ts = summary["run"]["client"]["timestamps"]["tls"]
    assert ts["source"] == "user" and ts["kernel_reads"] == 0 and ts["user_reads"] >= 8 * 5
    assert (ts["kernel_sends"], ts["user_sends"]) == (0, 8)  # no send stamps through TLS either
    assert ts["client_delay_ms"]["count"] == 0


def _stamps(
    source: str,
    kernel: int,
    user: int,
    coalesced: int,
    firsts: int = 100,
    user_firsts: int = 0,
    coalesced_firsts: int = 0,
) -> ReadStamps:
    s = ReadStamps(
        source=source,  # type: ignore[arg-type]
        kernel_reads=kernel,
        user_reads=user,
        coalesced_reads=coalesced,
        first_tokens=firsts,
        user_first_tokens=user_firsts,
        coalesced_first_tokens=coalesced_firsts,
    )
    for _ in range(kernel):
        s.delay.record(0.0002)
    return s


def test_the_delays_the_read_path_lists_are_in_the_histogram_and_each_take_hands_them_on_once() -> None:
    s = ReadStamps(source="kernel")
    s.delays.extend([0.0001, 0.0003, 0.0002])  # what the read path appends (response.py)
    assert s.delay.count == 3 and s.delay.summary_ms()["max"] == pytest.approx(0.3)
    s.delays.append(0.004)  # a later read: folded into the same histogram
    wire = s.take()
    assert Histogram.from_wire(wire["delay"]).count == 4 and s.delays == [] and s.delay.count == 0
    s.delays.append(0.001)
    s.delay = Histogram()  # a histogram set in place (a test's) drops what was listed before it
    assert s.delay.count == 0


def test_a_lagging_client_invalidates_only_figures_read_with_user_space_stamps() -> None:
    client = Client(loop_lag_threshold_ms=25.0, cpu_threshold_percent=90.0)
    lag = Histogram()
    for _ in range(99):
        lag.record(0.001)
    lag.record(0.2)
    lag.record(0.2)  # p99 200 ms
    # every target kernel-stamped: loop lag is a note, the ITL of a target with many coalesced reads a flag
    h = client_health(
        client, lag, [50.0], {"a": _stamps("kernel", 1000, 0, 50), "b": _stamps("kernel", 1000, 0, 2)}
    )
    assert not h.unreliable and h.unreliable_reasons == []
    assert len(h.notes) == 1 and "kernel receive stamps: a, b" in h.notes[0]
    assert [(f.target, f.metric) for f in h.flags] == [("a", "itl")]
    assert h.timestamps["a"].client_delay_ms.count == 1000
    # first chunks read with the headers (user-space stamps) while the loop lagged: TTFT flagged
    h = client_health(client, lag, [50.0], {"a": _stamps("kernel", 1000, 100, 0, user_firsts=30)})
    assert [(f.target, f.metric) for f in h.flags] == [("a", "ttft")]
    # header reads that did not bring the first token (a role chunk) flag nothing
    h = client_health(client, lag, [50.0], {"a": _stamps("kernel", 1000, 100, 0, user_firsts=0)})
    assert h.flags == [] and not h.unreliable
    # first tokens read together with later ones while the loop lagged: TTFT flagged, with both reasons
    h = client_health(
        client, lag, [50.0], {"a": _stamps("kernel", 1000, 0, 5, user_firsts=30, coalesced_firsts=5)}
    )
    assert [(f.target, f.metric) for f in h.flags] == [("a", "ttft")]
    assert "30 of 100 first tokens were stamped in user space" in h.flags[0].why
    assert "5 of 100 first tokens came in one read with later ones" in h.flags[0].why
    # ... but not when the client read on time (then whoever merged them, the stamp is not late)
    on_time = Histogram()
    on_time.record(0.001)
    h = client_health(client, on_time, [50.0], {"a": _stamps("kernel", 1000, 0, 5, coalesced_firsts=5)})
    assert h.flags == []
    # no loop lag over its threshold, but the kernel saw the client read 2 ms late: flagged too
    quiet_loop = Histogram()
    quiet_loop.record(0.001)
    slow = _stamps("kernel", 1000, 100, 0, user_firsts=30)
    slow.delay = Histogram()
    slow.delay.record(0.002, n=1000)
    h = client_health(client, quiet_loop, [50.0], {"a": slow})
    assert [(f.target, f.metric) for f in h.flags] == [("a", "ttft")] and h.notes == []
    # a target never read (sequential, unreachable) is judged on nothing: it does not invalidate the run
    h = client_health(
        client, lag, [50.0], {"a": _stamps("kernel", 1000, 0, 0), "b": _stamps("user", 0, 0, 0, 0)}
    )
    assert not h.unreliable and len(h.notes) == 1
    # processes that stamped differently (mixed) are judged as user-space stamps
    h = client_health(client, lag, [50.0], {"a": _stamps("mixed", 500, 500, 0)})
    assert h.unreliable
    # a TLS target read with user-space stamps: the run is invalid as before, and says which
    h = client_health(
        client, lag, [95.0], {"a": _stamps("kernel", 1000, 0, 0), "tls": _stamps("user", 0, 500, 0)}
    )
    assert h.unreliable and len(h.unreliable_reasons) == 2
    assert "(tls: user-space stamps)" in h.unreliable_reasons[0]
    # a quiet client: nothing said
    quiet = Histogram()
    quiet.record(0.001)
    h = client_health(client, quiet, [20.0], {"tls": _stamps("user", 0, 500, 0)})
    assert not h.unreliable and h.notes == [] and h.flags == []


def test_every_request_carries_an_id_the_server_logs_and_the_times_agree(
    tmp_path: Path, sse_server: str
) -> None:
    """Per request, not by distributions: the server's log joins requests.jsonl by X-Request-Id."""
    scenario = tmp_path / "ids.yaml"
    timed = "{llmload_test: {mode: timed, n: 5, first_ms: 30, interval_ms: 5}}"
    scenario.write_text(
        f"name: ids-{os.getpid()}\n"
        f"targets: [{{name: ids, kind: openai, base_url: '{sse_server}', model: test-model, extra_body: {timed}}}]\n"
        "load: {users: 4, max_requests: 24}\n"
        "client: {loop_lag_threshold_ms: 5000, cpu_threshold_percent: 100}\n"
    )
    offset = wall_offset()
    out, _ = llmload_run(scenario, tmp_path / "r")
    slack_ms = 0.002 + abs(wall_offset() - offset) * 1000.0  # and the wall clock's drift (send_stamps.py)
    assert out.returncode == 0, out.stderr[-3000:]
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    run_id = summary["run"]["run_id"]
    lines = [json.loads(x) for x in (tmp_path / "r" / "requests.jsonl").read_text().splitlines()]
    log = httpx.get(sse_server + "/llmload_test/requests", timeout=10).json()
    assert len(lines) == 24
    for line in lines:
        rid = f"{run_id}-{line['target']}-{line['index']}"
        assert rid in log, f"{rid} not in the server's log"
        server_ttft_ms = (log[rid]["first_sent"] - log[rid]["arrived"]) * 1000.0
        # Causal: the client sent before the server read the request, and the kernel received the
        # first token after the server wrote it, so the client's TTFT can only be longer.
        assert line["ttft_ms"] >= server_ttft_ms - slack_ms, (rid, line["ttft_ms"], server_ttft_ms, slack_ms)
    assert summary["run"]["client"]["timestamps"]["ids"]["source"] == "kernel"


@pytest.mark.parametrize("stamps", ["kernel", "user"])
def test_loop_lag_over_its_threshold_invalidates_only_user_space_stamped_runs(
    tmp_path: Path, sse_server: str, stamps: str
) -> None:
    """A threshold no event loop can meet stands in for a busy shared host."""
    scenario = tmp_path / "lag.yaml"
    timed = "{llmload_test: {mode: timed, n: 5, first_ms: 10, interval_ms: 5}}"
    scenario.write_text(
        f"targets: [{{name: t, kind: openai, base_url: '{sse_server}', model: test-model, extra_body: {timed}}}]\n"
        "load: {users: 2, max_requests: 10}\n"
        f"client: {{timestamps: {stamps}, loop_lag_threshold_ms: 0.000001}}\n"
    )
    out, _ = llmload_run(scenario, tmp_path / "r")
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    client = summary["run"]["client"]
    assert client["timestamps"]["t"]["source"] == stamps
    if stamps == "kernel":
        assert out.returncode == 0 and summary["run"]["status"] == "ok", out.stderr[-2000:]
        assert any("event-loop lag" in n and "kernel receive stamps" in n for n in client["notes"])
        assert "kernel receive stamps" in out.stdout + out.stderr  # the terminal says so
    else:
        assert out.returncode == 3 and summary["run"]["status"] == "invalid"
        assert client["unreliable"] and "event-loop lag" in client["unreliable_reasons"][0]
