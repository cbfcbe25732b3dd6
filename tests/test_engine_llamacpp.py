"""llmload against llama.cpp's llama-server (built from source by `make test-engines`), the same tiny
model as a GGUF. llama.cpp's /metrics has token counters but no request counter or latency
histograms, so requests, prompt and output tokens and output tok/s are checked against it.

Not part of `make test` (the build takes 10-26 minutes on 2 cores): `make test-engines` runs it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.engines import EngineServer, start_llama_server, tiny_gguf

ROOT = Path(__file__).resolve().parent.parent

pytestmark = [pytest.mark.llamacpp, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory) -> Any:
    with start_llama_server(tiny_gguf(tmp_path_factory.mktemp("gguf"))) as server:
        yield server


def counters(server: EngineServer) -> dict[str, float]:
    from prometheus_client.parser import text_string_to_metric_families

    text = urllib.request.urlopen(server.metrics_url, timeout=10).read().decode()
    out = {"llamacpp:prompt_tokens_total": 0.0, "llamacpp:tokens_predicted_total": 0.0}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name in out:
                out[s.name] += s.value
    return out


@pytest.mark.parametrize("api", ["chat", "completions"])
@pytest.mark.parametrize("users", [1, 4])
def test_tokens_and_throughput_agree_with_llama_server(
    llama: EngineServer, tmp_path: Path, api: str, users: int
) -> None:
    scn = tmp_path / "s.yaml"
    scn.write_text(
        f"targets:\n  - {{name: llama, kind: llamacpp, base_url: '{llama.base_url}', model: {llama.model}, api: {api}}}\n"
        "workload: {input_tokens: {dist: uniform, min: 16, max: 48}, output_tokens: 24, ignore_eos: true}\n"
        f"load: {{users: {users}, max_requests: {4 * users}}}\n"
        "client: {scrape_interval: 600s, loop_lag_threshold_ms: 5000, cpu_threshold_percent: 100}\n"
    )
    before = counters(llama)
    out = tmp_path / "r"
    r = subprocess.run(
        [sys.executable, "-m", "llmload", "run", str(scn), "--results", str(out), "--llm-quiet"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    after = counters(llama)
    recs = [json.loads(x) for x in (out / "requests.jsonl").read_text().splitlines()]
    assert len(recs) == 4 * users and all(x["status"] == "ok" for x in recs), [x["error"] for x in recs]
    out_tokens = after["llamacpp:tokens_predicted_total"] - before["llamacpp:tokens_predicted_total"]
    prompt_tokens = after["llamacpp:prompt_tokens_total"] - before["llamacpp:prompt_tokens_total"]
    assert sum(x["output_tokens"] for x in recs) == out_tokens
    # llama.cpp counts the prompt tokens it evaluated: a prompt prefix cached in the slot is skipped.
    assert 0 < prompt_tokens <= sum(x["prompt_tokens"] for x in recs)
    block = json.loads((out / "summary.json").read_text())["targets"]["llama"]
    tp = block["throughput"]
    assert tp["output_tok_s"] == pytest.approx(out_tokens / tp["window_s"], rel=0.03)
    rows = {x["figure"]: x for x in block["server_agreement"]["rows"]}
    assert rows["output tokens"]["verdict"] == "agrees", rows["output tokens"]
