"""write_all, JUnit XML, Markdown, `llmload report` exit codes and bad-input handling."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import llmload.report as report_pkg
from llmload.cli.report import report_main
from llmload.report import render_junit, render_markdown, write_all
from llmload.report.results import BadResults, load_run
from tests.synth import SynthTarget, write_results_dir


def _p99(d: Path, target: str, metric: str) -> float:
    return json.loads((d / "summary.json").read_text())["targets"][target]["latency_ms"][metric]["p99"]


@pytest.fixture
def missed_run(tmp_path: Path) -> tuple[Path, float]:
    """Target 'good' meets the TTFT SLO, 'slow' misses it; 'slow' also has 5% failures (error_rate 2%)."""
    tmp = tmp_path / "tmp"
    write_results_dir(
        tmp, [SynthTarget("good", ttft_ms=50), SynthTarget("slow", ttft_ms=300)], requests_per_target=100
    )
    threshold = (_p99(tmp, "good", "ttft") + _p99(tmp, "slow", "ttft")) / 2
    d = write_results_dir(
        tmp_path / "run",
        [SynthTarget("good", ttft_ms=50), SynthTarget("slow", ttft_ms=300, failures={"truncated": 5})],
        requests_per_target=100,
        slo={"ttft_p99_ms": threshold, "error_rate": 0.02},
    )
    return d, threshold


def test_package_facade_is_complete() -> None:
    assert report_pkg.__all__ == sorted(report_pkg._EXPORTS)
    for name in report_pkg.__all__:
        assert getattr(report_pkg, name) is not None


def test_junit_carries_the_missed_slos(missed_run: tuple[Path, float]) -> None:
    d, threshold = missed_run
    root = ET.fromstring(render_junit(d))
    suites = root.findall("testsuite")
    assert len(suites) == 1
    suite = suites[0]
    cases = suite.findall("testcase")
    # run validity + run completed + per target (requests + 2 SLOs)
    assert len(cases) == 2 + 2 * 3
    assert suite.get("tests") == str(len(cases))
    failed = {(c.get("classname", "").rsplit(".", 1)[-1], c.get("name")): c.find("failure") for c in cases}
    failed = {k: f for k, f in failed.items() if f is not None}
    assert int(suite.get("failures", "-1")) == len(failed) == 3
    assert all(k[0] == "slow" for k in failed)
    ttft_fail = next(f for k, f in failed.items() if "ttft_p99_ms" in (k[1] or ""))
    msg = ttft_fail.get("message", "")
    slow_p99 = _p99(d, "slow", "ttft")
    assert f"{slow_p99:.1f}" in msg and f"{threshold:.1f}".rstrip("0").rstrip(".") in msg
    health = failed[("slow", "requests succeeded")].get("message", "")
    assert "0.05" in health and "error_rate" in health


def test_junit_fails_a_target_without_any_successful_request(tmp_path: Path) -> None:
    d = write_results_dir(
        tmp_path / "run", [SynthTarget("down", failures={"connect": 20})], requests_per_target=20
    )
    root = ET.fromstring(render_junit(d))
    case = next(c for c in root.iter("testcase") if c.get("name") == "requests succeeded")
    f = case.find("failure")
    assert f is not None and "no successful request" in f.get("message", "")


def test_junit_marks_an_invalid_run(tmp_path: Path) -> None:
    d = write_results_dir(
        tmp_path / "run",
        [SynthTarget("a")],
        requests_per_target=10,
        status="invalid",
        reasons=["worker w1 lost at 12 s"],
    )
    root = ET.fromstring(render_junit(d))
    case = next(c for c in root.iter("testcase") if c.get("name") == "run is valid")
    assert "worker w1 lost" in case.find("failure").get("message", "")  # type: ignore[union-attr]
    assert report_main([str(d)]) == 3


def test_markdown_has_a_row_per_target_and_the_slo_results(missed_run: tuple[Path, float]) -> None:
    d, _ = missed_run
    md = render_markdown(d)
    section = md[md.index("### Summary") :]  # the decision summary's table comes first
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    header = rows[0]
    assert "TTFT p99 ms" in header and "goodput req/s" in header
    summary = json.loads((d / "summary.json").read_text())
    for t, block in summary["targets"].items():
        row = next(r for r in rows if r.startswith(f"| {t} |"))
        assert f"| {block['requests']['sent']} |" in row
    assert "| slow | ttft_p99_ms |" in md and "FAIL" in md
    assert "**slow**: FAIL" in md and "**good**: PASS" in md
    assert "SLOs **missed**" in md


def test_write_all_writes_three_files_and_appends_the_step_summary(
    missed_run: tuple[Path, float], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    d, _ = missed_run
    step = tmp_path / "step_summary.md"
    step.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step))
    out = write_all(d)
    assert out.slo_passed is False
    assert {(r.target, r.slo) for r in out.failed} == {("slow", "ttft_p99_ms"), ("slow", "error_rate")}
    for p in (out.html, out.markdown, out.junit):
        assert p is not None and p.parent == d and p.stat().st_size > 0
    text = step.read_text()
    assert text.startswith("earlier step\n") and out.markdown is not None
    assert out.markdown.read_text() in text


def test_write_all_without_slos_reports_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    d = write_results_dir(tmp_path / "run", [SynthTarget("a")], requests_per_target=20)
    out = write_all(d)
    assert out.slo_passed is None and out.failed == [] and out.step_summary is None
    assert report_main([str(d)]) == 0


def test_report_cli_exit_codes(
    missed_run: tuple[Path, float], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d, _ = missed_run
    assert report_main([str(d)]) == 1
    assert "SLO missed: slow" in capsys.readouterr().out
    out_html = tmp_path / "elsewhere" / "r.html"
    assert report_main([str(d), "-o", str(out_html)]) == 1
    assert out_html.read_text().startswith("<!DOCTYPE html>")
    assert report_main([str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "no such results directory" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("breakage", "expected"),
    [
        (lambda d: (d / "summary.json").unlink(), "summary.json: missing"),
        (lambda d: (d / "summary.json").write_text("{not json"), "summary.json: not valid JSON"),
        (lambda d: (d / "requests.jsonl").open("a").write("oops\n"), "requests.jsonl:201: not valid JSON"),
        (
            lambda d: (d / "requests.jsonl").open("a").write('{"target": "a", "status": "fine"}\n'),
            "requests.jsonl:201: field 'index': Field required",
        ),
        (
            lambda d: (d / "timeseries.jsonl").open("a").write('{"t": "late"}\n'),
            "timeseries.jsonl:",
        ),
        (lambda d: _edit(d, lambda s: s.update(schema="other/9")), "field 'schema'"),
        (lambda d: _edit(d, lambda s: s["run"].update(slo={"ttft_p95_ms": 1})), "run.slo.ttft_p95_ms"),
        (lambda d: _edit(d, lambda s: s.update(targets=[])), "field 'targets'"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    breakage,
    expected: str,  # type: ignore[no-untyped-def]
) -> None:
    d = write_results_dir(tmp_path / "run", [SynthTarget("a")], requests_per_target=200)
    breakage(d)
    assert report_main([str(d)]) == 2
    err = capsys.readouterr().err
    assert expected in err and err.strip().count("\n") == 0, err
    if expected.startswith("requests.jsonl"):
        with pytest.raises(BadResults, match="requests.jsonl:201"):
            load_run(d)


def _edit(d: Path, fn) -> None:  # type: ignore[no-untyped-def]
    s = json.loads((d / "summary.json").read_text())
    fn(s)
    (d / "summary.json").write_text(json.dumps(s))
