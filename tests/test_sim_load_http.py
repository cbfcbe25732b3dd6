"""The simulator under load, over real sockets: preemption, stream interval, host lag, seeds,
100-continue, overload, idling, and the prefix cache.
"""

from __future__ import annotations

import json
import os
import socket
import time
from typing import Any

import httpx
import pytest

from llmload.sim.process import SimProcess
from llmload.sim.profiles import load_profile
from tests.test_sim_http import chat, metric_families, profile_json, sample_value, stream  # noqa: F401


def raw_streams(port: int, body: dict[str, Any], n: int) -> list[list[Any]]:
    """Send ``n`` streamed requests at once over raw sockets; each one's data events."""
    payload = json.dumps(body).encode()
    req = b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-length: %d\r\n\r\n%b" % (
        len(payload),
        payload,
    )
    socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(n)]
    for s in socks:
        s.sendall(req)
    out = []
    for s in socks:
        s.settimeout(30)
        data = b""
        while not data.endswith(b"0\r\n\r\n"):
            chunk = s.recv(65536)
            assert chunk, "stream cut"
            data += chunk
        s.close()
        lines = [ln[6:] for ln in data.split(b"\n") if ln.startswith(b"data: ")]
        out.append([ln.decode() if ln == b"[DONE]" else json.loads(ln) for ln in lines])
    return out


@pytest.mark.integration
def test_kv_overflow_over_http_preempts_and_still_completes() -> None:
    prof = load_profile("test-tiny-kv")
    with SimProcess(["--profile", "test-tiny-kv", "--log-level", "warning"]) as sim:
        body = chat(300, messages=[{"role": "user", "content": "word " * 100}],
                    stream_options={"include_usage": True})  # fmt: skip
        results = raw_streams(sim.port, body, 6)  # 6 x ~400 tokens in a 1,024-token pool
        fams = metric_families(sim.base_url)
    prompt = results[0][-2]["usage"]["prompt_tokens"]
    assert 6 * (prompt + 300) > prof.kv_token_capacity
    for ev in results:
        assert ev[-1] == "[DONE]" and ev[-2]["usage"]["completion_tokens"] == 300
        assert sum(1 for e in ev[:-1] if e["choices"] and "role" not in e["choices"][0]["delta"]) == 300
    assert sample_value(fams, "vllm:num_preemptions", "vllm:num_preemptions_total") > 0
    assert sample_value(fams, "vllm:kv_cache_usage_perc") < 0.5  # all finished: only evictable cache left


@pytest.mark.integration
def test_stream_interval_merges_tokens_and_usage_counts_them() -> None:
    args = ["--profile-json", profile_json("test-fast-b", stream_interval=4), "--log-level", "warning"]
    with SimProcess(args) as sim:
        _, ev = stream(sim.base_url, "/v1/chat/completions", chat(10, stream_options={}))
    content = [e for e in ev[1:-1] if e["choices"]]
    per_chunk = [e["choices"][0]["delta"]["content"].count(" tok") for e in content]
    assert per_chunk == [1, 4, 4, 1]  # the first token alone, then every 4, the rest at the end
    assert [e["usage"]["completion_tokens"] for e in content] == [1, 5, 9, 10]


@pytest.mark.integration
def test_host_lag_is_counted_and_warned() -> None:
    # warn_lag_ms = 0.001: any scheduling delay at all counts as a late step on a real host
    args = ["--profile-json", profile_json("test-fast-a", warn_lag_ms=0.001)]
    with SimProcess(args) as sim:
        stream(sim.base_url, "/v1/chat/completions", chat(20))
        fams = metric_families(sim.base_url)
        late = sample_value(fams, "llmload_sim_late_steps", "llmload_sim_late_steps_total")
        steps = sample_value(fams, "llmload_sim_steps", "llmload_sim_steps_total")
        lag_max = sample_value(fams, "llmload_sim_clock_lag_max_seconds")
        stderr = sim.stderr_text()
    assert steps == 20 and 0 < late <= steps and lag_max > 0
    assert stderr.count("behind the model clock") == 1  # rate-limited: one warning for the burst


