"""SLO spec validation, evaluation on runs built to pass and to fail, goodput and sweep verdicts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from llmload.cli.report import report_main
from llmload.config.slo_spec import SloSpec
from llmload.report.levels import capacity_results, level_rows
from llmload.report.levels import verdicts as level_verdicts
from llmload.report.results import load_run
from llmload.report.slo import (
    evaluate_slos,
    goodput,
    goodput_by_target,
    measured_value,
    request_meets,
)
from llmload.schema.results_model import RequestLine, Summary
from tests.synth import SynthLevel, SynthTarget, write_results_dir


def test_slospec_rejects_unknown_keys_and_out_of_range_values() -> None:
    with pytest.raises(ValidationError, match="ttft_p95_ms"):
        SloSpec.model_validate({"ttft_p95_ms": 100})
    with pytest.raises(ValidationError, match="error_rate"):
        SloSpec.model_validate({"error_rate": 1.5})
    with pytest.raises(ValidationError, match="itl_p99_ms"):
        SloSpec.model_validate({"itl_p99_ms": -1})
    spec = SloSpec.model_validate({"ttft_p99_ms": 200, "error_rate": 0.01})
    assert spec.active() == {"ttft_p99_ms": 200.0, "error_rate": 0.01}
    assert SloSpec().is_empty() and not SloSpec().has_per_request()


def _summary(path: Path) -> dict:
    return json.loads((path / "summary.json").read_text())


def test_evaluate_slos_passes_a_run_built_to_pass_and_fails_one_built_to_fail(tmp_path: Path) -> None:
    fast = SynthTarget("fast", ttft_ms=50, itl_ms=10)
    slow = SynthTarget("slow", ttft_ms=400, itl_ms=40, failures={"http_5xx": 10})
    d = write_results_dir(tmp_path / "run", [fast, slow], requests_per_target=100)
    summary = _summary(d)
    # thresholds between the two targets' own figures, read from the summary (not hard-coded)
    lat = {t: summary["targets"][t]["latency_ms"] for t in ("fast", "slow")}
    mid = lambda m, q: (lat["fast"][m][q] + lat["slow"][m][q]) / 2  # noqa: E731
    spec = SloSpec(
        ttft_p99_ms=mid("ttft", "p99"),
        itl_p99_ms=mid("itl", "p99"),
        tpot_p50_ms=mid("tpot", "p50"),
        e2e_p99_ms=mid("e2e", "p99"),
        error_rate=0.05,
        min_output_tok_s=1.0,
    )
    results = evaluate_slos(Summary.model_validate(summary), spec)
    assert len(results) == 2 * 6
    by = {(r.target, r.slo): r for r in results}
    for key in spec.active():
        assert by[("fast", key)].passed, by[("fast", key)].describe()
    for key in ("ttft_p99_ms", "itl_p99_ms", "tpot_p50_ms", "e2e_p99_ms", "error_rate"):
        assert not by[("slow", key)].passed, by[("slow", key)].describe()
    assert by[("slow", "error_rate")].measured == pytest.approx(10 / 100)
    assert by[("slow", "ttft_p99_ms")].measured == lat["slow"]["ttft"]["p99"]
    assert "missed" in by[("slow", "ttft_p99_ms")].describe()


def test_unmeasurable_figure_fails_its_slo(tmp_path: Path) -> None:
    d = write_results_dir(
        tmp_path / "run", [SynthTarget("t", failures={"timeout": 5})], requests_per_target=5
    )
    summary = load_run(d).summary
    block = summary.targets["t"]
    assert block.requests.ok == 0 and block.latency_ms["ttft"].count == 0
    assert measured_value(block, "ttft_p99_ms") is None
    [r] = evaluate_slos(summary, SloSpec(ttft_p99_ms=100))
    assert not r.passed and "not measured" in r.describe()


def test_request_meets_follows_the_documented_goodput_definition() -> None:
    spec = SloSpec(ttft_p99_ms=100, e2e_p99_ms=1000, tpot_p50_ms=20, itl_p99_ms=50)
    base = {"target": "t", "index": 0, "worker": "local", "phase": "p", "level": "p", "start_time": 1.0}
    good = RequestLine(**base, status="ok", ttft_ms=90, e2e_ms=900, tpot_ms=19, itl_max_ms=49)

    def but(**change: object) -> RequestLine:
        return good.model_copy(update=change)

    assert request_meets(good, spec)
    for field, bad in (("ttft_ms", 101), ("e2e_ms", 1001), ("tpot_ms", 21), ("itl_max_ms", 51)):
        assert not request_meets(but(**{field: bad}), spec), field
    assert not request_meets(but(status="timeout"), spec)
    # one output token: no TPOT and no gap, nothing to violate for those two
    assert request_meets(but(tpot_ms=None, itl_max_ms=None), spec)
    reqs = [good, but(ttft_ms=500), good, but(status="http_5xx")]
    assert goodput(reqs, spec, req_s=3.0) == pytest.approx(3.0 * 2 / 4)  # req/s x the share that was good
    assert goodput(reqs, SloSpec(error_rate=0.1), req_s=3.0) is None  # no per-request SLO


def test_goodput_by_target_is_req_s_times_the_share_of_good_requests_in_the_window(tmp_path: Path) -> None:
    d = write_results_dir(
        tmp_path / "run", [SynthTarget("a", failures={"timeout": 4})], requests_per_target=80
    )
    run = load_run(d)
    ttft = sorted(r.ttft_ms for r in run.requests if r.ttft_ms is not None and r.status == "ok")
    threshold = ttft[len(ttft) // 2]  # half of the successful requests meet it
    gp = goodput_by_target(run, SloSpec(ttft_p99_ms=threshold))["a"]
    started = [r for r in run.requests if run.in_window(r.start_time)]
    met = sum(1 for r in started if r.status == "ok" and r.ttft_ms is not None and r.ttft_ms <= threshold)
    assert 0 < met < len(ttft)
    assert gp == pytest.approx(
        run.targets["a"].throughput.req_s * met / len(started), abs=5e-5
    )  # rounded as req/s
    assert goodput_by_target(run, None) == {"a": None}


def test_best_level_is_the_highest_sweep_level_that_meets_every_slo(tmp_path: Path) -> None:
    levels = [SynthLevel(f"c={c}", c, c, slowdown=s) for c, s in ((1, 1.0), (4, 1.5), (16, 3.0), (64, 6.0))]
    targets = [SynthTarget("steady", ttft_ms=40), SynthTarget("weak", ttft_ms=70)]
    d = write_results_dir(tmp_path / "sweep", targets, requests_per_target=40, levels=levels)
    summary = _summary(d)
    p99 = {
        (lv["level"], t): lv["targets"][t]["latency_ms"]["ttft"]["p99"]
        for lv in summary["levels"]
        for t in ("steady", "weak")
    }
    threshold = (p99[("c=16", "steady")] + p99[("c=64", "steady")]) / 2
    verdicts = level_verdicts(level_rows(Summary.model_validate(summary), SloSpec(ttft_p99_ms=threshold)))
    expected = {
        t: max((lv.value for lv in levels if p99[(lv.level, t)] <= threshold), default=None)
        for t in ("steady", "weak")
    }
    assert verdicts["steady"].best_value == expected["steady"] == 16
    assert verdicts["weak"].best_value == expected["weak"]
    assert expected["weak"] is not None and expected["weak"] < 16
    assert "c=64" in verdicts["steady"].failed_levels


@pytest.mark.parametrize(("min_capacity", "code"), [(16, 0), (64, 1), (None, 0)])
def test_a_sweep_is_judged_on_its_capacity_not_on_whole_run_figures(
    tmp_path: Path, min_capacity: int | None, code: int
) -> None:
    """The top level misses the SLO (as a sweep's top levels do); the run passes when its capacity
    reaches min_capacity, and when none is set, when some level met every SLO."""
    levels = [SynthLevel(f"c={c}", c, c, slowdown=s) for c, s in ((1, 1.0), (4, 1.5), (16, 3.0), (64, 6.0))]
    d = write_results_dir(
        tmp_path / "sweep", [SynthTarget("steady", ttft_ms=40)], requests_per_target=40, levels=levels
    )
    summary = _summary(d)
    p99 = {lv["level"]: lv["targets"]["steady"]["latency_ms"]["ttft"]["p99"] for lv in summary["levels"]}
    slo: dict[str, float] = {"ttft_p99_ms": (p99["c=16"] + p99["c=64"]) / 2}
    assert summary["targets"]["steady"]["latency_ms"]["ttft"]["p99"] > slo["ttft_p99_ms"]  # whole run: missed
    if min_capacity is not None:
        slo["min_capacity"] = min_capacity
    summary["run"]["slo"] = slo
    (d / "summary.json").write_text(json.dumps(summary))
    assert report_main([str(d)]) == code
    md = (d / "report.md").read_text()
    assert "### Levels" in md and "| c=64 | steady | 64 streams | 64 |" in md
    assert "| steady | c=16 |" in md  # the capacity


def test_a_level_that_never_reached_its_load_cannot_be_the_capacity(tmp_path: Path) -> None:
    levels = [
        SynthLevel("c=4", 4, 4),
        SynthLevel("c=16", 16, 16),
        SynthLevel("c=64", 64, 64, open_streams=40),
    ]
    d = write_results_dir(
        tmp_path / "sweep", [SynthTarget("t", ttft_ms=10)], requests_per_target=40, levels=levels
    )
    summary = Summary.model_validate(_summary(d))
    rows = level_rows(summary, SloSpec(ttft_p99_ms=1e6, min_capacity=64))
    assert [r.short for r in rows] == [None, None, "at most 40 of 64 streams open"]
    assert all(r.met for r in rows)  # every level met the SLO ...
    [v] = level_verdicts(rows).values()
    assert (v.best_level, v.short_levels) == ("c=16", ("c=64",))  # ... but c=64 never had its 64 streams
    [r] = capacity_results(rows, SloSpec(ttft_p99_ms=1e6, min_capacity=64))
    assert not r.passed and (r.measured, r.threshold) == (16, 64)
