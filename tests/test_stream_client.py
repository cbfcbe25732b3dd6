"""The stream client on streams shaped like each engine sends them.

How a stream is parsed (engine shapes, errors after 200, missing [DONE], empty and malformed
streams) is tested in this process on the in-memory transport (tests/memory_transport.py), each
frame one read at the gap the server would leave. What needs a socket (a TCP cut, HTTP error
bodies, connection reuse, the first-token callback on real reads) is sent by
tests/sse_server.py verbatim (raw mode) through the same gevent transport Locust users use.
The client's timeouts: tests/test_stream_timeouts.py.
"""

from __future__ import annotations

import json

import pytest

from llmload.client.openai_stream import build_request, stream_request
from llmload.client.transport import GeventTransport
from llmload.measure.records import RequestRecord
from tests.memory_transport import MemoryTransport


def ev(obj: dict) -> str:
    return "data: " + json.dumps(obj) + "\n\n"


def content(
    text: str | None, *, finish: str | None = None, usage: dict | None = None, key: str = "content"
) -> str:
    delta = {key: text} if text is not None or key == "content" else {}
    obj: dict = {"id": "x", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    if usage is not None:
        obj["usage"] = usage
    return ev(obj)


def run_raw(
    base_url: str | None,
    frames: list[tuple[float, str]],
    *,
    status: int = 200,
    cut: bool = False,
    body=None,
    text: str | None = None,
):
    """One stream of ``frames`` ((ms after the previous, text)); ``base_url`` None: in memory."""
    if base_url is None:
        assert status == 200 and body is None and text is None, "the in-memory transport scripts streams"
        mem = MemoryTransport(
            200, [t.encode() for _, t in frames], cut=cut, gaps_s=[d / 1000 for d, _ in frames]
        )
        req = build_request(api="chat", model="m", prompt="hi", max_tokens=16)
        return stream_request(mem, req, RequestRecord(target="t"), clock=mem.clock)
    tr = GeventTransport(base_url)
    spec: dict = {"mode": "raw", "frames": [[d, t] for d, t in frames], "cut": cut, "status": status}
    if body is not None:
        spec["body"] = body
    if text is not None:
        spec["text"] = text
    req = build_request(api="chat", model="m", prompt="hi", max_tokens=16, extra_body={"llmload_test": spec})
    rec = stream_request(tr, req, RequestRecord(target="t"))
    tr.close()
    return rec


def vllm_frames(n: int = 4) -> list[tuple[float, str]]:
    frames = [(5, ev({"id": "a", "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}))]
    for i in range(n):
        frames.append((10, content(f" w{i}", finish="length" if i == n - 1 else None)))
    frames.append((1, ev({"id": "a", "choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": n}})))
    frames.append((1, "data: [DONE]\n\n"))
    return frames


def test_vllm_shape_role_chunk_final_usage() -> None:
    rec = run_raw(None, vllm_frames(4))
    assert rec.status == "ok", rec.error
    assert rec.output_tokens == 4 and not rec.output_tokens_approx
    assert rec.prompt_tokens == 7
    assert rec.chunks == 4 and len(rec.itl_s) == 3
    # the role-only first chunk is not the first token: TTFT covers the 5 ms + 10 ms before " w0"
    assert rec.ttft_s is not None and rec.ttft_s >= 0.014
    # The last token was written 5 + 4 x 10 ms after the request: never seen earlier. (The gaps
    # themselves shrink on a busy host when a late chunk is read together with its neighbour.)
    assert rec.ttft_s + sum(rec.itl_s) >= 0.044
    assert rec.finish_reason == "length"
    assert rec.itl_tokens == []  # usage only at the end: tokens per chunk unknown


def test_first_token_is_reported_once_when_it_arrives_with_the_records_ttft(sse_server: str) -> None:
    tr = GeventTransport(sse_server)
    spec = {"mode": "raw", "frames": [[d, t] for d, t in vllm_frames(4)], "cut": False, "status": 200}
    req = build_request(api="chat", model="m", prompt="hi", max_tokens=16, extra_body={"llmload_test": spec})
    counted: list[int] = []
    firsts: list[tuple[float, int]] = []  # (TTFT, tokens counted by then)
    rec = stream_request(
        tr,
        req,
        RequestRecord(target="t"),
        progress=counted.append,
        first_token=lambda s: firsts.append((s, sum(counted))),
    )
    tr.close()
    assert rec.status == "ok" and sum(counted) == 4
    assert firsts == [(rec.ttft_s, 0)]  # once, before any token was counted: not at the end


def test_aphrodite_usage_on_every_chunk_and_multi_token_chunks() -> None:
    frames = [(5, content("", usage={"prompt_tokens": 9, "completion_tokens": 0}))]
    done = 0
    for i, k in enumerate([1, 3, 2, 1]):  # chunks carrying 1, 3, 2, 1 tokens (merged deltas)
        done += k
        frames.append(
            (10, content(" x" * k, finish="length" if i == 3 else None, usage={"completion_tokens": done}))
        )
    frames.append((1, "data: [DONE]\n\n"))
    rec = run_raw(None, frames)
    assert rec.status == "ok", rec.error
    assert rec.output_tokens == 7
    assert rec.itl_tokens == [3, 2, 1]  # token-normalised ITL is possible


def test_tgi_no_role_chunk_keepalive_comments_usage_with_empty_id() -> None:
    frames = [
        (5, ": keep-alive\n\n"),
        (5, content("Hello")),
        (5, ":\n\n"),
        (5, content(" world", finish="stop")),
        (1, ev({"id": "", "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2}})),
        (1, "data: [DONE]\n\n"),
    ]
    rec = run_raw(None, frames)
    assert rec.status == "ok" and rec.output_tokens == 2 and rec.chunks == 2


def test_llamacpp_content_null_and_no_space_after_data() -> None:
    frames = [
        (5, 'data:{"choices":[{"index":0,"delta":{"role":"assistant","content":null}}]}\n\n'),
        (5, 'data:{"choices":[{"index":0,"delta":{"content":"A"}}]}\n\n'),
        (
            5,
            'data:{"choices":[{"index":0,"delta":{"content":"B"},"finish_reason":"stop"}],"timings":{"n":2}}\n\n',
        ),
        (1, "data: [DONE]\n\n"),
    ]
    rec = run_raw(None, frames)
    assert rec.status == "ok"
    assert rec.output_tokens == 2 and rec.output_tokens_approx  # no usage: counted from chunks, flagged


def test_reasoning_fields_count_as_text() -> None:
    frames = [
        (5, content("think", key="reasoning_content")),
        (5, content("more", key="reasoning")),
        (5, content("answer", finish="stop")),
        (1, "data: [DONE]\n\n"),
    ]
    rec = run_raw(None, frames)
    assert rec.status == "ok" and rec.chunks == 3
    assert rec.ttft_s is not None and len(rec.itl_s) == 2  # the first token is the reasoning chunk


@pytest.mark.parametrize(
    "err_frame,message",
    [
        (
            ev({"error": {"message": "aborted by engine", "type": "InternalServerError", "code": 500}}),
            "aborted by engine",
        ),
        (ev({"object": "error", "message": "old flat error", "code": 500}), "old flat error"),
        ('error: {"message":"llama.cpp error"}\n\n', "llama.cpp error"),
    ],
)
def test_error_after_http_200_is_a_stream_error(err_frame: str, message: str) -> None:
    frames = [(5, content("a")), (5, err_frame), (1, "data: [DONE]\n\n")]
    rec = run_raw(None, frames)
    assert rec.http_status == 200
    assert rec.status == "stream_error"
    assert rec.error and message in rec.error


def test_cut_stream_is_truncated_not_success(sse_server: str) -> None:
    rec = run_raw(sse_server, [(5, content("a")), (5, content("b"))], cut=True)
    assert rec.status == "truncated"
    assert rec.chunks == 2


def test_missing_done_without_finish_reason_is_truncated() -> None:
    rec = run_raw(None, [(5, content("a")), (5, content("b"))])
    assert rec.status == "truncated"


def test_missing_done_with_finish_reason_is_ok() -> None:
    rec = run_raw(None, [(5, content("a")), (5, content("b", finish="stop"))])
    assert rec.status == "ok"


def test_empty_stream_and_malformed_line() -> None:
    role = ev({"id": "a", "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})
    empty = run_raw(None, [(5, role), (1, content(None, finish="stop")), (1, "data: [DONE]\n\n")])
    assert empty.status == "empty" and empty.chunks == 0
    usage0 = ev({"id": "a", "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 0}})
    said_none = run_raw(None, [(5, content("", finish="stop")), (1, usage0), (1, "data: [DONE]\n\n")])
    assert said_none.status == "empty", "usage says no token was generated"
    bad = run_raw(None, [(5, content("a")), (5, "data: {not json\n\n"), (1, "data: [DONE]\n\n")])
    assert bad.status == "malformed"


def test_tokens_whose_text_is_empty_are_tokens() -> None:
    """vLLM sends one chunk per token even when the token decodes to "" (part of a UTF-8 character)."""
    n = 32
    frames = [(5, ev({"id": "a", "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}))]
    frames += [(3, content("", finish="length" if i == n - 1 else None)) for i in range(n)]
    frames.append((1, ev({"id": "a", "choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": n}})))
    frames.append((1, "data: [DONE]\n\n"))
    rec = run_raw(None, frames)
    assert rec.status == "ok", rec.error
    assert rec.output_tokens == n and rec.chunks == n and len(rec.itl_s) == n - 1
    assert rec.ttft_s is not None and rec.ttft_s < rec.e2e_s
    mixed = [frames[0]] + [(3, content("" if i % 3 else f" w{i}")) for i in range(10)]
    mixed.append((1, content(" end", finish="stop")))
    mixed.append((1, "data: [DONE]\n\n"))
    approx = run_raw(None, mixed)  # no usage at all: token-bearing chunks are the count
    assert approx.status == "ok" and approx.output_tokens == 11 and approx.output_tokens_approx
    assert approx.output_tokens_source == "chunks"


def test_closing_chunk_without_a_token_is_not_counted() -> None:
    """A final `content: ""` chunk that only carries finish_reason, with usage saying n tokens."""
    frames = [(5, content(f" w{i}")) for i in range(4)]
    frames.append((5, content("", finish="stop")))
    frames.append((1, ev({"id": "a", "choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 4}})))
    frames.append((1, "data: [DONE]\n\n"))
    rec = run_raw(None, frames)
    assert rec.status == "ok" and rec.output_tokens == 4
    assert rec.chunks == 4 and len(rec.itl_s) == 3, "the closing chunk's gap is not an inter-token gap"


@pytest.mark.parametrize(
    "status,cls", [(400, "http_4xx"), (404, "http_4xx"), (429, "http_429"), (503, "http_5xx")]
)
def test_http_errors_are_classified_with_the_engine_message(sse_server: str, status: int, cls: str) -> None:
    rec = run_raw(sse_server, [], status=status, body={"object": "error", "message": f"engine says {status}"})
    assert rec.status == cls and rec.http_status == status
    assert f"engine says {status}" in (rec.error or "")


@pytest.mark.parametrize(
    "body,cls,message",
    [
        ('{"object":"error","message":"engine dead","code":500}\n', "stream_error", "engine dead"),
        (
            '{\n  "error": {"message": "model overloaded", "type": "server_error"}\n}\n',
            "stream_error",
            "model overloaded",
        ),
        (
            "<!DOCTYPE html>\n<html><head><title>Sign in - Corp SSO</title></head>\n<body>log in</body></html>\n",
            "stream_error",
            "HTML page 'Sign in - Corp SSO'",
        ),
        (
            "upstream connect error or disconnect/reset before headers\n",
            "malformed",
            "upstream connect error",
        ),
    ],
)
def test_a_200_whose_body_is_not_a_stream_says_what_it_was(
    sse_server: str, body: str, cls: str, message: str
) -> None:
    """A JSON error or a gateway's HTML page on a 200 is not a cut stream (`truncated`): its message is kept."""
    rec = run_raw(sse_server, [(1, body)])
    assert rec.http_status == 200 and rec.status == cls, rec.error
    assert message in (rec.error or "") and "HTTP 200 with no stream" in (rec.error or "")


def test_a_proxy_error_page_is_http_5xx_with_its_title(sse_server: str) -> None:
    page = (
        "<html>\n<head><title>502 Bad Gateway</title></head>\n<body><center>nginx</center></body>\n</html>\n"
    )
    rec = run_raw(sse_server, [], status=502, text=page)
    assert rec.status == "http_5xx" and rec.error == "HTTP 502: HTML page '502 Bad Gateway'", rec.error


def test_connect_failure() -> None:
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    tr = GeventTransport(f"http://127.0.0.1:{port}")
    req = build_request(api="chat", model="m", prompt="hi", max_tokens=4)
    rec = stream_request(tr, req, RequestRecord(target="t"))
    assert rec.status == "connect"


def test_completions_api_and_keepalive_connection_reuse(sse_server: str) -> None:
    tr = GeventTransport(sse_server)
    frames = [
        (2, ev({"choices": [{"index": 0, "text": "x", "finish_reason": None}]})),
        (2, ev({"choices": [{"index": 0, "text": "y", "finish_reason": "length"}]})),
        (1, "data: [DONE]\n\n"),
    ]
    spec = {"mode": "raw", "frames": [[d, t] for d, t in frames]}
    req = build_request(
        api="completions", model="m", prompt="hi", max_tokens=2, extra_body={"llmload_test": spec}
    )
    assert req.path == "/v1/completions" and b'"prompt":"hi"' in req.body
    recs = [stream_request(tr, req, RequestRecord(target="t")) for _ in range(5)]
    assert [r.status for r in recs] == ["ok"] * 5
    assert all(r.chunks == 2 for r in recs)


def test_request_body_asks_for_usage_and_controls_length() -> None:
    req = build_request(
        api="chat",
        model="m",
        prompt="hi",
        max_tokens=64,
        temperature=0.0,
        ignore_eos=True,
        min_tokens=64,
        extra_body={"min_p": 0.1},
        api_key="sk-secret",
    )
    body = json.loads(req.body)
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["max_tokens"] == 64 and body["ignore_eos"] is True and body["min_tokens"] == 64
    assert body["min_p"] == 0.1 and body["temperature"] == 0.0
    assert req.headers["Authorization"] == "Bearer sk-secret"
    assert "sk-secret" not in req.body.decode()
