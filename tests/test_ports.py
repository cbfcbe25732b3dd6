"""The ports llmload picks for a master (``run --workers N``) are ones no outgoing connection takes."""

from __future__ import annotations

import random
import socket

from llmload.base.ports import _ephemeral_low, quiet_port


def test_a_quiet_port_is_free_and_below_the_kernels_ephemeral_range() -> None:
    low = _ephemeral_low()
    for seed in range(20):
        port = quiet_port(rng=random.Random(seed))
        assert 1024 <= port < low
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))  # free: it binds


def test_a_port_held_by_another_socket_is_not_picked() -> None:
    first = quiet_port(rng=random.Random(7))
    with socket.socket() as held:
        held.bind(("127.0.0.1", first))
        held.listen()
        assert quiet_port(rng=random.Random(7)) != first  # the same draw, then the next
