"""The batch reader's reads in C (llmload/client/chunked_reader.py, _chunked.c): its chunked framing
against any split of a body, and, on real loopback sockets, the hand-over from geventhttpclient's
header read to the C reader with the server's bytes cut every way that matters: the first token with
the headers, the headers' end split between two writes, chunk extensions and
trailers, framing that is no chunked body, and a body that is not chunked (read in Python). Each
script gives the same record through the C reads and the Python ones, and the kept connection is
reused: the C reader ended its body where the parser would have.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from itertools import pairwise
from typing import Any

import gevent
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmload.client import chunked_reader
from llmload.client.openai_stream import build_request, stream_request
from llmload.client.transport import GeventTransport
from llmload.measure.records import RequestRecord
from tests.http_wire import requests, serving
from tests.required import require

TOKENS = 6


@pytest.fixture(scope="module")
def c() -> Any:
    """The C reader's module (built at install by setup.py; a missing build fails here in CI)."""
    return require(chunked_reader._chunked, "the C reader was not built (no C compiler at install: setup.py)")


def test_the_c_readers_codes_are_the_modules(c: Any) -> None:
    codes = (c.MORE, c.END, c.EOF_, c.AGAIN, c.BAD, c.FOREIGN)
    assert codes == (
        chunked_reader.MORE,
        chunked_reader.END,
        chunked_reader.EOF,
        chunked_reader.AGAIN,
        chunked_reader.BAD,
        chunked_reader.FOREIGN,
    )


def _framed(pieces: list[bytes], ext: bool, trailer: bool) -> bytes:
    out = b"".join(b"%x%s\r\n%s\r\n" % (len(p), b";x=1" if ext else b"", p) for p in pieces)
    return out + b"0\r\n" + (b"X-Trailer: 1\r\n" if trailer else b"") + b"\r\n"


@settings(max_examples=200, deadline=None)
@given(
    pieces=st.lists(st.binary(min_size=1, max_size=300), max_size=8),
    cuts=st.lists(st.integers(min_value=0, max_value=4000), max_size=12),
    ext=st.booleans(),
    trailer=st.booleans(),
)
def test_any_split_of_a_chunked_body_gives_the_body_and_one_end(
    c: Any, pieces: list[bytes], cuts: list[int], ext: bool, trailer: bool
) -> None:
    wire = _framed(pieces, ext, trailer)
    bounds = sorted({0, len(wire), *(c % (len(wire) + 1) for c in cuts)})
    d = c.Decoder()
    body, codes = b"", []
    for a, b in pairwise(bounds):
        got, code = d.feed(wire[a:b])
        body += got
        codes.append(code)
    assert body == b"".join(pieces)
    assert codes[-1] == c.END and c.END not in codes[:-1] and d.ended


@pytest.mark.parametrize(
    "wire",
    [b"zz\r\n", b"3\r\nabcX", b"3\r\nabc\r\nq", b"3x\r\n", b"\r\n", b"0\r\n\r\nmore", b"1" * 16 + b"\r\n"],
)
def test_what_is_no_chunked_framing_is_refused(c: Any, wire: bytes) -> None:
    assert c.Decoder().feed(wire)[1] == c.BAD


