"""SLOs on reasoning runs: ``ttfo_p99_ms`` (TTFT where a run had no reasoning), goodput's TTFO bound,
and "no answer" in ``error_rate`` unless ``slo: {no_answer_is_error: false}``; in process."""

from __future__ import annotations

import json
from pathlib import Path

from llmload.config.slo_spec import SloSpec
from llmload.measure.metrics import TargetStats
from llmload.report.slo import evaluate_slos, measured_value, request_meets
from llmload.results.summary import level_target
from llmload.schema.results_model import RequestLine, Summary
from tests.synth import SynthTarget, write_results_dir
from tests.test_reasoning_stream import reasoning_stream, run


def _summary(tmp_path: Path, failures: dict[str, int]) -> Summary:
    d = write_results_dir(tmp_path / "run", [SynthTarget("a", failures=failures)], requests_per_target=100)
    return Summary.model_validate(json.loads((d / "summary.json").read_text()))


def test_the_flag_is_no_slo_of_its_own_and_round_trips_through_run_slo() -> None:
    spec = SloSpec.model_validate({"error_rate": 0.05, "no_answer_is_error": False, "ttfo_p99_ms": 900})
    assert spec.active() == {"ttfo_p99_ms": 900.0, "error_rate": 0.05}
    assert not spec.no_answer_counts and SloSpec().no_answer_counts
    again = SloSpec.model_validate(spec.model_dump(exclude_none=True))  # as run.slo stores it
    assert again == spec and SloSpec(no_answer_is_error=False).is_empty()


def test_no_answer_fails_error_rate_unless_the_scenario_says_otherwise(tmp_path: Path) -> None:
    summary = _summary(tmp_path, {"no_answer": 10})
    block = summary.targets["a"]
    assert block.requests.by_class["no_answer"] == 10 and block.requests.failed == 10
    counted = SloSpec(error_rate=0.05)
    excused = SloSpec(error_rate=0.05, no_answer_is_error=False)
    assert measured_value(block, "error_rate", counted) == 0.1
    assert measured_value(block, "error_rate", excused) == 0.0
    assert [r.passed for r in evaluate_slos(summary, counted)] == [False]
    assert [r.passed for r in evaluate_slos(summary, excused)] == [True]


def test_ttfo_slo_reads_ttft_on_a_run_without_reasoning(tmp_path: Path) -> None:
    block = _summary(tmp_path, {}).targets["a"]
    assert "ttfo" not in block.latency_ms
    assert measured_value(block, "ttfo_p99_ms") == block.latency_ms["ttft"].p99


def test_ttfo_slo_reads_ttfo_where_the_run_had_reasoning() -> None:
    st = TargetStats()
    st.add(run(reasoning_stream(3, 4)))
    level = level_target(st, [])
    assert level.tokens.reasoning is not None and level.tokens.reasoning.answer == 4
    assert measured_value(level, "ttfo_p99_ms") == level.latency_ms["ttfo"].p99
    assert level.latency_ms["ttfo"].p99 != level.latency_ms["ttft"].p99


def test_goodput_bounds_ttfo_and_falls_back_to_ttft_without_reasoning() -> None:
    spec = SloSpec(ttfo_p99_ms=100)
    base = {"target": "a", "index": 0, "worker": "w", "phase": "", "level": "", "start_time": 0.0}
    fast_reasoning = RequestLine.model_validate(
        {**base, "status": "ok", "ttft_ms": 20, "e2e_ms": 300, "ttfo_ms": 90}
    )
    slow_reasoning = RequestLine.model_validate(
        {**base, "status": "ok", "ttft_ms": 20, "e2e_ms": 300, "ttfo_ms": 150}
    )
    classic = RequestLine.model_validate({**base, "status": "ok", "ttft_ms": 120, "e2e_ms": 300})
    no_answer = RequestLine.model_validate({**base, "status": "no_answer", "ttft_ms": 20, "e2e_ms": 300})
    assert [request_meets(r, spec) for r in (fast_reasoning, slow_reasoning, classic, no_answer)] == [
        True,
        False,
        False,
        False,
    ]
