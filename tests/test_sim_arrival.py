"""The simulator counts a request's TTFT and E2E from its arrival at the server (the kernel's receive
stamp, sim/arrival.py), not from when its busy event loop got round to parsing it: the time a
request waits in the socket is part of the server's figures, as it is of the client's."""

from __future__ import annotations

import asyncio
import socket
import sys
import time

import pytest

from llmload.sim.arrival import SO_TIMESTAMPNS
from llmload.sim.profiles import load_profile
from llmload.sim.server import SimServer
from tests.send_stamps import wall_offset

STALL_S = 0.3
BODY = b'{"messages":[{"role":"user","content":"hi"}],"max_tokens":3,"ignore_eos":true,"stream":true}'
REQUEST = (
    b"POST /v1/chat/completions HTTP/1.1\r\nhost: sim\r\ncontent-type: application/json\r\n"
    b"content-length: %d\r\n\r\n%b" % (len(BODY), BODY)
)


def _wait_for_kernel_stamps() -> None:
    """Linux turns stamping on for the whole host a moment after the first socket asks (a deferred
    work item): wait until a loopback segment that arrives before its reader asks carries one."""
    deadline = time.monotonic() + 10
    while True:
        with socket.create_server(("127.0.0.1", 0)) as ls:
            ls.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
            with socket.create_connection(ls.getsockname()) as c:
                c.sendall(b"x")
                s, _ = ls.accept()
                with s:
                    _, ancillary, _, _ = s.recvmsg(1, socket.CMSG_SPACE(16))
        if ancillary:
            return
        assert time.monotonic() < deadline, "the kernel gave no receive stamps within 10 s"
        time.sleep(0.01)


async def _one_request_while_the_server_stalls() -> tuple[SimServer, float, float, float]:
    """Send a request, then block the event loop (the server's too) for STALL_S before it can read
    it. Returns the server, the client's TTFT and E2E (send to first token, send to the end), and
    how far the wall clock moved against the monotonic one meanwhile (s)."""
    server = SimServer(load_profile("test-fast-a"))
    port = await server.start()
    try:
        # Connected and sent without yielding to the loop: the request is in the kernel before the
        # server has even accepted the connection (its receive stamps must already be on)
        _wait_for_kernel_stamps()  # the server's listener asked at start
        sock = socket.create_connection(("127.0.0.1", port))
        offset = wall_offset()
        sent = time.monotonic()
        sock.sendall(REQUEST)
        time.sleep(STALL_S)  # the whole process is busy: the request waits in the server's socket
        sock.setblocking(False)
        reader, writer = await asyncio.open_connection(sock=sock)
        first = None
        while True:
            line = await reader.readline()
            if first is None and b'"content":" tok' in line:
                first = time.monotonic()
            if line.startswith(b"data: [DONE]"):
                break
        done = time.monotonic()
        writer.close()
        assert first is not None
        return server, first - sent, done - sent, wall_offset() - offset
    finally:
        await server.close()


@pytest.mark.skipif(sys.platform != "linux", reason="kernel receive stamps are Linux's")
def test_the_time_a_request_waited_in_the_socket_counts_in_the_servers_ttft_and_e2e() -> None:
    server, client_ttft, client_e2e, drift = asyncio.run(_one_request_while_the_server_stalls())
    m = server.metrics
    assert m.ttft.count == 1 and m.e2e.count == 1
    # Lower bounds a busy host cannot break (it only lengthens both): the stall happened after the
    # request reached the socket, so the server's clock ran through it. Stamped at parse time
    # instead, the server's TTFT was one prefill step of test-fast-a (a few ms).
    assert m.ttft.sum >= STALL_S and m.e2e.sum >= STALL_S
    assert m.queue.sum >= STALL_S  # it waited, as far as the engine is concerned, from its arrival
    # and never above the client's: the request reached the server after it was sent, and the
    # client read each token after the server wrote it (1 ms for the clocks' conversion, and the
    # wall clock's drift meanwhile: the server's arrival is a kernel stamp, tests/send_stamps.py's
    # wall_offset says why; CI once read E2E 1.2 ms over the client's on a VM catching its clock up)
    slack = 0.001 + abs(drift)
    assert m.ttft.sum <= client_ttft + slack and m.e2e.sum <= client_e2e + slack, drift
