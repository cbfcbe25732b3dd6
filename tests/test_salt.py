"""Honest reruns: the per-run salt keeps a rerun off the server's prefix cache (a long-lived simulator,
whose /metrics counts prefix-cache queries and hits the way vLLM does)."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from collectors.engine_metrics import normalise
from llmload.config.scenario import parse_scenario
from llmload.load.workload import WorkloadSource
from llmload.report.compare import compare_runs
from tests.conftest import TOLERANT_CLIENT, llmload_run


def prefix_counters(base_url: str) -> tuple[float, float]:
    """(queries, hits) of the simulator's prefix cache, in tokens, as its /metrics says."""
    text = httpx.get(base_url + "/metrics", timeout=10).text
    got = {s.metric: s.value for s in normalise(text, "vllm")}
    return got["prefix_cache_queries_total"], got["prefix_cache_hits_total"]


def run(base_url: str, tmp_path: Path, name: str, salt: str) -> tuple[float, dict]:
    """One short run; the share of its prompt tokens the server found in its prefix cache."""
    scenario = tmp_path / f"{name}.yaml"
    scenario.write_text(
        f"{TOLERANT_CLIENT}\n"
        f"targets: [{{name: a, kind: vllm, base_url: '{base_url}'}}]\n"  # a vLLM-dialect simulator
        f"workload: {{input_tokens: 96, output_tokens: 2, seed: 7, salt: {salt}}}\n"
        "load: {users: 2, max_requests: 12}\n"
    )
    q0, h0 = prefix_counters(base_url)
    out, _ = llmload_run(scenario, tmp_path / name)
    assert out.returncode == 0, out.stderr[-3000:]
    q1, h1 = prefix_counters(base_url)
    assert q1 > q0
    summary = json.loads((tmp_path / name / "summary.json").read_text())
    return (h1 - h0) / (q1 - q0), summary


def test_a_salted_rerun_misses_the_prefix_cache_an_unsalted_one_hits_it(
    tmp_path: Path, sim_pair: tuple[str, str]
) -> None:
    base_url = sim_pair[0]
    first, s1 = run(base_url, tmp_path, "plain-1", "false")
    again, s2 = run(base_url, tmp_path, "plain-2", "false")
    assert s1["run"]["scenario"]["workload"]["salt"] is False
    assert again > 0.8 and again > first + 0.5, (first, again)  # the same prompts: served from cache
    salted_1, t1 = run(base_url, tmp_path, "salted-1", "true")
    salted_2, t2 = run(base_url, tmp_path, "salted-2", "true")
    salt_1, salt_2 = t1["run"]["scenario"]["workload"]["salt"], t2["run"]["scenario"]["workload"]["salt"]
    assert isinstance(salt_1, str) and isinstance(salt_2, str) and salt_1 != salt_2  # drawn per run, recorded
    assert salted_2 < 0.2, salted_2  # a rerun starts cold, as the first run did
    # compare says when two runs did not start from the same cache state, and only then
    warned = compare_runs(tmp_path / "plain-1", tmp_path / "plain-2", resamples=200)
    assert len(warned.warnings) == 1 and "prefix-cache hit rate" in warned.warnings[0]
    assert "not salted" in warned.warnings[0] and "warning: " in warned.to_text()
    assert compare_runs(tmp_path / "salted-1", tmp_path / "salted-2", resamples=200).warnings == []


def test_the_salt_leads_every_prompt_of_a_run_and_keeps_shared_prefixes_shared() -> None:
    sc = parse_scenario(
        "targets: [{name: a, kind: openai, base_url: 'http://127.0.0.1:9', model: m}]\n"
        "workload: {kind: prefix, prefix_groups: 2, prefix_tokens: 32, input_tokens: 8, salt: run-abc}\n"
    )
    src = WorkloadSource(sc.workload)
    texts = [src.get(i).messages[0]["content"] for i in range(4)]
    assert all(t.startswith("[run-abc] ") for t in texts)
    assert texts[0].split("Question")[0] == texts[2].split("Question")[0]  # group 0 still shares its prefix
    plain = WorkloadSource(sc.workload.model_copy(update={"salt": False}))
    unsalted = plain.get(0).messages[0]["content"]
    assert not unsalted.startswith("[")
    # the salt counts within the prompt's size: as many words (tokens, with a tokenizer) either way
    assert len(texts[0].split("Question")[0].split()) == len(unsalted.split("Question")[0].split()) == 32
    assert src.get(0).prompt_tokens_est == plain.get(0).prompt_tokens_est
    with pytest.raises(Exception, match="salt"):
        parse_scenario(
            "targets: [{name: a, kind: openai, base_url: 'http://x', model: m}]\nworkload: {salt: 'a b'}\n"
        )
