"""The stream parser without sockets: every engine quirk, split at every byte boundary, gives one record.

The wire arrives in reads of any size: a line, a JSON object, a CRLF or a UTF-8 character can be cut
anywhere. Each stream below (the quirks docs/engines.md lists) is fed whole, then split in two at
every byte boundary, then in many random pieces; what the bytes decide (class, server message,
tokens, chunks, usage) must not change. Hypothesis then feeds arbitrary bytes in arbitrary reads:
never a crash, always one of the documented classes. tests/memory_transport.py replaces the socket.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmload.client.openai_stream import build_request, stream_request
from llmload.measure.records import STATUS_CLASSES, RequestRecord
from tests.memory_transport import MemoryTransport


def sse(*events: Any, sep: bytes = b"\n\n", space: bool = True, done: bool = True) -> bytes:
    out = b""
    for e in events:
        if isinstance(e, bytes):  # a raw line: a comment, a keep-alive
            out += e + sep
            continue
        out += b"data:" + (b" " if space else b"") + json.dumps(e).encode() + sep
    if done:
        out += b"data: [DONE]" + sep
    return out


def chunk(
    text: str | None, *, finish: str | None = None, usage: dict[str, int] | None = None, **delta: Any
) -> dict:
    d: dict[str, Any] = {"content": text, **delta} if text is not None or delta else {}
    obj: dict[str, Any] = {"id": "x", "choices": [{"index": 0, "delta": d, "finish_reason": finish}]}
    if usage is not None:
        obj["usage"] = usage
    return obj


USAGE = {"prompt_tokens": 7, "completion_tokens": 4, "total_tokens": 11}

STREAMS: dict[str, bytes] = {
    "vllm": sse(
        chunk(None, role="assistant"),
        chunk("Hé"),
        chunk("llo"),
        chunk(" wörld"),
        chunk("!", finish="stop"),
        {"id": "x", "choices": [], "usage": USAGE},
    ),
    "aphrodite-usage-every-chunk": sse(
        chunk("a", usage={"prompt_tokens": 7, "completion_tokens": 1, "total_tokens": 8}),
        chunk("bc", usage={"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}),
        chunk("d", finish="length", usage=USAGE),
    ),
    "tgi-keepalive-comments": sse(
        b": keep-alive", chunk("x"), b": ping", chunk("y"), chunk("z"), chunk("w", finish="stop")
    ),
    "llamacpp-no-space-content-null": sse(
        chunk(None, role="assistant"),
        chunk("q"),
        chunk("r"),
        chunk("s"),
        chunk("t", finish="stop"),
        space=False,
    ),
    "crlf": sse(chunk("one"), chunk("two"), chunk("three", finish="stop"), sep=b"\r\n\r\n"),
    "reasoning-first": sse(
        chunk(None, reasoning_content="think"),
        chunk(None, reasoning_content="ing"),
        chunk("answer", finish="stop"),
    ),
    "reasoning-no-answer": sse(
        chunk(None, role="assistant"),
        chunk(None, reasoning_content="th"),
        chunk(None, reasoning_content="ink", finish="length"),
        {
            "id": "x",
            "choices": [],
            "usage": {**USAGE, "completion_tokens": 2, "completion_tokens_details": {"reasoning_tokens": 2}},
        },
    ),
    "error-after-200": sse(chunk("a"), {"error": {"message": "engine died", "code": 500}}, done=False),
    "no-done-no-finish": sse(chunk("a"), chunk("b"), done=False),
    "malformed-json": sse(chunk("a")).replace(b"[DONE]", b"{not json"),
    "empty-stream": sse(),
    "multibyte-emoji": sse(chunk("🙂"), chunk("日本"), chunk("語", finish="stop")),
}


def run(blocks: list[bytes], *, cut: bool = False) -> RequestRecord:
    req = build_request(api="chat", model="m", prompt="hi", max_tokens=4)
    rec = RequestRecord(target="t", index=0)
    transport = MemoryTransport(200, blocks, cut=cut)
    stream_request(transport, req, rec, clock=transport.clock, wall=lambda: 0.0)
    return rec


def outcome(rec: RequestRecord) -> dict[str, Any]:
    """What the bytes decide: class, tokens, usage, the server's message (not read timing)."""
    d = vars(rec)
    keep = (
        "status",
        "error",
        "output_tokens",
        "chunks",
        "empty_chunks",
        "prompt_tokens",
        "output_tokens_source",
        "reasoning_tokens",
        "answer_tokens",
    )
    return {k: d.get(k) for k in keep}


@pytest.mark.parametrize("name", sorted(STREAMS))
def test_every_split_point_gives_the_same_record(name: str) -> None:
    body = STREAMS[name]
    whole = outcome(run([body]))
    assert whole["status"] in STATUS_CLASSES
    for i in range(1, len(body)):
        assert outcome(run([body[:i], body[i:]])) == whole, f"{name}: split at byte {i} of {len(body)}"
    rng = random.Random(name)
    for _ in range(50):
        cuts = sorted(rng.sample(range(1, len(body)), min(len(body) - 1, rng.randint(2, 12))))
        pieces = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True)]
        assert outcome(run(pieces)) == whole, f"{name}: pieces {[len(p) for p in pieces]}"


def test_the_quirks_read_as_documented() -> None:
    """The whole-body records themselves (what the split tests hold constant)."""
    got = {name: outcome(run([body])) for name, body in STREAMS.items()}
    assert got["vllm"]["status"] == "ok" and got["vllm"]["output_tokens"] == 4
    assert got["aphrodite-usage-every-chunk"]["output_tokens"] == 4  # the last usage, not a sum
    assert got["tgi-keepalive-comments"]["status"] == "ok" and got["tgi-keepalive-comments"]["chunks"] == 4
    assert got["llamacpp-no-space-content-null"]["status"] == "ok"
    assert got["crlf"]["status"] == "ok" and got["crlf"]["chunks"] == 3
    assert got["reasoning-first"]["status"] == "ok"
    assert (got["reasoning-first"]["reasoning_tokens"], got["reasoning-first"]["answer_tokens"]) == (2, 1)
    assert got["reasoning-no-answer"]["status"] == "no_answer"
    assert got["error-after-200"]["status"] == "stream_error" and "engine died" in str(
        got["error-after-200"]["error"]
    )
    assert got["no-done-no-finish"]["status"] == "truncated"
    assert got["malformed-json"]["status"] == "malformed"
    assert got["empty-stream"]["status"] == "empty"
    assert got["multibyte-emoji"]["status"] == "ok" and got["multibyte-emoji"]["chunks"] == 3


def test_a_connection_cut_mid_line_is_truncated_at_every_point() -> None:
    body = STREAMS["vllm"]
    for i in range(1, len(body) - 1):
        rec = run([body[:i]], cut=True)
        assert rec.status in ("truncated", "ok"), (i, rec.status)
        assert rec.status == "truncated" or body[:i].rstrip().endswith(b"[DONE]"), (i, rec.status, rec.error)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=64), max_size=8), st.booleans())
def test_arbitrary_bytes_never_crash_and_get_a_documented_class(blocks: list[bytes], cut: bool) -> None:
    rec = run(blocks, cut=cut)
    assert rec.status in STATUS_CLASSES


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(sorted(STREAMS)), st.lists(st.integers(min_value=0, max_value=10_000), max_size=10))
def test_any_split_of_a_quirk_stream_gives_its_record(name: str, points: list[int]) -> None:
    body = STREAMS[name]
    cuts = sorted({p % len(body) for p in points if p % len(body)})
    pieces = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True)]
    assert outcome(run(pieces)) == outcome(run([body]))
