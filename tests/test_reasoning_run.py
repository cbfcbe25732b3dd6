"""scenarios/reasoning.yaml end to end on real simulators (llmload starts them): the reasoning figures
in the terminal, summary.json, requests.jsonl and the reports; a classic run's table has none."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from llmload.schema.results_model import RequestLine, Summary

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def reasoning_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    """The shipped scenario, shortened: max_tokens 160 against a median reasoning of 160 tokens, so
    about half of r1-free's requests leave no answer; r1-budget's thinking budget of 100 leaves 60."""
    tmp = tmp_path_factory.mktemp("reasoning")
    sc = yaml.safe_load((ROOT / "scenarios" / "reasoning.yaml").read_text())
    sc["workload"]["output_tokens"] = 160
    sc["targets"][1]["extra_body"] = {"thinking_token_budget": 100}
    sc["load"].update(users=8, duration="6s", warmup="1s")
    path = tmp / "reasoning.yaml"
    path.write_text(yaml.safe_dump(sc))
    out = tmp / "results"
    cmd = [sys.executable, "-m", "llmload", "run", str(path), "--sim", "--results", str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=180, cwd=ROOT)
    return r, out


def test_the_terminal_shows_ttfo_reasoning_answer_and_no_answer(reasoning_run) -> None:
    r, _ = reasoning_run
    assert r.returncode == 1, r.stdout + r.stderr  # error_rate 0.05 missed by r1-free's no-answer requests
    assert "TTFO p50 (ms)" in r.stdout and "reasoning tok" in r.stdout and "no answer" in r.stdout
    assert "error_rate" in r.stdout and "(r1-free)" in r.stdout


def test_summary_and_request_lines_carry_the_split(reasoning_run) -> None:
    _, out = reasoning_run
    summary = Summary.model_validate(json.loads((out / "summary.json").read_text()))
    free, budget = summary.targets["r1-free"], summary.targets["r1-budget"]
    assert free.requests.by_class["no_answer"] > 0 and budget.requests.by_class["no_answer"] == 0
    for block in (free, budget):
        assert block.tokens.reasoning is not None and not block.tokens.reasoning.reasoning_approx
        assert block.latency_ms["ttfo"].count > 0 and block.latency_ms["itl_answer"].count > 0
    lines = [RequestLine.model_validate_json(x) for x in (out / "requests.jsonl").read_text().splitlines()]
    ok = [x for x in lines if x.status == "ok"]
    assert ok and all(x.reasoning_tokens_source == "usage" for x in lines if x.reasoning_tokens is not None)
    for x in ok:
        assert x.ttfo_ms is not None and x.ttft_ms is not None and x.ttfo_ms >= x.ttft_ms
        assert x.reasoning_tokens is not None and x.answer_tokens is not None
        assert x.reasoning_tokens + x.answer_tokens == x.output_tokens
        assert x.reasoning_chunks == x.reasoning_tokens  # the simulator streams one chunk per token
    for x in lines:
        if x.status == "no_answer":
            assert x.answer_tokens == 0 and x.ttfo_ms is None and x.finish_reason == "length"
    assert all((x.reasoning_tokens or 0) <= 100 for x in lines if x.target == "r1-budget")


def test_the_files_match_the_published_schemas(reasoning_run) -> None:
    import jsonschema

    _, out = reasoning_run
    schemas = ROOT / "docs" / "schemas"
    line_schema = json.loads((schemas / "requests-line.schema.json").read_text())
    lines = [json.loads(x) for x in (out / "requests.jsonl").read_text().splitlines()]
    assert any("ttfo_ms" in x for x in lines)
    for x in lines:
        jsonschema.validate(x, line_schema)
        assert RequestLine.model_validate(x).model_dump(exclude_unset=True) == x
    summary = json.loads((out / "summary.json").read_text())
    jsonschema.validate(summary, json.loads((schemas / "summary.schema.json").read_text()))
    assert Summary.model_validate(summary).dump() == summary


def test_the_reports_have_a_reasoning_section(reasoning_run) -> None:
    _, out = reasoning_run
    md = (out / "report.md").read_text()
    assert "### Reasoning" in md and "| r1-free |" in md.split("### Reasoning")[1]
    assert 'id="reasoning"' in (out / "report.html").read_text()