def _event(delta: dict[str, Any], finish: str | None = None) -> bytes:
    chunk = {
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


EVENTS = [_event({"role": "assistant", "content": ""})]
EVENTS += [_event({"content": f"t{i}"}) for i in range(TOKENS - 1)]
EVENTS += [_event({"content": "end"}, "stop"), b"data: [DONE]\n\n"]
HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


def _chunk(data: bytes, ext: bytes = b"") -> bytes:
    return b"%x%s\r\n%s\r\n" % (len(data), ext, data)


def _writes(script: str) -> list[bytes]:
    """The server's writes of one response (a pause between each)."""
    chunks = [_chunk(e) for e in EVENTS]
    chunks[-1] += b"0\r\n\r\n"  # [DONE] and the body's end in one write, as uvicorn's are read
    if script == "first token with the headers":
        return [HEAD + chunks[0] + chunks[1], *chunks[2:]]
    if script == "headers' end split":
        return [HEAD[:-1], HEAD[-1:] + chunks[0], *chunks[1:]]
    if script == "extensions and trailers":
        ext = [_chunk(e, b";n=1") for e in EVENTS]
        return [HEAD, *ext[:3], b"".join(ext[3:]) + b"0\r\nX-Done: 1\r\n\r\n"]
    if script == "chunks cut anywhere":
        wire = b"".join(chunks)
        return [HEAD] + [wire[i : i + 37] for i in range(0, len(wire), 37)]
    if script == "no chunked framing":
        return [HEAD, chunks[0], b"zz\r\n" + chunks[1]]
    if script == "the end apart":  # the body's end written by the test, after the client read [DONE]
        return [HEAD, *chunks[:-2], chunks[-2] + chunks[-1][: -len(b"0\r\n\r\n")]]
    assert script == "not chunked"
    body = b"".join(EVENTS)
    return [HEAD.replace(b"Transfer-Encoding: chunked", b"Content-Length: %d" % len(body)), body]


class Scripted:
    """A loopback HTTP/1.1 server that answers each request with a script's writes; counts connections."""

    def __init__(self, script: str) -> None:
        self.script, self.connections = script, 0

    def handle(self, sock: gevent.socket.socket, _addr: object) -> None:
        self.connections += 1
        self.sock = sock
        with sock:
            for _request in requests(sock):
                try:
                    for w in _writes(self.script):
                        sock.sendall(w)
                        gevent.sleep(0.003)
                except OSError:  # the client left (it refused the framing)
                    return
                if self.script == "no chunked framing":
                    return


@pytest.fixture
def scripted(request: pytest.FixtureRequest) -> Iterator[tuple[Scripted, str]]:
    handler = Scripted(request.param)
    with serving(handler.handle) as url:
        yield handler, url


SCRIPTS = [
    "first token with the headers",
    "headers' end split",
    "extensions and trailers",
    "chunks cut anywhere",
    "no chunked framing",
    "not chunked",
]


def _run(url: str, in_c: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[list[RequestRecord], int]:
    calls = [0]
    real = chunked_reader.poll

    def counted(epoll: Any, decoders: dict[int, Any]) -> list[chunked_reader.Read]:
        calls[0] += 1
        return real(epoll, decoders)

    monkeypatch.setattr(chunked_reader, "poll", counted)
    tr = GeventTransport(url, framing_in_c=in_c, read_timeout_s=10)
    req = build_request(api="chat", model="m", prompt="hi", max_tokens=TOKENS)
    try:
        recs = [stream_request(tr, req, RequestRecord(target="t")) for _ in range(3)]  # type: ignore[arg-type]
    finally:
        tr.close()
    return recs, calls[0]


@pytest.mark.parametrize("scripted", SCRIPTS, indirect=True)
def test_every_cut_of_the_bytes_reads_alike_in_c_and_in_python(
    c: Any, scripted: tuple[Scripted, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    handler, url = scripted
    in_c, c_polls = _run(url, True, monkeypatch)
    conns_c = handler.connections
    in_py, py_polls = _run(url, False, monkeypatch)
    assert py_polls == 0
    fields = ("status", "chunks", "output_tokens", "finish_reason")
    assert [[getattr(r, f) for f in fields] for r in in_c] == [[getattr(r, f) for f in fields] for r in in_py]
    if handler.script == "no chunked framing":
        assert all(r.status == "truncated" and "bad HTTP framing" in (r.error or "") for r in in_c + in_py)
        assert c_polls > 0
        return
    assert all(
        r.status == "ok" and r.chunks == TOKENS and r.ttft_s and len(r.itl_s) == TOKENS - 1 for r in in_c
    )
    assert conns_c == 1 and handler.connections == 2  # each transport kept its one connection
    if handler.script == "not chunked":
        assert c_polls == 0  # a Content-Length body is read in Python
    else:
        assert c_polls > 0


@pytest.mark.parametrize("scripted", ["the end apart"], indirect=True)
@pytest.mark.parametrize("in_c", [True, False])
def test_a_bodys_end_written_after_done_keeps_the_connection(
    scripted: tuple[Scripted, str], in_c: bool
) -> None:
    # uvicorn writes a stream's end apart from its [DONE], just after; the client stops reading at
    # [DONE]. Here the end is written once the client has read the last token (its progress call, in
    # the read that brought [DONE]): closing the response finds it waiting, and keeps the connection.
    handler, url = scripted
    tr = GeventTransport(url, framing_in_c=in_c, read_timeout_s=10)
    req = build_request(api="chat", model="m", prompt="hi", max_tokens=TOKENS)
    seen = [0]

    def progress(n: int) -> None:
        seen[0] += n
        if seen[0] % TOKENS == 0:
            handler.sock.sendall(b"0\r\n\r\n")

    try:
        recs = [stream_request(tr, req, RequestRecord(target="t"), progress=progress) for _ in range(3)]  # type: ignore[arg-type]
    finally:
        tr.close()
    assert [r.status for r in recs] == ["ok"] * 3 and seen[0] == 3 * TOKENS
    assert handler.connections == 1
