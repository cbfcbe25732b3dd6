"""The private parts of Locust and geventhttpclient that llmload relies on are still there.

pyproject.toml bounds both packages to the releases checked here. Before raising a bound, this test
says in one line which internal a new release changed, instead of a run failing mid-stream.
"""

from __future__ import annotations

import inspect

import pytest


def source(obj: object) -> str:
    return inspect.getsource(obj)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "needle, why",
    [
        (
            "_sock",
            "llmload/client/transport.py reads the socket directly (recv-sized reads, the watchdog's shutdown)",
        ),
        ("_body_buffer", "llmload/client/transport.py takes the body bytes the parser has buffered"),
        ("_pool", "llmload/client/transport.py keeps a half-read connection out of the pool"),
        ("message_complete", "llmload/client/transport.py ends a body when the parser says so"),
        ("def feed", "llmload/client/transport.py feeds the parser what it read"),
    ],
)
def test_geventhttpclient_response_internals(needle: str, why: str) -> None:
    import geventhttpclient
    from geventhttpclient.response import HTTPResponse, HTTPSocketPoolResponse

    text = source(HTTPSocketPoolResponse) + source(HTTPResponse)
    assert needle in text, f"geventhttpclient {geventhttpclient.__version__} has no {needle!r}: {why}"


def test_locust_internals() -> None:
    import locust
    from locust import runners
    from locust.event import EventHook

    v = locust.__version__
    from locust.event import Events

    assert "heartbeat_received" in Events.__annotations__, (
        f"locust {v}: orphan.py watches the master's heartbeats (heartbeat_received)"
    )
    assert "reverse" in inspect.signature(EventHook.fire).parameters, (
        f"locust {v}: departure.py needs quitting fired in reverse order of registration"
    )
    assert "custom_messages" in source(runners.Runner), f"locust {v}: llmload's worker messages"
    assert "STATE_MISSING" in dir(runners), f"locust {v}: conductor.py reads a missing worker's state"
