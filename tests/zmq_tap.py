"""A recording relay between Locust workers and their master, for tests of what workers send.

Workers connect to the relay's port as they would to the master's; for each worker identity the
relay opens its own connection to the master under that identity, and forwards both ways frame for
frame. Each message is written to OUT as it passes, one JSON line: its direction ("up" from a
worker, "down" from the master), its type, its payload's size in bytes and (up only) its data. It
runs until it is terminated.

    python tests/zmq_tap.py LISTEN_PORT MASTER_PORT OUT
"""

from __future__ import annotations

import json
import sys
from typing import Any

import zmq
from locust.rpc.protocol import Message


def record(out: Any, direction: str, payload: bytes) -> None:
    msg = Message.unserialize(payload)
    line = {"dir": direction, "type": msg.type, "bytes": len(payload), "node": msg.node_id}
    if direction == "up":
        line["data"] = msg.data
    delta = msg.data.get("llmload") if msg.type == "stats" and isinstance(msg.data, dict) else None
    if delta:  # each request line's share of the bytes, as Locust's message packs it
        line["line_bytes"] = [len(Message("", x, "").serialize()) for x in delta["lines"]]
    out.write(json.dumps(line, default=str) + "\n")
    out.flush()


def main(listen_port: int, master_port: int, path: str) -> None:
    ctx = zmq.Context()
    front = ctx.socket(zmq.ROUTER)
    front.bind(f"tcp://127.0.0.1:{listen_port}")
    poller = zmq.Poller()
    poller.register(front, zmq.POLLIN)
    backs: dict[bytes, zmq.Socket[bytes]] = {}
    with open(path, "w") as out:
        while True:
            for sock, _ in poller.poll(1000):
                if sock is front:
                    ident, payload = front.recv_multipart()
                    if ident not in backs:
                        back = ctx.socket(zmq.DEALER)
                        back.setsockopt(zmq.IDENTITY, ident)
                        back.connect(f"tcp://127.0.0.1:{master_port}")
                        poller.register(back, zmq.POLLIN)
                        backs[ident] = back
                    record(out, "up", payload)
                    backs[ident].send(payload)
                else:
                    payload = sock.recv()
                    record(out, "down", payload)
                    front.send_multipart([sock.getsockopt(zmq.IDENTITY), payload])


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3])
