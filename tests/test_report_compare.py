"""compare_runs / compare_targets on constructed runs with known differences, and `llmload compare`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmload.cli.report import compare_main, report_main
from llmload.report.compare import compare_runs, compare_targets
from llmload.report.diffs import BETTER, SAME, WORSE
from tests.synth import SynthTarget, write_results_dir

N = 300
RESAMPLES = 500


def _runs(tmp_path: Path, *, seed_b: int = 0, seed_c: int = 0, scale: float = 1.3) -> tuple[Path, Path]:
    base = write_results_dir(
        tmp_path / "base", [SynthTarget("sim", output_tokens=64)], requests_per_target=N, seed=seed_b
    )
    cand = write_results_dir(
        tmp_path / "cand",
        [SynthTarget("sim", output_tokens=64, ttft_scale=scale)],
        requests_per_target=N,
        seed=seed_c,
    )
    return base, cand


def _by_metric(cmp) -> dict:  # type: ignore[no-untyped-def]
    return {d.metric: d for d in cmp.diffs}


def test_ttft_shift_is_worse_and_unchanged_itl_is_not_significant(tmp_path: Path) -> None:
    base, cand = _runs(tmp_path)
    cmp = compare_runs(base, cand, resamples=RESAMPLES)
    m = _by_metric(cmp)
    assert set(m) == {
        "ttft_p50",
        "ttft_p99",
        "itl_mean_p50",
        "itl_mean_p99",
        "e2e_p50",
        "e2e_p99",
        "output_tok_s",
    }
    for k in ("ttft_p50", "ttft_p99"):
        d = m[k]
        assert d.paired and d.verdict == WORSE
        assert d.diff_pct == pytest.approx(30.0, abs=0.5)  # nearest-rank quantiles of x*1.3 are 1.3*quantiles
        assert d.ci_low is not None and d.ci_low > 0
    for k in ("itl_mean_p50", "itl_mean_p99"):
        assert m[k].verdict == SAME and m[k].diff == 0
    # E2E moved by the TTFT shift too, but by less than the 5% threshold: not significant
    e2e = m["e2e_p50"]
    assert e2e.ci_low is not None and e2e.ci_low > 0 and abs(e2e.diff_pct or 0) < 5
    assert e2e.verdict == SAME
    assert [d.metric for d in cmp.regressions] == ["ttft_p50", "ttft_p99"]


def test_improvement_reads_better_and_verdicts_flip_with_the_direction(tmp_path: Path) -> None:
    base, cand = _runs(tmp_path, scale=1.3)
    m = _by_metric(compare_runs(cand, base, resamples=RESAMPLES))  # swapped: the candidate is faster
    assert m["ttft_p50"].verdict == BETTER and m["ttft_p50"].diff_pct == pytest.approx(
        -100 * 0.3 / 1.3, abs=0.5
    )


def test_unpaired_comparison_of_independent_draws(tmp_path: Path) -> None:
    base = write_results_dir(
        tmp_path / "b", [SynthTarget("x", output_tokens=64)], requests_per_target=N, seed=1
    )
    cand = write_results_dir(
        tmp_path / "c", [SynthTarget("y", output_tokens=64, ttft_scale=1.5)], requests_per_target=N, seed=2
    )
    # shuffle the candidate's indexes so that pairing is impossible
    lines = [json.loads(x) for x in (cand / "requests.jsonl").read_text().splitlines()]
    for r in lines:
        r["index"] = r["index"] + 10_000
    (cand / "requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    cmp = compare_runs(base, cand, resamples=RESAMPLES)  # one target each: paired up by position
    m = _by_metric(cmp)
    assert not m["ttft_p50"].paired
    assert m["ttft_p50"].verdict == WORSE
    assert m["itl_mean_p50"].verdict == SAME
    assert m["itl_mean_p50"].ci_low is not None and m["itl_mean_p50"].ci_low < 0 < (
        m["itl_mean_p50"].ci_high or 0
    )


def test_compare_is_seeded(tmp_path: Path) -> None:
    base, cand = _runs(tmp_path, seed_c=3)
    a = compare_runs(base, cand, resamples=RESAMPLES, seed=7)
    b = compare_runs(base, cand, resamples=RESAMPLES, seed=7)
    c = compare_runs(base, cand, resamples=RESAMPLES, seed=8)
    assert [d.ci_low for d in a.diffs] == [d.ci_low for d in b.diffs]
    assert [d.ci_low for d in a.diffs] != [d.ci_low for d in c.diffs]


def test_compare_two_targets_of_one_run(tmp_path: Path) -> None:
    d = write_results_dir(
        tmp_path / "run",
        [SynthTarget("vllm", output_tokens=64), SynthTarget("aphrodite", output_tokens=64, itl_ms=30)],
        requests_per_target=N,
    )
    m = _by_metric(compare_targets(d, "vllm", "aphrodite", resamples=RESAMPLES))
    assert m["itl_mean_p50"].verdict == WORSE and m["itl_mean_p50"].paired
    assert m["output_tok_s"].verdict == WORSE  # slower decoding, same users: fewer tokens per second
    assert m["ttft_p50"].verdict == SAME


def test_compare_cli_fail_on_regression_and_outputs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base, cand = _runs(tmp_path)
    args = [str(base), str(cand), "--resamples", str(RESAMPLES)]
    assert compare_main(args) == 0
    out = capsys.readouterr().out
    assert "ttft_p99" in out and WORSE in out and SAME in out
    md, js = tmp_path / "cmp.md", tmp_path / "cmp.json"
    assert compare_main([*args, "--fail-on-regression", "--markdown", str(md), "--json", str(js)]) == 1
    assert "| sim | ttft_p50 |" in md.read_text()
    data = json.loads(js.read_text())
    assert data["regressions"] == 2 and len(data["diffs"]) == 7
    # no regression: same run against itself
    assert compare_main([str(base), str(base), "--resamples", str(RESAMPLES), "--fail-on-regression"]) == 0
    # a higher threshold swallows the 30% shift
    assert compare_main([*args, "--threshold", "40", "--fail-on-regression"]) == 0


def test_compare_cli_targets_and_map(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = write_results_dir(
        tmp_path / "run", [SynthTarget("a"), SynthTarget("b", ttft_ms=200)], requests_per_target=100
    )
    assert compare_main([str(d), "--targets", "a", "b", "--resamples", "200", "--fail-on-regression"]) == 1
    assert "a -> b" in capsys.readouterr().out
    assert compare_main([str(d), str(d), "--map", "a=b", "--resamples", "200", "--fail-on-regression"]) == 1
    assert compare_main([str(d), str(d), "--map", "b=a", "--resamples", "200", "--fail-on-regression"]) == 0


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["{missing}", "{run}"], "no such results directory"),
        (["{run}/summary.json", "{run}"], "summary.json: a file, not a results directory"),
        (["{run}"], "--targets A B"),
        (["{run}", "--targets", "a", "zz"], "no target 'zz'"),
        (["{run}", "{run}", "--map", "a"], "expected BASELINE_TARGET=CANDIDATE_TARGET"),
        (["{run}", "{run}", "--threshold", "-1"], "threshold must be >= 0"),
        (["{run}", "{run}", "--confidence", "1.5"], "confidence must be between 0 and 1"),
        (["{run}", "{run}", "--threshold", "abc"], "invalid float value"),
        (["{run}", "{run}", "--resamples", "99999999999999"], "expected 100 to 100,000"),
        (["{run}", "{run}", "--markdown", "{tmp}"], "--markdown {tmp}: is a directory"),
        (["{run}", "{run}", "--json", "{missing}/x.json"], "--json {missing}/x.json: no such directory"),
    ],
)
def test_compare_cli_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], expected: str
) -> None:
    d = write_results_dir(tmp_path / "run", [SynthTarget("a")], requests_per_target=20)
    names = {"run": d, "missing": tmp_path / "nope", "tmp": tmp_path}
    argv = [a.format(**names) for a in argv]
    assert compare_main(argv) == 2
    captured = capsys.readouterr()
    err = captured.err
    assert expected.format(**names) in err and err.strip().count("\n") == 0 and "Traceback" not in err
    assert not captured.out  # refused before the work: no table that reads as done


def test_report_to_a_directory_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = write_results_dir(tmp_path / "run", [SynthTarget("a")], requests_per_target=20)
    assert report_main([str(d), "-o", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"-o {tmp_path}: is a directory" in err and err.strip().count("\n") == 0
