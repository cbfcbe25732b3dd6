"""The stream client's timeouts on a real socket (tests/sse_server.py sends the frames verbatim, with
the silences between them): read_timeout mid-stream through the watchdog, no response headers,
and first_byte_timeout, which allows a long prefill that read_timeout would cut.
"""

from __future__ import annotations

from llmload.client.openai_stream import build_request, stream_request
from llmload.client.transport import GeventTransport
from llmload.measure.records import RequestRecord
from tests.test_stream_client import content, ev


def test_silent_stream_times_out_through_the_watchdog(sse_server: str) -> None:
    """A stream that stops sending is cut after read_timeout (no per-read socket timeout is used)."""

    tr = GeventTransport(sse_server, read_timeout_s=1.0)
    frames = [[5, content("a")], [3000, content("b", finish="stop")]]  # 3 s of silence mid-stream
    req = build_request(
        api="chat",
        model="m",
        prompt="hi",
        max_tokens=4,
        extra_body={"llmload_test": {"mode": "raw", "frames": frames}},
    )
    rec = stream_request(tr, req, RequestRecord(target="t"))
    # Cut in the 3 s of silence (else "b" would have come and the stream ended ok).
    assert rec.status == "timeout" and rec.chunks == 1 and "client.read_timeout" in (rec.error or "")
    # the pool is still usable after a cut stream
    ok = stream_request(
        tr, build_request(api="chat", model="m", prompt="hi", max_tokens=4), RequestRecord(target="t")
    )
    assert ok.status == "ok"


def test_no_response_headers_times_out(sse_server: str) -> None:
    key = __import__("uuid").uuid4().hex
    tr = GeventTransport(sse_server, read_timeout_s=1.0)
    spec = {
        "mode": "stall",
        "stall_key": key,
        "stall_after_s": 0,
        "stall_s": 5,
        "n": 2,
        "first_ms": 1,
        "interval_ms": 1,
    }
    req = build_request(api="chat", model="m", prompt="hi", max_tokens=2, extra_body={"llmload_test": spec})
    rec = stream_request(tr, req, RequestRecord(target="t"))
    assert rec.status == "timeout" and "headers" in (rec.error or "")


def _silence_case(sse_server: str, frames: list, *, read_s: float, first_s: float) -> RequestRecord:
    tr = GeventTransport(sse_server, read_timeout_s=read_s, first_byte_timeout_s=first_s)
    req = build_request(
        api="chat",
        model="m",
        prompt="hi",
        max_tokens=4,
        extra_body={"llmload_test": {"mode": "raw", "frames": frames}},
    )
    rec = stream_request(tr, req, RequestRecord(target="t"))
    tr.close()
    return rec


ROLE = ev({"id": "a", "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})


def test_a_long_prefill_is_allowed_by_first_byte_timeout_not_read_timeout(sse_server: str) -> None:
    """2.5 s before the first token (after the role chunk) is fine with first_byte_timeout 60 s,
    although read_timeout (1 s) would cut the same silence mid-stream."""
    # the tokens and [DONE] in one write: a busy host cannot put a read_timeout's second between them
    frames = [[5, ROLE], [2500, content("a") + content("b", finish="stop") + "data: [DONE]\n\n"]]
    rec = _silence_case(sse_server, frames, read_s=1.0, first_s=60.0)
    assert rec.status == "ok" and rec.chunks == 2, rec.error
    mid = [[5, ROLE], [5, content("a")], [2500, content("b", finish="stop")], [1, "data: [DONE]\n\n"]]
    rec = _silence_case(sse_server, mid, read_s=1.0, first_s=60.0)
    assert rec.status == "timeout" and rec.chunks == 1 and "client.read_timeout" in (rec.error or "")


def test_no_first_token_within_first_byte_timeout(sse_server: str) -> None:
    frames = [[5, ROLE], [2500, content("a", finish="stop")], [1, "data: [DONE]\n\n"]]
    rec = _silence_case(sse_server, frames, read_s=60.0, first_s=1.0)
    assert rec.status == "timeout" and rec.chunks == 0 and "client.first_byte_timeout" in (rec.error or ""), (
        rec.error
    )
