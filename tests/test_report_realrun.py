"""Reports on a real results directory: `llmload run` against the built-in simulator (real
subprocesses, real HTTP on loopback), then the report layer on what it wrote."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from llmload.cli.report import report_main
from llmload.report.compare import compare_targets
from llmload.report.diffs import NA
from llmload.report.html import build_html
from llmload.report.slo import fmt

pytestmark = pytest.mark.integration  # every test here starts a child process

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "scenarios" / "quickstart.yaml"


@pytest.fixture(scope="module")
def real_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    d = tmp_path_factory.mktemp("realrun") / "results"
    cmd = [
        sys.executable, "-m", "llmload", "run", str(SCENARIO), "--results", str(d), "--quiet",
        "--set", "load.duration=4s", "--set", "load.warmup=1s", "--set", "load.users=4",
        "--set", "workload.output_tokens=32",
        # the report is under test, not the client's health: a busy shared CI box must not turn the
        # run invalid (exit 3) through event-loop lag
        "--set", "client.loop_lag_threshold_ms=5000", "--set", "client.cpu_threshold_percent=100",
        # an SLO no engine can meet, and one every run meets (E2E: a figure the run never flags, so
        # a busy host's flagged TTFT cannot make the miss inconclusive, docs/reports.md)
        "--set", "slo.e2e_p99_ms=0.001", "--set", "slo.error_rate=1",
        "--set", "cost.api_price_per_mtok=0.6",  # the scenario's API price: the break-even lines
    ]  # fmt: skip
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=180)
    (d.parent / "stdout.txt").write_text(proc.stdout)
    if not (d / "summary.json").is_file():
        pytest.fail(f"llmload run wrote no summary.json (rc {proc.returncode}): {proc.stderr[-2000:]}")
    return d, proc.returncode


def test_run_gates_on_the_missed_slo_and_junit_names_it(real_run: tuple[Path, int]) -> None:
    d, rc = real_run
    summary = json.loads((d / "summary.json").read_text())
    assert summary["run"]["status"] != "invalid", summary["run"]["reasons"]
    assert rc == 1  # SLO missed
    targets = list(summary["targets"])
    assert len(targets) >= 2
    root = ET.parse(d / "junit.xml").getroot()
    failures = [c for c in root.iter("testcase") if c.find("failure") is not None]
    assert sorted(c.get("classname", "").rsplit(".", 1)[-1] for c in failures) == sorted(targets)
    assert all("e2e_p99_ms" in (c.get("name") or "") for c in failures)
    md = (d / "report.md").read_text()
    for t in targets:
        assert f"| {t} |" in md


def test_the_terminal_ends_with_the_report_to_open_then_the_verdict(real_run: tuple[Path, int]) -> None:
    d, _ = real_run
    last = (d.parent / "stdout.txt").read_text().strip().splitlines()[-2:]
    verdict = json.loads((d / "summary.json").read_text())["run"]["verdict"]
    assert last == [f"report: {d / 'report.html'}", f"verdict: {verdict}"]
    assert (d / "report.html").is_file()


def test_report_on_a_real_run_draws_every_target(real_run: tuple[Path, int], tmp_path: Path) -> None:
    d, _ = real_run
    targets = list(json.loads((d / "summary.json").read_text())["targets"])
    html = build_html(d, tmp_path / "r.html").read_text()
    charts = dict(re.findall(r'data-chart="([^"]+)" data-traces="(\d+)"', html))
    for key in ("cdf-ttft", "cdf-itl", "cdf-e2e", "tok-s", "in-flight"):
        assert int(charts[key]) == len(targets), key
    assert "client" in charts


def edited_copy(src: Path, tmp_path: Path, **run: object) -> Path:
    """A copy of a results directory whose summary.json's ``run`` block has ``run``'s fields."""
    d = tmp_path / "copy"
    d.mkdir()
    for f in ("summary.json", "requests.jsonl", "timeseries.jsonl", "events.jsonl"):
        if (src / f).is_file():
            (d / f).write_bytes((src / f).read_bytes())
    summary = json.loads((d / "summary.json").read_text())
    summary["run"].update(run)
    (d / "summary.json").write_text(json.dumps(summary))
    return d


def test_loosened_slo_passes_on_the_same_run(real_run: tuple[Path, int], tmp_path: Path) -> None:
    summary = json.loads((real_run[0] / "summary.json").read_text())
    worst = max(b["latency_ms"]["ttft"]["p99"] for b in summary["targets"].values())
    d = edited_copy(real_run[0], tmp_path, slo={"ttft_p99_ms": worst * 2, "error_rate": 0.5})
    assert report_main([str(d)]) == 0
    assert "SLOs **met**" in (d / "report.md").read_text()


@pytest.mark.parametrize(("status", "code"), [("degraded", 3), ("ok", 130), ("ok", 143)])
def test_a_missed_slo_does_not_hide_the_runs_own_code(
    real_run: tuple[Path, int], tmp_path: Path, status: str, code: int
) -> None:
    """A run that lost a worker (3), or took a signal while its results were written (130 / 143),
    and missed an SLO: ``llmload report`` exits with the run's code, as the run did, not 1."""
    summary = json.loads((real_run[0] / "summary.json").read_text())
    best = min(b["latency_ms"]["ttft"]["p99"] for b in summary["targets"].values())
    d = edited_copy(real_run[0], tmp_path, status=status, exit_code=code, slo={"ttft_p99_ms": best / 2})
    assert report_main([str(d)]) == code
    assert "SLOs **missed**" in (d / "report.md").read_text()


def test_compare_two_targets_of_a_real_run(real_run: tuple[Path, int]) -> None:
    d, _ = real_run
    a, b = list(json.loads((d / "summary.json").read_text())["targets"])[:2]
    cmp = compare_targets(d, a, b, resamples=300)
    # three latencies at p50 and p99, output tok/s, and goodput (the run sets per-request SLOs)
    assert [x.metric for x in cmp.diffs][-2:] == ["output_tok_s", "goodput"] and len(cmp.diffs) == 8
    summary = json.loads((d / "summary.json").read_text())
    goodput = next(x for x in cmp.diffs if x.metric == "goodput")
    assert (goodput.baseline, goodput.candidate) == (
        pytest.approx(summary["targets"][a]["goodput_req_s"]),
        pytest.approx(summary["targets"][b]["goodput_req_s"]),
    )  # the point figures are summary.json's, as in the report and the terminal
    for diff in cmp.diffs:
        assert diff.verdict != NA and diff.n_baseline > 0 and diff.n_candidate > 0, diff
        assert diff.ci_low is not None and diff.ci_high is not None and diff.ci_low <= diff.ci_high


def test_a_real_run_of_two_targets_opens_with_the_decision_summary(real_run: tuple[Path, int]) -> None:
    d, _ = real_run
    summary = json.loads((d / "summary.json").read_text())
    assert summary["run"]["scenario"]["cost"] == {"api_price_per_mtok": 0.6}
    md = (d / "report.md").read_text()
    decision = md[md.index("### Decision summary") : md.index("### Summary")]
    row = next(x for x in decision.splitlines() if x.startswith("| output tok/s |"))
    for target, block in summary["targets"].items():  # the same throughput figure as the summary's
        assert f"{target} {fmt(block['throughput']['output_tok_s'])} tok/s" in row
    priced = [t for t, b in summary["targets"].items() if b["cost_per_hour"]]
    assert priced and all(f"- {t} (" in md[md.index("### Self-hosting against the API") :] for t in priced)
