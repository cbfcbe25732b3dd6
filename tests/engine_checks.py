"""What the real-engine conformance tests share: a warm-up, the server's own counters, one llmload run.

    from tests.engine_checks import check_every_figure, counters, deltas, records, run_llmload, warm_up

    warm_up(server)
    before = counters(server, "vllm")                  # vllm:..., aphrodite:... series, summed
    out = run_llmload(tmp, server, kind="vllm", api="chat", users=4, ignore_eos=True)
    d = deltas(server, "vllm", before)                 # the change, keyed without the prefix
    check_every_figure(out, d, "vllm", ignore_eos=True)

The counters are read by the test itself, independently of llmload's scraper, so a wrong metric
name in llmload (collectors/engine_metrics.py) shows as a disagreement, not as two equal mistakes.
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

from tests.conftest import ROOT
from tests.engines import EngineServer

RATE_MARGIN_PCT = 3.0
CLOCK_SLACK_MS = 1.0  # two clocks, one host: llmload's interval contains the server's

COUNTERS = (
    "request_success_total",
    "prompt_tokens_total",
    "generation_tokens_total",
    "time_to_first_token_seconds_sum",
    "time_to_first_token_seconds_count",
    "e2e_request_latency_seconds_sum",
    "e2e_request_latency_seconds_count",
)


def warm_up(server: EngineServer) -> None:
    """A fresh server's first requests stall in its front-end (first chat template, detokenizer):
    tokens then arrive all at once. Send a few of each API first, as a run's warm-up would."""
    for path, body in (
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "warm up"}]}),
        ("/v1/completions", {"prompt": "warm up"}),
    ):
        for _ in range(3):
            data = json.dumps({"model": server.model, "max_tokens": 8, **body}).encode()
            req = urllib.request.Request(
                server.base_url + path, data=data, headers={"Content-Type": "application/json"}
            )
            urllib.request.urlopen(req, timeout=60).read()


def counters(server: EngineServer, prefix: str) -> dict[str, float]:
    """The server's ``prefix:`` counters and histogram sums (``COUNTERS``), summed over label sets."""
    from prometheus_client.parser import text_string_to_metric_families

    text = urllib.request.urlopen(server.metrics_url, timeout=10).read().decode()
    out = {f"{prefix}:{name}": 0.0 for name in COUNTERS}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name in out:
                out[s.name] += s.value
    return out


def deltas(server: EngineServer, prefix: str, before: dict[str, float]) -> dict[str, float]:
    """The counters' change since ``before`` (from ``counters``), keyed without the prefix."""
    return {k.split(":", 1)[1]: v - before[k] for k, v in counters(server, prefix).items()}


def run_llmload(
    tmp: Path,
    server: EngineServer,
    *,
    kind: str,
    api: str,
    users: int,
    ignore_eos: bool,
    extra: str = "",
    output_tokens: str = "{dist: uniform, min: 8, max: 40}",
    silent_extra: str = "",
    reports: bool = True,
    requests: int | None = None,
) -> Path:
    """One target named ``kind`` (``extra`` added to its options); with ``silent_extra``, a second
    one, ``silent``, on the same server with those options instead. ``requests``: default
    max(8, 3 * users)."""
    scn = tmp / "s.yaml"
    target = f"kind: {kind}, base_url: '{server.base_url}', model: {server.model}, api: {api}"
    silent = f"  - {{name: silent, {target}{silent_extra}}}\n" if silent_extra else ""
    scn.write_text(
        f"name: {kind}-{api}-c{users}\n"
        "targets:\n"
        f"  - {{name: {kind}, {target}{extra}}}\n"
        f"{silent}"
        "workload:\n"
        f"  seed: {users * 7 + (1 if ignore_eos else 0)}\n"
        "  input_tokens: {dist: uniform, min: 16, max: 48}\n"
        f"  output_tokens: {output_tokens}\n"
        f"  ignore_eos: {str(ignore_eos).lower()}\n"
        f"load: {{users: {users}, max_requests: {requests or max(8, 3 * users)}, stop_grace: 60s}}\n"
        # Scrapes only before and after the load: each scrape of vLLM's /metrics stalled the CPU
        # front-end's streams by 10-230 ms here, which would be load the test itself caused.
        "client: {report_interval: 0.5s, scrape_interval: 600s, loop_lag_threshold_ms: 5000, "
        "cpu_threshold_percent: 100}\n"
    )
    out = tmp / "results"
    r = subprocess.run(
        [sys.executable, "-m", "llmload", "run", str(scn), "--results", str(out), "--llm-quiet"]
        + ([] if reports else ["--no-reports"]),
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return out


def records(out: Path) -> list[dict[str, Any]]:
    """requests.jsonl of a results directory, one dict per request."""
    return [json.loads(x) for x in (out / "requests.jsonl").read_text().splitlines() if x.strip()]


def near(client: float, server: float, pct: float) -> bool:
    return abs(client - server) <= abs(server) * pct / 100.0


def check_every_figure(out: Path, d: dict[str, float], target: str, *, ignore_eos: bool) -> None:
    """One run's figures against the server's counter deltas ``d`` (from ``deltas``): requests,
    prompt and output tokens exactly, output tok/s within 3 %, TTFT and E2E means never below the
    server's; and llmload's own agreement rows (its scrape, its metric names) say the same."""
    recs = records(out)
    block = json.loads((out / "summary.json").read_text())["targets"][target]
    assert recs and all(r["status"] == "ok" for r in recs), [r["error"] for r in recs if r["status"] != "ok"]
    assert len(recs) == d["request_success_total"] == block["requests"]["sent"]
    assert sum(r["prompt_tokens"] for r in recs) == d["prompt_tokens_total"]
    assert sum(r["output_tokens"] for r in recs) == d["generation_tokens_total"]
    assert all(r["output_tokens_source"] == "usage" for r in recs)
    # One chunk per token, empty text included; the engine merges tokens into one chunk only when
    # its front-end falls behind, so a chunk count can be short of usage but never above it.
    assert all(0 < r["chunks"] <= r["output_tokens"] for r in recs)
    if ignore_eos:
        assert all(r["finish_reason"] == "length" for r in recs)
    ttft_server = d["time_to_first_token_seconds_sum"] / d["time_to_first_token_seconds_count"] * 1e3
    e2e_server = d["e2e_request_latency_seconds_sum"] / d["e2e_request_latency_seconds_count"] * 1e3
    ttft = block["latency_ms"]["ttft"]["mean"]
    e2e = block["latency_ms"]["e2e"]["mean"]
    assert ttft >= ttft_server - CLOCK_SLACK_MS, (ttft, ttft_server)
    assert e2e >= e2e_server - CLOCK_SLACK_MS, (e2e, e2e_server)
    tp = block["throughput"]
    server_rate = d["generation_tokens_total"] / tp["window_s"]
    assert near(tp["output_tok_s"], server_rate, RATE_MARGIN_PCT), (tp, server_rate)
    rows = {r["figure"]: r for r in block["server_agreement"]["rows"]}
    assert rows["requests"]["server"] == d["request_success_total"]
    assert rows["prompt tokens"]["server"] == d["prompt_tokens_total"]
    assert rows["output tokens"]["server"] == d["generation_tokens_total"]
    assert rows["output tok/s"]["verdict"] == "agrees", rows["output tok/s"]