@pytest.mark.integration
def test_same_seed_same_natural_lengths_over_http() -> None:
    def lengths(seed: int) -> list[int]:
        with SimProcess(["--profile", "test-fast-a", "--seed", str(seed), "--log-level", "warning"]) as sim:
            out = []
            with httpx.Client(timeout=30) as c:
                for i in range(12):
                    body = {
                        "messages": [{"role": "user", "content": f"question number {i}"}],
                        "max_tokens": 200,
                    }
                    out.append(
                        c.post(sim.base_url + "/v1/chat/completions", json=body).json()["usage"][
                            "completion_tokens"
                        ]
                    )
            return out

    a, b, c = lengths(5), lengths(5), lengths(6)
    assert a == b
    assert a != c
    assert len(set(a)) > 3 and max(a) < 200  # natural stops, not the cap


def test_expect_100_continue(sim_a: SimProcess) -> None:
    body = json.dumps(chat(2, stream=False)).encode()
    head = (b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nexpect: 100-continue\r\n"
            b"content-length: %d\r\n\r\n") % len(body)  # fmt: skip
    with socket.create_connection(("127.0.0.1", sim_a.port)) as s:
        s.settimeout(30)
        s.sendall(head)
        assert s.recv(100).startswith(b"HTTP/1.1 100 Continue")
        s.sendall(body)
        data = b""
        while b'"completion_tokens"' not in data:
            chunk = s.recv(65536)
            assert chunk
            data += chunk
    assert data.startswith(b"HTTP/1.1 200")


@pytest.mark.integration
def test_overloaded_engine_still_serves_io() -> None:
    # 10 us steps: the host can never keep up, so the driver is always late; it must still yield to I/O
    step = {
        "base_ms": 0.01,
        "per_decode_seq_ms": 0.0,
        "per_prefill_token_ms": 0.0,
        "per_context_ktoken_ms": 0.0,
    }
    with SimProcess(
        ["--profile-json", profile_json("test-fast-a", step=step), "--log-level", "error"]
    ) as sim:
        body = json.dumps(chat(4000, stream=False)).encode()
        req = b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-length: %d\r\n\r\n%b" % (
            len(body),
            body,
        )
        socks = [socket.create_connection(("127.0.0.1", sim.port)) for _ in range(50)]
        for s in socks:
            s.sendall(req)
        # Scrape until one answers while requests are running (a fixed sleep raced the engine: on a
        # quiet host the 50 requests were done within 0.2 s). An engine that starves its I/O answers
        # only once they are done, with none running: every scrape then says 0.
        running, lag, scrapes = 0.0, 0.0, 0
        t0 = time.perf_counter()
        while running == 0 and scrapes < 50:
            fams = metric_families(sim.base_url)
            scrapes += 1
            running = sample_value(fams, "vllm:num_requests_running")
            lag = sample_value(fams, "llmload_sim_clock_lag_max_seconds")
            done = sample_value(fams, "vllm:request_success", "vllm:request_success_total")
            if done >= len(socks):
                break
        scrape_s = time.perf_counter() - t0
        for s in socks:
            s.close()
    assert running > 0, f"no scrape of {scrapes} answered while the requests ran"
    assert lag > 0
    print(f"scrape under 50 streams: {scrape_s * 1000:.0f} ms")  # timing: make bench


def test_idle_engine_sleeps(sim_b: SimProcess) -> None:
    assert sim_b.proc is not None
    stat = f"/proc/{sim_b.proc.pid}/stat"

    def cpu() -> float:
        with open(stat) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    stream(sim_b.base_url, "/v1/chat/completions", chat(3))  # ran, now idle
    c0 = cpu()
    time.sleep(1.5)
    assert cpu() - c0 < 0.1  # no busy loop: only the 0.5 s GPU sampler wakes it


def test_repeated_prompt_hits_prefix_cache_over_http(sim_a: SimProcess) -> None:
    def hits() -> float:
        return sample_value(
            metric_families(sim_a.base_url), "vllm:prefix_cache_hits", "vllm:prefix_cache_hits_total"
        )

    body = chat(2, stream=False, messages=[{"role": "user", "content": "shared context " * 200}])
    before = hits()
    first = httpx.post(sim_a.base_url + "/v1/chat/completions", json=body).json()
    after_first = hits()
    httpx.post(sim_a.base_url + "/v1/chat/completions", json=body)
    gained = hits() - after_first
    prompt = first["usage"]["prompt_tokens"]
    assert after_first == before  # a new prompt: no hits
    assert prompt - 16 <= gained <= prompt  # the repeat: every full block but the last (as vLLM)
