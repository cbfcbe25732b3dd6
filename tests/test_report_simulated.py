"""Every surface says which targets ran on llmload's simulator (issue 29 item 4): report.html,
report.md, junit.xml, compare (text, markdown, json), the capacity page, the terminal's table and its
"who wins" line, from config/simulated.py (the web UI's table and status line: tests/test_webui.py)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from llmload.capacity.outcome import CapacityResult, TargetCapacity, render_text
from llmload.capacity.page import render_markdown as capacity_md
from llmload.capacity.page_html import render_html as capacity_html
from llmload.config.scenario import Scenario
from llmload.config.simulated import simulated_targets
from llmload.report import build_html, compare_runs, compare_targets, render_junit, render_markdown
from llmload.report.decision import DecisionRow, who_wins_line
from llmload.report.outputs import write_all
from llmload.schema.results_model import Summary
from llmload.sinks.terminal import render_table
from tests.synth import SynthTarget, write_results_dir

PROFILE = "vllm-awq-llama3-70b-2x-rtx6000ada"
SIM = {"kind": "sim", "sim": {"profile": PROFILE}}
REAL = {"kind": "vllm", "base_url": "http://gpu-host:8000"}


@pytest.fixture
def mixed(tmp_path: Path) -> Path:
    """One simulated target (sim-a), one real vLLM (real-b)."""
    return write_results_dir(
        tmp_path / "mixed",
        [SynthTarget("sim-a", recorded=SIM), SynthTarget("real-b", kind="vllm", recorded=REAL)],
        requests_per_target=60,
    )


def test_report_headers_name_the_simulated_target_and_its_profile_only(mixed: Path) -> None:
    md = render_markdown(mixed)
    head = md.split("### Decision summary")[0].split("### Summary")[0]
    assert f"sim-a: simulated engine (profile {PROFILE})" in head
    assert "real-b:" not in head and "real-b" not in head.split("Simulated:")[1]
    html = build_html(mixed).read_text()
    banner = html.split('id="simulated-banner">')[1].split("</div>")[0]
    assert f"sim-a: simulated engine (profile {PROFILE})" in banner and "real-b" not in banner
    props = {p.get("name"): p.get("value") for p in ET.fromstring(render_junit(mixed)).iter("property")}
    assert props["simulated.sim-a"] == f"simulated engine (profile {PROFILE})"
    assert "simulated.real-b" not in props


def test_a_run_of_real_engines_says_nothing_of_simulation(tmp_path: Path) -> None:
    d = write_results_dir(
        tmp_path / "real", [SynthTarget("real-b", kind="vllm", recorded=REAL)], requests_per_target=40
    )
    assert "simulated engine" not in render_markdown(d)
    assert "simulated-banner" not in build_html(d).read_text()
    assert "simulated." not in render_junit(d)


def test_compare_labels_the_simulated_side(mixed: Path, tmp_path: Path) -> None:
    cmp = compare_targets(mixed, "real-b", "sim-a", resamples=200)
    want = f"candidate sim-a: simulated engine (profile {PROFILE})"
    assert want in cmp.to_text() and want in cmp.to_markdown()
    assert json.loads(json.dumps(cmp.to_json()))["simulated"] == {
        "candidate sim-a": f"simulated engine (profile {PROFILE})"
    }
    assert "real-b: simulated" not in cmp.to_text()
    real = write_results_dir(
        tmp_path / "real", [SynthTarget("real-b", kind="vllm", recorded=REAL)], requests_per_target=40
    )
    assert "simulated" not in compare_runs(real, real, resamples=200).to_text()


def _table(d: Path) -> list[str]:
    return render_table(Summary.model_validate(json.loads((d / "summary.json").read_text()))).splitlines()


def test_the_terminal_table_marks_the_simulated_target_and_names_its_profile(
    mixed: Path, tmp_path: Path
) -> None:
    lines = _table(mixed)
    cells = {ln.split()[0] for ln in lines[2:4]}
    assert cells == {"sim-a*", "real-b"}  # the simulated one marked, the real one as it is
    (note,) = [ln for ln in lines if ln.startswith("* ")]
    assert f"sim-a: simulated engine (profile {PROFILE})" in note and "real-b" not in note
    real = write_results_dir(
        tmp_path / "real", [SynthTarget("real-b", kind="vllm", recorded=REAL)], requests_per_target=40
    )
    assert not any("*" in ln or "simulated" in ln for ln in _table(real))


def _row(leader: str, runner_up: str) -> DecisionRow:
    return DecisionRow("output tok/s", "tok/s", False, leader, 200.0, runner_up, 100.0, 50.0, 150.0)


def test_the_who_wins_line_says_when_the_engines_were_simulated(mixed: Path) -> None:
    rows = [_row("a", "b")]
    assert who_wins_line(rows, {"a", "b"}) == "who wins (simulated engines): a wins output tok/s (2.00x)"
    assert who_wins_line(rows, {"b", "c"}) == "who wins (simulated: b): a wins output tok/s (2.00x)"
    assert who_wins_line(rows, set()) == "who wins: a wins output tok/s (2.00x)"
    assert who_wins_line([], {"a"}) == ""  # one target: no line
    # the line a finished run prints (locust/conclude.py), from its reports
    assert write_all(mixed).who_wins.startswith("who wins (simulated: sim-a): ")


def test_a_stand_in_says_which_engine_it_replaced() -> None:
    sc = Scenario.model_validate(
        {
            "name": "s",
            "simulate": True,
            "targets": [{"name": "v", **REAL, "sim": {"profile": PROFILE}}],
        }
    )
    sims = simulated_targets(t.model_dump(mode="json") for t in sc.targets)
    assert sims["v"].label == f"simulated engine (profile {PROFILE}) standing in for vllm"


def test_capacity_pages_name_the_simulated_target() -> None:
    def target(name: str, simulated: str | None) -> TargetCapacity:
        return TargetCapacity(
            target=name, capacity=4.0, low=4.0, high=5.0, bound="found", unit="req/s", probes=3,
            simulated=simulated,
        )  # fmt: skip

    res = CapacityResult(
        scenario="s", status="done", exit_code=0, vary="rate", slo={"ttft_p99_ms": 500.0}, settings={},
        targets=[target("sim-a", f"simulated engine (profile {PROFILE})"), target("real-b", None)],
        ratios=[], probes=[],
    )  # fmt: skip
    want = f"sim-a: simulated engine (profile {PROFILE})"
    for text in (capacity_html(res, None), capacity_md(res, None), render_text(res)):
        assert want in text and "real-b: simulated" not in text


@pytest.mark.integration
def test_a_run_on_the_simulator_says_so_and_its_ttft_agrees_with_the_simulators(tmp_path: Path) -> None:
    """A real run of the quickstart's two simulators: the header names each profile, and the
    simulator's time_to_first_token histogram counts from the request's arrival (its kernel receive
    stamp, sim/arrival.py), as llmload's TTFT does: its gap to llmload's mean is the E2E gap (the trip
    between the processes), within 5 % or 5 ms. That the stamp takes in the time a request waits in a
    busy simulator's socket is shown with a stall of known length in tests/test_sim_arrival.py."""
    import subprocess
    import sys

    out = tmp_path / "r"
    sets = ["load.duration=4s", "load.warmup=1s", "load.users=8", "load.spawn_rate=8"]
    cmd = [
        str(Path(sys.executable).with_name("llmload")),
        "run",
        "scenarios/quickstart.yaml",
        "--results",
        str(out),
    ]
    proc = subprocess.run(
        cmd + [x for s in sets for x in ("--set", s)], capture_output=True, text=True, timeout=180
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    md = (out / "report.md").read_text()
    assert f"vllm-awq: simulated engine (profile {PROFILE})" in md.split("### Summary")[0]
    summary = json.loads((out / "summary.json").read_text())
    for name, block in summary["targets"].items():
        rows = {r["figure"]: r for r in block["server_agreement"]["rows"]}
        ttft, e2e = rows["TTFT mean"], rows["E2E mean"]
        # Both count from the request's arrival, so TTFT's gap is E2E's gap: the trip between the
        # processes (on a quiet host a few ms, so the table says "agrees"; a busy host widens both
        # gaps alike, which is why the gaps are compared and not the verdict). A simulator stamping
        # TTFT from admission would put its queueing time into TTFT's gap alone.
        ttft_gap, e2e_gap = ttft["client"] - ttft["server"], e2e["client"] - e2e["server"]
        assert ttft_gap >= -1.0 and e2e_gap >= -1.0, (name, ttft, e2e)
        assert abs(ttft_gap - e2e_gap) <= max(5.0, 0.05 * ttft["server"]), (name, ttft, e2e)
