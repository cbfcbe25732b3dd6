"""A results directory holds exactly one run: a new run refuses a non-empty one (exit 2, one line), and
``llmload report DIR`` reports the run that run.json names, with that run's own exit code."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from llmload.config.scenario import load_scenario
from llmload.results.rebuild import RUN_INFO, rebuild_summary, run_info
from tests.cli_inprocess import call_cli
from tests.conftest import ROOT
from tests.doc_blocks import command_blocks

SCENARIO = (
    "targets:\n  - {name: a, kind: openai, base_url: 'http://127.0.0.1:9', model: m}\nload: {users: 1}\n"
)


def test_a_non_empty_results_directory_is_refused_before_anything_starts(tmp_path: Path) -> None:
    (tmp_path / "s.yaml").write_text(SCENARIO)
    old = tmp_path / "r"
    old.mkdir()
    (old / "summary.json").write_text("{}")
    r = call_cli(["run", "s.yaml", "--results", "r"], cwd=tmp_path)
    assert r.code == 2 and r.err_lines == [
        "llmload: --results r: not empty (a results directory holds one run); give a new one"
    ]
    assert [p.name for p in old.iterdir()] == ["summary.json"]  # nothing written into it
    (tmp_path / "empty").mkdir()
    with pytest.raises(AssertionError, match="reached Locust"):  # an empty one is fine
        call_cli(["run", "s.yaml", "--results", "empty"], cwd=tmp_path)


def test_the_readme_ci_recipe_runs_in_a_fresh_checkout_and_refuses_a_reused_directory(tmp_path: Path) -> None:
    recipe = next(
        b for b in command_blocks() if b.doc == "README.md" and "--results results/ci" in " ".join(b.commands)
    )
    argv = next(c for c in recipe.commands if "--results results/ci" in c).split()
    assert argv[:2] == ["llmload", "run"] and "--results" in argv
    (tmp_path / "scenarios").mkdir()
    shutil.copy(ROOT / "scenarios" / "quickstart.yaml", tmp_path / "scenarios")
    with pytest.raises(AssertionError, match="reached Locust"):
        call_cli(argv[1:], cwd=tmp_path)
    results = tmp_path / argv[argv.index("--results") + 1]
    results.mkdir(parents=True)
    (results / "summary.json").write_text("{}")
    r = call_cli(argv[1:], cwd=tmp_path)
    assert r.code == 2 and len(r.err_lines) == 1 and "not empty" in r.err_lines[0]


def _run_dir(d: Path, run_id: str) -> None:
    """A run's run.json and requests.jsonl (no request line: the run was killed before any ended)."""
    d.mkdir(exist_ok=True)
    sc = load_scenario(str(_scenario(d.parent)), [])
    (d / RUN_INFO).write_text(json.dumps(run_info(sc, run_id, "local", time.time())))
    (d / "requests.jsonl").write_text("")


def _scenario(tmp: Path) -> Path:
    p = tmp / "s.yaml"
    p.write_text(SCENARIO)
    return p


def test_report_rebuilds_the_run_that_run_json_names_not_an_older_summary(tmp_path: Path) -> None:
    d = tmp_path / "r"
    _run_dir(d, "old-run")
    old = rebuild_summary(d).dump()
    old["run"].update(status="ok", exit_code=0, verdict="ok (exit 0)")
    (d / "summary.json").write_text(json.dumps(old))
    _run_dir(d, "new-run")  # the same directory, then a new run SIGKILLed there before its summary
    r = call_cli(["report", "r"], cwd=tmp_path)
    assert r.code == 3, r.out + r.err
    assert "holds run old-run, not new-run" in r.err and "status incomplete" in r.out
    run = json.loads((d / "summary.json").read_text())["run"]
    assert run["run_id"] == "new-run" and run["status"] == "incomplete" and run["exit_code"] == 3


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b'{"run_id": "x", "sce', "unreadable (Unterminated string"),
        (b"\xff\xfe", "unreadable ('utf-8' codec"),
        (b"[1, 2]", "holds no run's scenario"),
        (b'{"run_id": "x", "scenario": {}}', "holds no started_at time"),
    ],
)
def test_a_broken_run_json_is_one_line_not_a_traceback(tmp_path: Path, content: bytes, words: str) -> None:
    d = tmp_path / "r"
    _run_dir(d, "x")
    (d / RUN_INFO).write_bytes(content)  # no summary.json: report rebuilds it from run.json
    r = call_cli(["report", "r"], cwd=tmp_path)
    assert r.code == 2 and len(r.err_lines) == 1, r.err[-2000:]
    assert f"r/{RUN_INFO}: {words}" in r.err_lines[0] and "cannot be rebuilt" in r.err_lines[0]


@pytest.mark.parametrize(("signal_name", "code"), [("SIGINT", 130), ("SIGTERM", 143)])
def test_report_exits_with_an_interrupted_runs_code(tmp_path: Path, signal_name: str, code: int) -> None:
    d = tmp_path / "r"
    _run_dir(d, "x")
    s = rebuild_summary(d).dump()
    s["run"].update(status="interrupted", stop_reason=signal_name, exit_code=code, verdict="interrupted")
    (d / "summary.json").write_text(json.dumps(s))
    r = call_cli(["report", "r"], cwd=tmp_path)
    assert r.code == code, r.out + r.err
    assert f"run status: interrupted (exit {code})" in r.out


@pytest.mark.parametrize(
    ("results", "expected"),
    [
        ("/proc/llmload-x", "llmload: --results /proc/llmload-x: cannot write in /proc: "),
        ("s.yaml/r", "llmload: --results s.yaml/r: "),
    ],
)
def test_a_results_path_nothing_can_be_written_in_is_one_line(
    tmp_path: Path, results: str, expected: str
) -> None:
    """Root passes os.access everywhere (/proc): a probe file in the nearest existing parent decides."""
    (tmp_path / "s.yaml").write_text(SCENARIO)
    r = call_cli(["run", "s.yaml", "--results", results], cwd=tmp_path)
    assert r.code == 2 and len(r.err_lines) == 1 and r.err_lines[0].startswith(expected), r.err_lines


def test_a_full_disk_under_results_is_one_line_before_any_load(tmp_path: Path) -> None:
    """A disk with less room than a run's results need: exit 2 before anything starts. The disk is
    the free space statvfs reports; here a directory whose disk reports 1 MiB free (a tiny tmpfs
    needs mount privileges a test may not have, so statvfs's answer is what is varied)."""
    import os

    (tmp_path / "s.yaml").write_text(SCENARIO)

    class Full:
        f_bavail, f_frsize = 256, 4096  # 1 MiB

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(os, "statvfs", lambda p: Full())
        r = call_cli(["run", "s.yaml", "--results", "r"], cwd=tmp_path)
    assert r.code == 2 and r.err_lines == [
        "llmload: --results r: 1.0 MiB free on its disk, less than the 16 MiB a run's results need at least"
    ], r.err_lines
    assert not (tmp_path / "r").exists() and not list(tmp_path.glob(".llmload-probe-*"))
