"""A fault-injection server: every way a server can fail, classified as docs/metrics.md says, and every
request the server received is exactly one record, in a local run and with two workers.

The server is tests/sse_server.py (its own process, real sockets): raw frames, HTTP errors, pages
from proxies, cuts, TCP resets, hangs. Each behaviour is first checked alone through the stream
client; then one `llmload run` cycles through all of them and the server's own tally is compared
with requests.jsonl.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from llmload.client.openai_stream import build_request, stream_request
from llmload.client.transport import GeventTransport
from llmload.measure.records import STATUS_CLASSES, RequestRecord
from tests.conftest import ROOT


def ev(obj: dict[str, Any]) -> str:
    return "data: " + json.dumps(obj) + "\n\n"


def tok(text: str, finish: str | None = None, key: str = "content") -> str:
    return ev({"id": "x", "choices": [{"index": 0, "delta": {key: text}, "finish_reason": finish}]})


ROLE = ev({"id": "x", "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})
USAGE = ev({"id": "x", "choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 2}})
DONE = "data: [DONE]\n\n"
OK_FRAMES = [[1, ROLE], [1, tok("a")], [1, tok("b", "length")], [1, USAGE], [1, DONE]]
HTML_502 = "<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>"
LOGIN = "<!DOCTYPE html>\n<html><head><title>Sign in</title></head><body>SSO</body></html>\n"


def raw(frames: list[list[Any]], **kw: Any) -> dict[str, Any]:
    return {"mode": "raw", "frames": frames, **kw}


# name -> (server behaviour, status, a part of the error text)
BEHAVIOURS: dict[str, tuple[dict[str, Any], str, str]] = {
    "http 400": (
        raw([], status=400, body={"object": "error", "message": "bad max_tokens"}),
        "http_4xx",
        "bad max_tokens",
    ),
    "http 404": (raw([], status=404, body={"detail": "Not Found"}), "http_4xx", "Not Found"),
    "http 429 + Retry-After": (
        raw([], status=429, retry_after=1, body={"error": {"message": "slow down"}}),
        "http_429",
        "slow down",
    ),
    "http 500": (raw([], status=500, body={"error": {"message": "engine dead"}}), "http_5xx", "engine dead"),
    "http 503 html": (
        raw([], status=503, text="<html><title>Service Unavailable</title></html>"),
        "http_5xx",
        "'Service Unavailable'",
    ),
    "http 502 proxy page": (raw([], status=502, text=HTML_502), "http_5xx", "HTML page '502 Bad Gateway'"),
    "error object after 200": (
        raw([[1, ROLE], [1, tok("a")], [1, ev({"error": {"message": "oom"}})], [1, DONE]]),
        "stream_error",
        "oom",
    ),
    "flat error after 200": (
        raw([[1, ev({"object": "error", "message": "old style"})]]),
        "stream_error",
        "old style",
    ),
    "llama.cpp error line": (
        raw([[1, 'error: {"code":500,"message":"slot failed"}\n\n']]),
        "stream_error",
        "slot failed",
    ),
    "200 json error body": (
        raw([[1, '{"object":"error","message":"engine dead","code":500}']]),
        "stream_error",
        "JSON body: engine dead",
    ),
    "200 login page": (raw([[1, LOGIN]]), "stream_error", "HTML page 'Sign in'"),
    "200 plain text": (
        raw([[1, "upstream connect error or disconnect/reset before headers\n"]]),
        "malformed",
        "with no stream",
    ),
    "malformed json": (raw([[1, ROLE], [1, "data: {not json\n\n"], [1, DONE]]), "malformed", "invalid JSON"),
    "data not an object": (raw([[1, "data: [1, 2]\n\n"], [1, DONE]]), "malformed", "not a JSON object"),
    "cut after headers": (raw([], cut=True), "truncated", "connection lost mid-stream"),
    "cut after role": (raw([[1, ROLE]], cut=True), "truncated", ""),
    "cut mid-content": (raw([[1, ROLE], [1, tok("a")], [1, tok("b")]], cut=True), "truncated", ""),
    "cut mid-line": (
        raw([[1, ROLE], [1, tok("a")], [1, 'data: {"id": "x", "choi']], cut=True),
        "truncated",
        "",
    ),
    "ends without DONE or finish": (raw([[1, ROLE], [1, tok("a")]]), "truncated", "without [DONE]"),
    "finish_reason without DONE": (raw([[1, ROLE], [1, tok("a")], [1, tok("b", "stop")]]), "ok", ""),
    "empty output": (
        raw(
            [
                [1, ROLE],
                [
                    1,
                    ev(
                        {
                            "id": "x",
                            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                            "usage": {"prompt_tokens": 5, "completion_tokens": 0},
                        }
                    ),
                ],
                [1, DONE],
            ]
        ),
        "empty",
        "no token",
    ),
    "reasoning spent the budget": (
        raw(
            [
                [1, ROLE],
                [1, tok("th", key="reasoning_content")],
                [1, tok("ink", "length", "reasoning_content")],
                [1, DONE],
            ]
        ),
        "no_answer",
        "no answer token",
    ),
    "keep-alive comments": (
        raw(
            [[1, ": ping\n\n"], [1, ROLE], [1, ": ping\n\n"], [1, tok("a")], [1, tok("b", "stop")], [1, DONE]]
        ),
        "ok",
        "",
    ),
    "multi-token chunks": (
        raw(
            [
                [
                    1,
                    ev(
                        {
                            "choices": [{"delta": {"content": "ab"}, "finish_reason": None}],
                            "usage": {"completion_tokens": 2},
                        }
                    ),
                ],
                [
                    1,
                    ev(
                        {
                            "choices": [{"delta": {"content": "cde"}, "finish_reason": "length"}],
                            "usage": {"completion_tokens": 5},
                        }
                    ),
                ],
                [1, DONE],
            ]
        ),
        "ok",
        "",
    ),
    "CRLF lines": (
        raw(
            [
                [1, ROLE.replace("\n", "\r\n")],
                [1, tok("a", "stop").replace("\n", "\r\n")],
                [1, DONE.replace("\n", "\r\n")],
            ]
        ),
        "ok",
        "",
    ),
    "data: without a space": (
        raw(
            [
                [1, ROLE.replace("data: ", "data:")],
                [1, tok("a", "stop").replace("data: ", "data:")],
                [1, "data:[DONE]\n\n"],
            ]
        ),
        "ok",
        "",
    ),
    "reasoning first": (
        raw([[1, tok("hmm", key="reasoning_content")], [1, tok("a", "stop")], [1, DONE]]),
        "ok",
        "",
    ),
    # the tokens and [DONE] in one write: a busy host cannot put a read timeout's second between them
    "slow prefill": (raw([[1, ROLE], [1500, tok("a") + tok("b", "stop") + DONE]]), "ok", ""),
    "hang before headers": ({"mode": "hang"}, "timeout", "client.first_byte_timeout"),
    "silence mid-stream": (
        raw([[1, ROLE], [1, tok("a")], [3000, tok("b", "stop")], [1, DONE]]),
        "timeout",
        "client.read_timeout",
    ),
    "reset before headers": ({"mode": "raw", "reset": "before_headers"}, "connect", ""),
    "reset mid-body": (
        raw([[1, ROLE], [1, tok("a")]], reset=True),
        "truncated",
        "connection lost mid-stream",
    ),
    "plain ok": (raw(OK_FRAMES), "ok", ""),
}
# (first byte, read) timeouts, s. A busy host can only make a server's bytes later, so a case that
# must time out keeps short ones (hang, 3 s of silence), a case that must not gets 30 s, and slow
# prefill keeps the short read timeout its 1.5 s wait before the first token must not trip.
TIMEOUTS_S = {
    "hang before headers": (1.2, 1.0),
    "silence mid-stream": (1.2, 1.0),
    "slow prefill": (30.0, 1.0),
}
NO_TIMEOUT_S = (30.0, 30.0)


@pytest.mark.parametrize("name", list(BEHAVIOURS))
def test_each_behaviour_is_classified_as_documented(sse_server: str, name: str) -> None:
    spec, status, text = BEHAVIOURS[name]
    first, read = TIMEOUTS_S.get(name, NO_TIMEOUT_S)
    tr = GeventTransport(sse_server, read_timeout_s=read, first_byte_timeout_s=first)
    req = build_request(api="chat", model="m", prompt="hi", max_tokens=8, extra_body={"llmload_test": spec})
    rec = stream_request(tr, req, RequestRecord(target="t"), total_timeout_s=60)
    tr.close()
    assert rec.status == status, (rec.status, rec.error)
    assert text in (rec.error or ""), rec.error
    if status == "ok":
        assert rec.error is None and rec.output_tokens > 0


def test_the_table_covers_every_class_a_server_can_cause() -> None:
    # Each row names a real class, and every class a server can cause has a row (aborted is
    # llmload's own cut, tests/test_signals.py; invalid_output needs a request that asked for JSON or a
    # tool call, tests/test_answers.py): a class added to records.py needs a fault here.
    statuses = {status for _spec, status, _text in BEHAVIOURS.values()}
    elsewhere = {"aborted", "invalid_output"}
    assert statuses <= set(STATUS_CLASSES), statuses - set(STATUS_CLASSES)
    assert set(STATUS_CLASSES) - elsewhere <= statuses, set(STATUS_CLASSES) - elsewhere - statuses


# A cycle for whole runs: the behaviours that end by themselves within a second (no hang: its
# record would wait for first_byte_timeout), each with the status it must get.
CYCLE = [n for n in BEHAVIOURS if n not in ("hang before headers", "silence mid-stream", "slow prefill")]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("workers", [0, 2])
def test_every_request_the_server_received_is_one_record(
    tmp_path: Path, sse_server: str, workers: int
) -> None:
    key = uuid.uuid4().hex
    body = {"llmload_test": {"mode": "cycle", "key": key, "specs": [BEHAVIOURS[n][0] for n in CYCLE]}}
    scn = tmp_path / "faults.yaml"
    scn.write_text(
        "client: {loop_lag_threshold_ms: 5000, cpu_threshold_percent: 100, failure_pause: 0s,"
        f" first_byte_timeout: 10s, read_timeout: 10s}}\n"
        f"targets:\n  - {{name: faulty, kind: openai, base_url: '{sse_server}', model: test-model,"
        f" extra_body: {json.dumps(body)}}}\n"
        f"load: {{users: 4, max_requests: {3 * len(CYCLE)}, warmup: 0s, stop_grace: 20s}}\n"
    )
    out = tmp_path / "r"
    args = ["--workers", str(workers)] if workers else []
    r = subprocess.run(
        [sys.executable, "-m", "llmload", "run", str(scn), "--results", str(out), "--no-reports", *args],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=ROOT,
    )
    assert r.returncode in (0, 1), r.stdout[-2000:] + r.stderr[-2000:]
    tally = httpx.get(f"{sse_server}/llmload_test/stats?key={key}", timeout=5).json()
    lines = [json.loads(x) for x in (out / "requests.jsonl").read_text().splitlines()]
    summary = json.loads((out / "summary.json").read_text())
    # Nothing sent goes unaccounted: the server's count, the request lines and the summary agree.
    assert (
        tally["received"] == len(lines) == summary["targets"]["faulty"]["requests"]["sent"] == 3 * len(CYCLE)
    )
    # And each line got the class its behaviour must get: the classes add up to the server's tally.
    expected: dict[str, int] = {}
    for name, n in zip(CYCLE, tally["by_spec"], strict=True):
        expected[BEHAVIOURS[name][1]] = expected.get(BEHAVIOURS[name][1], 0) + n
    got: dict[str, int] = {}
    for x in lines:
        got[x["status"]] = got.get(x["status"], 0) + 1
    assert got == expected
    by_class = {k: v for k, v in summary["targets"]["faulty"]["requests"]["by_class"].items() if v}
    assert by_class == expected
    if workers:
        assert len({x["worker"] for x in lines}) == 2
