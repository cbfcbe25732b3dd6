"""The self-test's loopback server: every request streams chunks on a fixed beat, nothing else.

    python -m llmload.client.selftest_server --port-file PATH [--interval-ms 10]

Each POST streams vLLM's chat format (llmload/sim/wire.py): the role chunk, then ``max_tokens``
content chunks ``interval_ms`` apart (the first one interval after the request), usage and
[DONE]. One timer per stream on absolute times, so the beat does not drift with the server's own
work. GET /v1/models lists the one model, ``selftest``; any other request answers 200 ``{}``. Started by llmload/client/selftest.py in its own process, so
the CPU the client spends per chunk can be read apart from the server's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path

from llmload.sim import wire
from llmload.sim.http import HttpProtocol, HttpRequest

MODELS = b'{"object":"list","data":[{"id":"selftest","object":"model","owned_by":"llmload"}]}'


def _stream(loop: asyncio.AbstractEventLoop, proto: HttpProtocol, n: int, interval_s: float) -> None:
    fmt = wire.StreamFormat(
        chat=True,
        request_id="selftest",
        model="selftest",
        created=0,
        prompt_tokens=1,
        include_usage=True,
        continuous_usage=False,
    )
    proto.start_stream()
    proto.send(fmt.role())
    t0 = loop.time()

    def beat(i: int) -> None:
        if proto.closed:
            return
        if i == n:
            proto.end_stream(fmt.final("x", n, "length"))
            return
        proto.send(fmt.content("x", i))
        loop.call_at(t0 + (i + 1) * interval_s, beat, i + 1)

    loop.call_at(t0 + interval_s, beat, 1)


def serve(port_file: Path, interval_ms: float, host: str = "127.0.0.1") -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()

        def handle(req: HttpRequest, proto: HttpProtocol) -> None:
            if req.method != "POST":
                proto.respond(200, MODELS if req.path.startswith("/v1/models") else b"{}")
                return
            n = max(1, int(json.loads(req.body or b"{}").get("max_tokens", 16)))
            _stream(loop, proto, n, interval_ms / 1000)

        server = await loop.create_server(lambda: HttpProtocol(handle), host, 0)
        port = server.sockets[0].getsockname()[1]
        tmp = port_file.with_suffix(".tmp")
        tmp.write_text(str(port))
        os.replace(tmp, port_file)  # whole or absent: the reader never sees half a number
        await server.serve_forever()

    asyncio.run(main())


def command(port_file: Path, interval_ms: float) -> list[str]:
    """This server as a process of its own (llmload/base/children.py); it writes its port to ``port_file``
    once it listens."""
    cmd = [sys.executable, "-m", "llmload.client.selftest_server", "--port-file", str(port_file)]
    return [*cmd, "--interval-ms", str(interval_ms)]


def main() -> int:
    ap = argparse.ArgumentParser(prog="python -m llmload.client.selftest_server")
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--interval-ms", type=float, default=10.0)
    a = ap.parse_args()
    try:
        serve(Path(a.port_file), a.interval_ms)
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
