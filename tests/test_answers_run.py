"""Shaped answers end to end on real simulators (llmload starts them): scenarios/tools.yaml through chat
and the Responses API, and a JSON-schema workload whose max_tokens cuts some answers; the counts agree
in requests.jsonl, summary.json, the terminal and both reports."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from llmload.config.slo_spec import SloSpec
from llmload.locust.liveview import answers_line, rows_from_summary
from llmload.report.slo import fmt, request_meets
from llmload.schema.results_model import RequestLine, Summary

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parent.parent


def _run(tmp: Path, sc: dict[str, object]) -> tuple[subprocess.CompletedProcess[str], Path]:
    path = tmp / "s.yaml"
    path.write_text(yaml.safe_dump(sc))
    out = tmp / "results"
    cmd = [sys.executable, "-m", "llmload", "run", str(path), "--results", str(out)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180, cwd=ROOT), out


def _lines(out: Path) -> list[RequestLine]:
    return [RequestLine.model_validate_json(x) for x in (out / "requests.jsonl").read_text().splitlines()]


def _shipped(
    factory: pytest.TempPathFactory, name: str, **load: object
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """A shipped scenario, its load shortened."""
    sc = yaml.safe_load((ROOT / "scenarios" / f"{name}.yaml").read_text())
    sc["load"].update(load)
    return _run(factory.mktemp(name), sc)


@pytest.fixture(scope="module")
def tools_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    return _shipped(tmp_path_factory, "tools", users=4, duration="4s", warmup="1s")


def test_tool_calls_through_chat_and_responses_are_valid_and_counted(tools_run) -> None:
    r, out = tools_run
    assert r.returncode == 0, r.stderr[-3000:]
    lines = _lines(out)
    summary = Summary.model_validate_json((out / "summary.json").read_text())
    for target in ("chat", "responses"):
        mine = [x for x in lines if x.target == target]
        assert mine and all(x.status == "ok" and x.answer_check == "tool_call" for x in mine)
        assert all(x.answer_valid and x.tool_calls == 1 and x.finish_reason == "tool_calls" for x in mine)
        assert all(x.ttfo_ms is not None and x.ttft_ms is not None and x.ttfo_ms >= x.ttft_ms for x in mine)
        answers = summary.targets[target].requests.answers
        assert answers is not None
        assert (answers.checked, answers.valid, answers.tool_calls) == (len(mine), len(mine), len(mine))
        # the server's usage, not chunk counts: reasoning and answer tokens add up to the output
        assert all(x.reasoning_tokens_source == "usage" for x in mine)
        assert all((x.reasoning_tokens or 0) + (x.answer_tokens or 0) == x.output_tokens for x in mine)
        row = next(x for x in r.stdout.splitlines() if x.startswith(f"{target}*") and "%" in x)
        assert row.split()[1:6] == [f"{len(mine):,}", f"{len(mine):,}", "0", "100.0%", f"{len(mine):,}"]
    assert (
        "Answers" in (out / "report.md").read_text() and 'id="answers"' in (out / "report.html").read_text()
    )


@pytest.fixture(scope="module")
def json_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    """A JSON schema whose documents are about 25 tokens, with max_tokens 12-40: some are cut."""
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 10, "maximum": 99}},
        "required": ["name", "age"],
    }
    sc = {
        "name": "json",
        "targets": [
            {"name": "chat", "kind": "sim", "sim": {"profile": "test-fast-a"}},
            {"name": "responses", "kind": "sim", "api": "responses", "sim": {"profile": "test-fast-a"}},
        ],
        "workload": {
            "output_tokens": {"dist": "uniform", "min": 12, "max": 40},
            "ignore_eos": False,
            "response_format": {"type": "json_schema", "json_schema": {"name": "person", "schema": schema}},
        },
        "load": {"users": 4, "spawn_rate": 4, "duration": "4s", "stop_grace": "20s"},
    }
    return _run(tmp_path_factory.mktemp("json"), sc)


def test_json_answers_cut_by_max_tokens_are_invalid_output_everywhere(json_run) -> None:
    r, out = json_run
    assert r.returncode == 0, r.stderr[-3000:]
    lines = _lines(out)
    summary = Summary.model_validate_json((out / "summary.json").read_text())
    md = (out / "report.md").read_text()
    for target in ("chat", "responses"):
        mine = [x for x in lines if x.target == target]
        cut = [x for x in mine if x.status == "invalid_output"]
        ok = [x for x in mine if x.status == "ok"]
        assert cut and ok and len(cut) + len(ok) == len(mine)  # both kinds, nothing else
        assert all(
            x.finish_reason == "length" and x.answer_valid is False and "not JSON" in (x.error or "")
            for x in cut
        )
        assert all(x.answer_valid for x in ok) and any(x.finish_reason == "stop" for x in ok)
        block = summary.targets[target].requests
        assert block.by_class["invalid_output"] == len(cut) and block.failed == len(cut)
        assert block.answers is not None and (block.answers.checked, block.answers.valid) == (
            len(mine),
            len(ok),
        )
        assert f"| {target} | {len(mine):,} | {len(ok):,} | {len(cut):,} |" in md


def test_goodput_is_one_figure_in_summary_terminal_and_report(tools_run) -> None:
    """summary.json's goodput is req/s times the share of the window's requests that were ok and met
    every per-request SLO (DistServe's); the terminal's table and the report show that same figure."""
    r, out = tools_run
    summary = Summary.model_validate_json((out / "summary.json").read_text())
    slo = SloSpec.model_validate(summary.run.slo)
    run = summary.run
    head = next(x for x in r.stdout.splitlines() if x.startswith("target ") and "goodput (req/s)" in x)
    assert head.split()[-2:] == ["goodput", "(req/s)"]
    md = (out / "report.md").read_text()
    lines = _lines(out)
    for target, block in summary.targets.items():
        mine = [
            x for x in lines if x.target == target and run.measure_start <= x.start_time <= run.measure_end
        ]
        good = sum(request_meets(x, slo) for x in mine)
        assert good > 0 and block.goodput_req_s == pytest.approx(
            block.throughput.req_s * good / len(mine), abs=5e-5
        )
        assert block.goodput_req_s <= block.throughput.req_s
        shown = f"{block.goodput_req_s:,.2f}"
        row = next(x for x in r.stdout.splitlines() if x.startswith(f"{target}* ") and "%" not in x)
        assert row.split()[-1] == shown
        in_report = f"| {fmt(block.goodput_req_s)} |"  # the report's 3 significant digits
        assert any(line.startswith(f"| {target} |") and line.endswith(in_report) for line in md.splitlines())


def test_the_web_uis_status_line_shows_the_summarys_answers_and_goodput(tools_run) -> None:
    """After the run the LLM tab's rows are summary.json's (liveview.rows_from_summary): its status
    line names the same valid answers, tool calls and goodput as the terminal."""
    _r, out = tools_run
    summary = Summary.model_validate_json((out / "summary.json").read_text())
    line = answers_line(rows_from_summary(summary, list(summary.targets)))
    for target, block in summary.targets.items():
        a = block.requests.answers
        assert a is not None and block.goodput_req_s is not None
        want = f"{target}: {a.valid:,}/{a.checked:,} answers valid, {a.tool_calls:,} tool calls, "
        assert want + f"goodput {block.goodput_req_s:,.2f} req/s" in line, line


@pytest.fixture(scope="module")
def agent_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    return _shipped(tmp_path_factory, "agent", users=4, duration="5s", warmup="0s")


def test_an_agent_loop_answers_each_call_and_counts_its_sessions(agent_run) -> None:
    """scenarios/agent.yaml: the model calls the tool, gets the canned result 300 ms later and answers
    in text; every turn a request of its own, the sessions counted alike in every output."""
    r, out = agent_run
    assert r.returncode == 0, r.stderr[-3000:]
    summary = Summary.model_validate_json((out / "summary.json").read_text())
    rounds = 3
    for target in ("chat", "responses"):
        mine = sorted((x for x in _lines(out) if x.target == target), key=lambda x: x.index)
        sessions: dict[int, list[RequestLine]] = {}
        for x in mine:
            assert x.turn is not None and x.index % rounds == x.turn
            sessions.setdefault(x.index // rounds, []).append(x)
        ended = {k: v for k, v in sessions.items() if v[-1].session_end is not None}
        assert ended
        for turns in ended.values():
            assert [x.turn for x in turns] == list(range(len(turns)))
            assert [x.tool_calls for x in turns] == [1] * (len(turns) - 1) + [0]
            assert [x.session_end for x in turns] == [None] * (len(turns) - 1) + ["answered"]
            assert all(x.tool_wait_ms == (300.0 if x.turn else 0.0) for x in turns)
            assert all(a.prompt_tokens < b.prompt_tokens for a, b in zip(turns, turns[1:], strict=False))
        s = summary.targets[target].requests.answers.sessions
        assert s is not None
        assert (s.sessions, s.turns, s.answered) == (len(sessions), len(mine), len(ended))
        assert s.tool_wait_s == pytest.approx(0.3 * sum(1 for x in mine if x.turn))
        row = next(
            x
            for x in r.stdout.splitlines()
            if x.startswith(f"{target}* ") and x.split()[1] == f"{s.sessions:,}"
        )
        assert row.split()[2] == f"{s.turns:,}" and row.split()[4] == f"{s.answered:,}"
    assert "### Agent sessions" in (out / "report.md").read_text()
