"""Reasoning figures in every output, in process: the terminal table, the web UI's rows and status
line, InfluxDB request points, the reports' rows, and the simulator's plan and wire; a run without
reasoning shows none of them."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from llmload.locust.liveview import reasoning_line, rows_from_summary
from llmload.report.reasoning import reasoning_rows
from llmload.schema.results_model import Latency, ReasoningTokens, Summary
from llmload.sim import wire
from llmload.sim.profiles import load_profile
from llmload.sim.request import BadRequest, parse_completion
from llmload.sim.tokens import plan_request
from llmload.sinks.influx_points import PointFormatter
from llmload.sinks.terminal import render_table
from tests.synth import SynthTarget, write_results_dir
from tests.test_reasoning_stream import reasoning_stream, run


def _summaries(tmp_path: Path) -> tuple[Summary, Summary]:
    """A classic synthetic run, and the same with reasoning figures on target a."""
    d = write_results_dir(tmp_path / "run", [SynthTarget("a"), SynthTarget("b")], requests_per_target=40)
    classic = Summary.model_validate(json.loads((d / "summary.json").read_text()))
    reasoned = classic.model_copy(deep=True)
    a = reasoned.targets["a"]
    a.tokens.reasoning = ReasoningTokens(requests=40, reasoning=900, answer=380, reasoning_approx=False)
    a.latency_ms["ttfo"] = Latency(
        count=39, mean=700.0, p50=650.0, p90=800.0, p95=850.0, p99=990.0, max=999.0
    )
    a.requests.by_class["no_answer"] = 1
    return classic, reasoned


def test_the_terminal_adds_a_reasoning_table_only_when_a_target_reasoned(tmp_path: Path) -> None:
    classic, reasoned = _summaries(tmp_path)
    assert "TTFO" not in render_table(classic)
    table = render_table(reasoned)
    row = next(x for x in table.splitlines() if x.startswith("a ") and "650.0" in x)
    assert "900" in row and "380" in row and "990.0" in row
    assert not any(x.startswith("b ") and "650.0" in x for x in table.splitlines())


def test_reports_and_web_ui_rows_name_only_the_targets_that_reasoned(tmp_path: Path) -> None:
    classic, reasoned = _summaries(tmp_path)
    assert (
        reasoning_rows(classic.targets) == [] and reasoning_line(rows_from_summary(classic, ["a", "b"])) == ""
    )
    rows = reasoning_rows(reasoned.targets)
    assert [r[0] for r in rows] == ["a"] and rows[0][5:8] == ["900", "380", "1"]
    line = reasoning_line(rows_from_summary(reasoned, ["a", "b"]))
    assert line == "reasoning: a: TTFO p50 650 ms, reasoning 900 / answer 380 tok, no answer 1"


def test_influx_request_points_carry_reasoning_fields_only_for_reasoning_requests() -> None:
    fmt = PointFormatter("run1", "local")
    tags = {"target": "t"}
    reasoned = fmt.request(run(reasoning_stream(3, 4)), tags)
    classic = fmt.request(run(reasoning_stream(0, 4)), tags)
    assert reasoned is not None and classic is not None
    assert (
        "ttfo_ms=105.0" in reasoned and "reasoning_tokens=3.0" in reasoned and "answer_tokens=4.0" in reasoned
    )
    assert "ttfo_ms" not in classic and "reasoning_tokens" not in classic


def test_the_simulator_streams_reasoning_then_content_with_usage_details() -> None:
    fmt = wire.StreamFormat(True, "id", "m", 0, 5, True, False, reasoning_tokens=2)
    body = fmt.role() + fmt.reasoning(" r0", 1) + fmt.reasoning(" r1", 2) + fmt.final(" a0", 3, "stop")
    events = [orjson.loads(x[6:]) for x in body.split(b"\n\n") if x.startswith(b"data: {")]
    deltas = [e["choices"][0]["delta"] for e in events if e["choices"]]
    assert [d.get("reasoning_content") for d in deltas[1:3]] == [" r0", " r1"] and deltas[3][
        "content"
    ] == " a0"
    assert events[-1]["usage"]["completion_tokens_details"] == {"reasoning_tokens": 2}
    no_details = wire.StreamFormat(True, "id", "m", 0, 5, True, False).final(" a", 1, "stop")
    assert b"completion_tokens_details" not in no_details


def test_effort_scales_and_the_budget_caps_the_simulated_reasoning() -> None:
    p = load_profile("vllm-reasoning-70b-2x-h100")

    def mean_reasoning(**kw: object) -> float:
        plans = [
            plan_request(
                max_tokens=4000,
                min_tokens=0,
                ignore_eos=False,
                dist=p.output_length,
                fault_rate=0.0,
                sim_seed=1,
                request_seed=None,
                digest=i,
                reasoning=p.reasoning,
                **kw,
            )  # type: ignore[arg-type]
            for i in range(300)
        ]
        return sum(x.reasoning_tokens for x in plans) / len(plans)

    low, high = mean_reasoning(effort="low"), mean_reasoning(effort="high")
    assert high > 3 * low
    assert mean_reasoning(effort="high", thinking_budget=50) <= 50
    classic = plan_request(
        max_tokens=100,
        min_tokens=0,
        ignore_eos=True,
        dist=p.output_length,
        fault_rate=0.0,
        sim_seed=1,
        request_seed=None,
        digest=7,
    )
    assert classic.reasoning_tokens == 0


@pytest.mark.parametrize(
    "field,value,message",
    [
        ("reasoning_effort", "extreme", "reasoning_effort"),
        ("thinking_token_budget", -1, "thinking_token_budget"),
    ],
)
def test_the_simulator_refuses_bad_reasoning_knobs_as_an_engine_does(
    field: str, value: object, message: str
) -> None:
    body = json.dumps({"messages": [{"role": "user", "content": "hi"}], field: value}).encode()
    with pytest.raises(BadRequest, match=message) as err:
        parse_completion(body, chat=True, model="m", max_model_len=4096)
    assert err.value.status == 400


def test_the_live_rows_count_reasoning_from_the_merged_deltas() -> None:
    from llmload.locust.liveview import LiveView
    from llmload.measure.runstate import Aggregator, Collector

    col, agg = Collector(["a", "b"]), Aggregator(["a", "b"])
    for rec in (run(reasoning_stream(3, 4)), run(reasoning_stream(6, 0))):
        rec.target = "a"
        col.started("a")
        col.record(rec)
    agg.merge(col.drain())
    rows = {r["target"]: r for r in LiveView(["a", "b"], delivery_delay_s=0.0).rows(agg)}
    assert (rows["a"]["reasoning_tokens"], rows["a"]["answer_tokens"], rows["a"]["no_answer"]) == (9, 4, 1)
    assert rows["a"]["ttfo_p50_ms"] == pytest.approx(105.0, abs=0.1)
    assert "reasoning_tokens" not in rows["b"]
    assert reasoning_line(list(rows.values())).startswith("reasoning: a: TTFO p50 105 ms")
