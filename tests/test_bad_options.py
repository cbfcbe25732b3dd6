"""Bad command-line input: one clear line naming the option typed, exit 2, never a traceback; the same
runner as tests/test_bad_input.py (a bad scenario file): each case in this process, one as a real
`llmload` process."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli_inprocess import call_cli
from tests.test_bad_input import CASES, GOOD, run_bad_input, run_bad_input_process

# (id, scenario text, extra files, command (validate | run | ui), extra args, expected)
OPTION_CASES: list[tuple[str, str | bytes | None, dict[str, str | bytes], str, list[str], str]] = [
    (
        "set value",
        GOOD,
        {},
        "validate",
        ["--set", "load.users=abc"],
        "--set load.users='abc': Input should be a valid integer",
    ),
    (
        "set without =",
        GOOD,
        {},
        "validate",
        ["--set", "load.users"],
        "--set 'load.users': expected key.path=value",
    ),
    (
        "set client.selftest",
        GOOD,
        {},
        "validate",
        ["--set", "client.selftest=maybe"],
        "--set client.selftest='maybe': Input should be 'auto', 'on' or 'off'",
    ),
    ("set unknown target", GOOD, {}, "validate", ["--set", "targets.zzz.model=x"], "no list item 'zzz'"),
    ("set unknown field", GOOD, {}, "run", ["--set", "load.userz=2"], "--set load.userz=2: unknown field"),
    (
        "set unknown path",
        GOOD,
        {},
        "validate",
        ["--set", "nosuch.path=3"],
        "--set nosuch.path=3: unknown field",
    ),
    (
        "run --targets",
        GOOD,
        {},
        "run",
        ["--targets", "zzz"],
        "--targets: unknown target(s) zzz (the scenario has a)",
    ),
    (
        "run --results is a file",
        GOOD,
        {"afile": "x"},
        "run",
        ["--results", "afile"],
        "--results afile: exists and is not a directory",
    ),
    (
        "run --results under a file",
        GOOD,
        {"afile": "x"},
        "run",
        ["--results", "afile/r"],
        "afile is not a directory",
    ),
    ("run --influx", GOOD, {}, "run", ["--influx", "notaurl"], "--influx:"),
    (
        "run --workers",
        GOOD,
        {},
        "run",
        ["--workers", "many"],
        "argument --workers: expected a number of workers or 'auto', got 'many'",
    ),
    (
        "run --users (Locust's)",
        GOOD,
        {},
        "run",
        ["--users", "50"],
        "--users 50: the scenario decides the load (load.users in s.yaml, or the phases of load.phases); "
        "give --set load.users=50 instead",
    ),
    (
        "run -t30s (Locust's)",
        GOOD,
        {},
        "run",
        ["-t30s"],
        "-t 30s: the scenario decides the load (load.duration",
    ),
    ("ui --spawn-rate= (Locust's)", GOOD, {}, "ui", ["--spawn-rate=5"], "--set load.spawn_rate=5 instead"),
    ("run --bogus", GOOD, {}, "run", ["--bogus"], "--bogus: no option of llmload run, nor of Locust"),
    ("ui --bogus=1", GOOD, {}, "ui", ["--bogus=1"], "--bogus=1: no option of llmload ui, nor of Locust"),
    (
        "worker --bogus",
        None,
        {},
        "worker",
        ["--bogus"],
        "--bogus: no option of llmload worker, nor of Locust",
    ),
    (
        "run --workers past the cores",
        GOOD,
        {},
        "run",
        ["--workers", "100000"],
        "argument --workers: 100000 workers on ",
    ),
    (
        "run --master-bind-port out of range",
        GOOD,
        {},
        "run",
        ["--master-bind-port", "99999"],
        "argument --master-bind-port: expected a port from 0 to 65535, got 99999",
    ),
    (
        "ui --web-port not a number",
        GOOD,
        {},
        "ui",
        ["--web-port", "http"],
        "expected a port number, got 'http'",
    ),
    (
        "run --targets empty",
        GOOD,
        {},
        "run",
        ["--targets", ""],
        "--targets '': no target named (the scenario has a)",
    ),
    ("run --targets commas", GOOD, {}, "run", ["--targets", " , "], "--targets ' , ': no target named"),
    (
        "run unknown option",
        GOOD,
        {},
        "validate",
        ["--frobnicate"],
        "llmload validate: unrecognized arguments: --frobnicate",
    ),
]


@pytest.mark.parametrize("case", OPTION_CASES, ids=[c[0] for c in OPTION_CASES])
def test_a_bad_option_is_one_line_and_exit_2(tmp_path: Path, case: tuple) -> None:
    run_bad_input(tmp_path, case)


@pytest.mark.integration
def test_a_bad_option_in_a_real_process_is_one_line_and_exit_2(tmp_path: Path) -> None:
    run_bad_input_process(tmp_path, next(c for c in OPTION_CASES if c[0] == "run --workers"))


def test_the_table_is_as_large_as_promised() -> None:
    cases = CASES + OPTION_CASES
    assert len(cases) >= 50 and len({c[0] for c in cases}) == len(cases)


def test_a_web_port_in_use_is_one_line(tmp_path: Path) -> None:
    import socket

    (tmp_path / "s.yaml").write_text(GOOD)
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        r = call_cli(["ui", "s.yaml", "--web-port", str(port)], cwd=tmp_path)
    lines = r.err_lines
    assert r.code == 2 and len(lines) == 1, r.err[-2000:]
    assert f"--web-port {port}: cannot listen on 127.0.0.1:{port}" in lines[0]
    assert not (tmp_path / "results").exists()  # no empty "invalid" results directory


def test_a_worker_given_a_port_out_of_range_says_so_and_does_not_wait() -> None:
    r = call_cli(["worker", "--master-port", "99999"], cwd=Path.cwd())
    assert r.code == 2 and len(r.err_lines) == 1, r.err[-2000:]
    assert "argument --master-port: expected a port from 0 to 65535, got 99999" in r.err_lines[0]


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["sim", "--port", "abc"], "llmload sim: argument --port: invalid int value: 'abc'"),
        (["influx"], "llmload influx: the following arguments are required: command"),
        (["influx", "bogus"], "llmload influx: argument command: invalid choice: 'bogus'"),
        (["collect", "--bogus"], "llmload collect: unrecognized arguments: --bogus"),
        (["capacity", "s.yaml", "--hold-max", "abc"], "argument --hold-max: expected a duration"),
        (["bogus"], "llmload: unknown command 'bogus' (commands: run, validate, ui, master, worker, sim,"),
    ],
)
def test_the_other_commands_usage_errors_are_one_line(tmp_path: Path, argv: list[str], expected: str) -> None:
    (tmp_path / "s.yaml").write_text(GOOD)
    r = call_cli(argv, cwd=tmp_path)
    assert r.code == 2 and len(r.err_lines) == 1, r.err[-2000:]
    assert expected in r.err_lines[0], r.err_lines[0]


def test_capacity_takes_its_durations_as_the_scenario_does() -> None:
    from llmload.capacity.cli import parser

    a = parser().parse_args(["s.yaml", "--hold-max", "30s", "--warmup", "2m"])
    assert (a.hold_max, a.warmup) == (30.0, 120.0)


def test_the_options_locust_and_the_locustfile_take_are_not_unknown() -> None:
    # the locustfile's own (--llm-quiet) exist only once Locust has loaded it: asked of the same parser
    from llmload.locust.runcmd import check_no_unknown_option

    check_no_unknown_option(
        ["--llm-quiet", "--llm-no-reports", "--csv", "x", "-L", "DEBUG", "--tags", "a"], "run"
    )
