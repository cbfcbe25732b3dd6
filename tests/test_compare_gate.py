"""The regression gate against run-to-run noise and flagged figures (issue 29, item 1): more runs of
the baseline (``--baseline DIR``) set each figure's noise floor (llmload/report/noise.py), and a worse
figure that a run flagged makes the gate inconclusive (exit 3), never a silent regression. On
synthetic runs (tests/synth.py): a TTFT shift is drawn exactly, so each verdict is known."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmload.cli.report import compare_main
from llmload.report.compare import compare_runs
from llmload.report.diffs import NOISE, SAME, WORSE, WORSE_FLAGGED
from llmload.report.noise import NOISE_MULTIPLE
from tests.synth import SynthTarget, write_results_dir

N = 300
RESAMPLES = 500


def run(tmp_path: Path, name: str, ttft_scale: float) -> Path:
    t = SynthTarget("sim", output_tokens=64, ttft_scale=ttft_scale)
    return write_results_dir(tmp_path / name, [t], requests_per_target=N, seed=0)


def flag(d: Path, metric: str) -> None:
    """Mark the run's client as having flagged a measurement, as client_health.py does."""
    p = d / "summary.json"
    s = json.loads(p.read_text())
    s["run"]["client"]["flags"] = [{"target": "sim", "metric": metric, "why": "reads brought several chunks"}]
    p.write_text(json.dumps(s))


def test_a_change_no_larger_than_the_baselines_own_spread_is_noise(tmp_path: Path) -> None:
    base, again = run(tmp_path, "base", 1.0), run(tmp_path, "again", 1.06)  # the A/A runs: TTFT +6%
    cand, slower = run(tmp_path, "cand", 1.09), run(tmp_path, "slower", 1.3)
    alone = {d.metric: d for d in compare_runs(base, cand, resamples=RESAMPLES).diffs}
    assert alone["ttft_p50"].verdict == WORSE  # +9%, its interval excludes 0: a regression, alone
    cmp = compare_runs(base, cand, resamples=RESAMPLES, repeats=[again])
    m = {d.metric: d for d in cmp.diffs}
    assert m["ttft_p50"].noise_pct == pytest.approx(NOISE_MULTIPLE * 6.0, abs=0.5)
    assert m["ttft_p50"].verdict == NOISE and not cmp.regressions
    assert m["itl_mean_p50"].verdict == SAME  # unchanged figures stay as they were
    worse = compare_runs(base, slower, resamples=RESAMPLES, repeats=[again])
    assert [d.metric for d in worse.regressions] == ["ttft_p50", "ttft_p99"]  # +30% is past the floor
    args = [str(base), str(cand), "--resamples", str(RESAMPLES), "--fail-on-regression"]
    assert compare_main(args) == 1
    assert compare_main([*args, "--baseline", str(again)]) == 0


def test_the_table_says_the_floor_and_the_repeats(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base, again, cand = run(tmp_path, "base", 1.0), run(tmp_path, "again", 1.06), run(tmp_path, "cand", 1.09)
    md = tmp_path / "cmp.md"
    compare_main(
        [str(base), str(cand), "--resamples", str(RESAMPLES), "--baseline", str(again), "--markdown", str(md)]
    )
    out = capsys.readouterr().out
    assert f"baseline repeated: {again}" in out and "noise floor" in out and NOISE in out
    assert "and > its run-to-run noise floor (1 more baseline run(s))" in out
    assert "| noise floor |" in md.read_text()


def test_a_worse_figure_a_run_flagged_is_inconclusive_not_a_regression(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base, cand = run(tmp_path, "base", 1.0), run(tmp_path, "cand", 1.3)
    flag(cand, "ttft")
    cmp = compare_runs(base, cand, resamples=RESAMPLES)
    m = {d.metric: d for d in cmp.diffs}
    assert m["ttft_p99"].verdict == WORSE_FLAGGED and m["ttft_p99"].flagged == "flagged in the candidate run"
    assert m["itl_mean_p50"].flagged is None  # the flag was on TTFT only
    assert not cmp.regressions and len(cmp.inconclusive) == 2
    args = [str(base), str(cand), "--resamples", str(RESAMPLES), "--fail-on-regression"]
    assert compare_main(args) == 3
    assert "2 worse on a flagged figure (inconclusive)" in capsys.readouterr().out
    flag(base, "itl")  # a flag on another measurement changes nothing of TTFT's verdict
    assert compare_main(args) == 3


def test_baseline_repeats_need_two_runs_and_the_same_targets(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = run(tmp_path, "base", 1.0)
    other = write_results_dir(tmp_path / "other", [SynthTarget("x")], requests_per_target=20, seed=0)
    assert compare_main([str(base), "--targets", "sim", "sim", "--baseline", str(base)]) == 2
    assert compare_main([str(base), str(base), "--baseline", str(other)]) == 2
    err = capsys.readouterr().err
    assert "no target 'sim' (--baseline runs repeat the baseline: it has x)" in err
