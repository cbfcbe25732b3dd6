"""Hostile input (issue 30, items 6-8): numbers that are not numbers, absurd sizes, YAML that
expands without end, header injection, names that climb out of the results directory. Each case
is one line ``llmload: FILE:LINE: field: message`` and exit 2, never a traceback, before anything is
sent or written. The cases run ``llmload.cli.main`` in-process; two run the real command.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from llmload.cli import main
from tests.conftest import ROOT

TARGET = '  - {name: a, kind: openai, base_url: "http://127.0.0.1:9", model: m}\n'
GOOD = "name: t\ntargets:\n" + TARGET + "load: {users: 1, duration: 1s}\n"


def scn(**sections: str) -> str:
    """GOOD with top-level sections replaced or added (``load="{...}"``)."""
    out = {"name": "t", "targets": "\n" + TARGET.rstrip("\n"), "load": "{users: 1, duration: 1s}"}
    out.update(sections)
    return "".join(f"{k}: {v}\n" for k, v in out.items())


def target(extra: str) -> str:
    return scn(targets="\n" + TARGET.replace("model: m}", f"model: m, {extra}}}").rstrip("\n"))


BOMB = "".join(
    f"{b}: &{b} [{', '.join(['*' + a] * 9)}]\n" for a, b in zip("abcdefgh", "bcdefghi", strict=True)
)
BOMB = 'x: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]\n' + BOMB

TRACE_HEAD = '{"timestamp": 0, "input_length": 5, "output_length": 5}\n'
CSV_HEAD = "Timestamp,Request tokens,Response tokens\n0,5,5\n"

# (id, scenario text, extra files, extra args, expected in the one line)
CASES: list[tuple[str, str, dict[str, str], list[str], str]] = [
    # NaN and ±Inf wherever a number is read
    (
        "duration nan",
        scn(load="{users: 1, duration: .nan}"),
        {},
        [],
        "s.yaml:4: load.duration: Input should be a finite",
    ),
    (
        "duration inf",
        scn(load="{users: 1, duration: .inf}"),
        {},
        [],
        "load.duration: Input should be a finite",
    ),
    ("stop_grace -inf", scn(load="{users: 1, duration: 1s, stop_grace: -.inf}"), {}, [], "load.stop_grace"),
    (
        "warmup nan",
        scn(load="{users: 1, duration: 1s, warmup: .NaN}"),
        {},
        [],
        "load.warmup: Input should be a finite",
    ),
    (
        "read_timeout inf",
        scn(client="{read_timeout: .inf}"),
        {},
        [],
        "client.read_timeout: Input should be a finite",
    ),
    ("failure_pause nan", scn(client="{failure_pause: .nan}"), {}, [], "client.failure_pause"),
    ("loop lag inf", scn(client="{loop_lag_threshold_ms: .inf}"), {}, [], "client.loop_lag_threshold_ms"),
    (
        "temperature nan",
        scn(workload="{temperature: .nan}"),
        {},
        [],
        "workload.temperature: Input should be a finite",
    ),
    ("speedup inf", scn(workload="{speedup: .inf}"), {}, [], "workload.speedup"),
    ("tokens inf", scn(workload="{output_tokens: .inf}"), {}, [], "workload.output_tokens"),
    (
        "length mean nan",
        scn(workload="{input_tokens: {dist: normal, mean: .nan, std: 1}}"),
        {},
        [],
        "workload.input_tokens.mean: Input should be a finite",
    ),
    ("slo nan", scn(slo="{ttft_p99_ms: .nan}"), {}, [], "slo.ttft_p99_ms: Input should be a finite"),
    ("slo error_rate nan", scn(slo="{error_rate: .nan}"), {}, [], "slo.error_rate"),
    ("cost inf", scn(cost="{api_price_per_mtok: .inf}"), {}, [], "cost.api_price_per_mtok"),
    (
        "cost_per_hour nan",
        target("cost_per_hour: .nan"),
        {},
        [],
        "targets[0].cost_per_hour: Input should be a finite",
    ),
    (
        "arrival rate inf",
        scn(load="{phases: [{executor: constant-arrival-rate, rate: .inf, duration: 1s}]}"),
        {},
        [],
        "load.phases[0].rate: Input should be a finite",
    ),
    (
        "stage target nan",
        scn(load="{phases: [{executor: ramping-vus, stages: [{duration: 1s, target: .nan}]}]}"),
        {},
        [],
        "load.phases[0].stages[0].target",
    ),
    (
        "sweep level inf",
        scn(load="{phases: [{executor: sweep, vary: rate, levels: [1, .inf], hold: 1s}]}"),
        {},
        [],
        "load.phases[0].levels[1]",
    ),
    (
        "--set nan",
        GOOD,
        {},
        ["--set", "load.duration=.nan"],
        "--set load.duration=nan: Input should be a finite",
    ),
    ("--set inf", GOOD, {}, ["--set", "client.request_timeout=.inf"], "--set client.request_timeout=inf"),
    ("--set -inf", GOOD, {}, ["--set", "workload.temperature=-.inf"], "--set workload.temperature=-inf"),
    # traces and datasets
    (
        "trace Infinity",
        scn(workload="{kind: trace, path: t.jsonl}", load="{}"),
        {"t.jsonl": TRACE_HEAD + '{"timestamp": Infinity, "input_length": 5, "output_length": 5}\n'},
        [],
        "t.jsonl:2: Infinity is not a JSON number",
    ),
    (
        "trace NaN tokens",
        scn(workload="{kind: trace, path: t.jsonl}", load="{}"),
        {"t.jsonl": TRACE_HEAD + '{"timestamp": 5, "input_length": NaN, "output_length": 5}\n'},
        [],
        "t.jsonl:2: NaN is not a JSON number",
    ),
    (
        "trace huge number",
        scn(workload="{kind: trace, path: t.jsonl}", load="{}"),
        {"t.jsonl": TRACE_HEAD + '{"timestamp": 1e999, "input_length": 5, "output_length": 5}\n'},
        [],
        "t.jsonl:2: timestamp must be a finite number",
    ),
    (
        "trace tokens absurd",
        scn(workload="{kind: trace, path: t.jsonl}", load="{}"),
        {"t.jsonl": TRACE_HEAD + '{"timestamp": 5, "input_length": 1e15, "output_length": 5}\n'},
        [],
        "t.jsonl:2: input_length 1e+15 is more than 10,000,000 tokens",
    ),
    (
        "csv trace inf",
        scn(workload="{kind: trace, path: t.csv}", load="{}"),
        {"t.csv": CSV_HEAD + "inf,5,5\n"},
        [],
        "t.csv:3: Timestamp must be a finite number, got 'inf'",
    ),
    (
        "csv trace nan tokens",
        scn(workload="{kind: trace, path: t.csv}", load="{}"),
        {"t.csv": CSV_HEAD + "1,nan,5\n"},
        [],
        "t.csv:3: request tokens must be a finite number",
    ),
    (
        "dataset NaN",
        scn(workload="{kind: jsonl, path: d.jsonl}"),
        {"d.jsonl": '{"prompt": "a", "output_tokens": NaN}\n'},
        [],
        "d.jsonl:1: NaN is not a JSON number",
    ),
    (
        "dataset tokens absurd",
        scn(workload="{kind: jsonl, path: d.jsonl}"),
        {"d.jsonl": '{"prompt": "a", "output_tokens": 100000000000}\n'},
        [],
        "d.jsonl:1: output_tokens must be a whole number from 1 to 10,000,000",
    ),
    (
        "sharegpt Infinity",
        scn(workload="{kind: sharegpt, path: g.json}"),
        {"g.json": '[{"conversations": []},\n -Infinity]\n'},
        [],
        "g.json:1: -Infinity is not a JSON number",
    ),
    # absurd sizes
    (
        "users 1e9",
        scn(load="{users: 1000000000, duration: 1s}"),
        {},
        [],
        "load.users: Input should be less than or equal to 100000",
    ),
    ("spawn rate absurd", scn(load="{users: 1, duration: 1s, spawn_rate: 1e12}"), {}, [], "load.spawn_rate"),
    (
        "vus absurd",
        scn(load="{phases: [{executor: constant-vus, vus: 10000000, duration: 1s}]}"),
        {},
        [],
        "load.phases[0].vus",
    ),
    (
        "max_vus absurd",
        scn(load="{phases: [{executor: constant-arrival-rate, rate: 1, duration: 1s, max_vus: 1e9}]}"),
        {},
        [],
        "load.phases[0].max_vus",
    ),
    (
        "rate absurd",
        scn(load="{phases: [{executor: constant-arrival-rate, rate: 1000000, duration: 1s}]}"),
        {},
        [],
        "load.phases[0]: at most 100,000 arrivals per second per target",
    ),
    (
        "arrivals absurd",
        scn(load="{phases: [{executor: constant-arrival-rate, rate: 5000, duration: 100h}]}"),
        {},
        [],
        "load.phases[0]: schedules about 1,800,000,000 arrivals per target",
    ),
    (
        "time_unit zero",
        scn(load="{phases: [{executor: constant-arrival-rate, rate: 5, time_unit: 0, duration: 5s}]}"),
        {},
        [],
        "load.phases[0].time_unit: Input should be greater than 0",
    ),
    (
        "ramping target absurd",
        scn(load="{phases: [{executor: ramping-vus, stages: [{duration: 1s, target: 5000000}]}]}"),
        {},
        [],
        "load.phases[0]: a stage's target is at most 100,000 users",
    ),
    (
        "sweep concurrency absurd",
        scn(load="{phases: [{executor: sweep, levels: [1, 1000000], hold: 1s}]}"),
        {},
        [],
        "load.phases[0]: concurrency levels are at most 100,000",
    ),
    ("output tokens absurd", scn(workload="{output_tokens: 99999999999}"), {}, [], "workload.output_tokens"),
    (
        "prefix tokens absurd",
        scn(workload="{kind: prefix, prefix_tokens: 1000000000}"),
        {},
        [],
        "workload.prefix_tokens",
    ),
    (
        "pause range",
        scn(client="{failure_pause: 20s, failure_pause_max: 1s}"),
        {},
        [],
        "client: failure_pause (20 s) is longer than failure_pause_max",
    ),
    # YAML that expands without end
    (
        "anchor bomb",
        BOMB + GOOD.removeprefix("name: t\n"),
        {},
        [],
        "s.yaml:6: expands to more than 100,000 values",
    ),
    ("recursive alias", "a: &x\n  b: *x\n" + GOOD, {}, [], "an alias that refers to a value holding it"),
    (
        "recursive alias in targets",
        'targets: &t [{name: a, kind: openai, base_url: "http://127.0.0.1:9", model: m, labels: *t}]\n',
        {},
        [],
        "s.yaml:1: an alias that refers to a value holding it",
    ),
    (
        "nested deep",
        GOOD + "description: " + "[" * 200 + "]" * 200 + "\n",
        {},
        [],
        "nested more than 64 levels deep",
    ),
    (
        "nested very deep",
        GOOD + "description: " + "[" * 5000 + "]" * 5000 + "\n",
        {},
        [],
        "nested more than 64 levels",
    ),
    # headers (RFC 9110) and URLs
    (
        "header CRLF",
        target('headers: {X-A: "v\\r\\nX-Evil: 1"}'),
        {},
        [],
        "targets[0].headers: header 'X-A': its value holds '\\r'",
    ),
    ("header LF", target('headers: {X-A: "v\\nw"}'), {}, [], "its value holds '\\n'"),
    ("header NUL", target('headers: {X-A: "v\\0"}'), {}, [], "its value holds '\\x00'"),
    ("header DEL", target('headers: {X-A: "v\\x7f"}'), {}, [], "its value holds '\\x7f'"),
    ("header name space", target('headers: {"X A": v}'), {}, [], "header name 'X A' is not an HTTP token"),
    ("header name colon", target('headers: {"X-A:": v}'), {}, [], "header name 'X-A:' is not an HTTP token"),
    ("header name empty", target('headers: {"": v}'), {}, [], "header name '' is not an HTTP token"),
    ("header name CRLF", target('headers: {"X\\r\\nY": v}'), {}, [], "is not an HTTP token"),
    (
        "base_url CRLF",
        target('base_url: "http://h:1/\\r\\nX: y"').replace('base_url: "http://127.0.0.1:9", ', ""),
        {},
        [],
        "base_url holds '\\r'",
    ),
    ("metrics_url space", target('metrics_url: "http://h:1/a b"'), {}, [], "metrics_url holds ' '"),
    (
        "--set header CRLF",
        GOOD,
        {},
        ["--set", 'targets.a.headers={X-A: "v\\r\\nX-B: 1"}'],
        "--set targets[0].headers=",
    ),
    # names that are file names in the results
    ("name climbs", scn(name="../../x"), {}, [], "s.yaml:1: name: use letters, digits"),
    ("name absolute", scn(name="/tmp/x"), {}, [], "s.yaml:1: name: use letters, digits"),
    ("name hidden", scn(name=".x"), {}, [], "s.yaml:1: name:"),
    ("name slash", scn(name="a/b"), {}, [], "s.yaml:1: name:"),
    ("name too long", scn(name="a" * 65), {}, [], "s.yaml:1: name:"),
    ("--set name climbs", GOOD, {}, ["--set", "name=../../x"], "--set name='../../x': use letters"),
    (
        "target name climbs",
        TARGET.replace("name: a", "name: ../x").join(["targets:\n", ""]),
        {},
        [],
        "targets[0].name",
    ),
    (
        "target name dots",
        TARGET.replace("name: a", "name: '..'").join(["targets:\n", ""]),
        {},
        [],
        "targets[0].name",
    ),
]


def write(tmp_path: Path, text: str, files: dict[str, str]) -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(text)
    for name, content in files.items():
        (tmp_path / name).write_text(content)
    return path


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_hostile_input_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: tuple
) -> None:
    _id, text, files, args, expected = case
    path = write(tmp_path, text, files)
    try:
        code = main(["validate", str(path), *args])
    except SystemExit as e:  # an option parser's exit
        code = e.code if isinstance(e.code, int) else 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert code == 2, err
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("llmload: ") and expected in lines[0], lines[0]


def test_the_good_scenario_of_the_table_is_good(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for text in (GOOD, scn(), target('headers: {X-Team: "bench one\\tcafé"}')):
        assert main(["validate", str(write(tmp_path, text, {}))]) == 0, capsys.readouterr().err


@pytest.mark.integration  # real llmload runs
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (BOMB + GOOD.removeprefix("name: t\n"), "expands to more than 100,000 values"),
        (scn(load="{users: 1000000000, duration: 1s}"), "load.users"),
        (scn(name="../../escaped"), "name: use letters, digits"),
    ],
    ids=["anchor bomb", "users 1e9", "name climbs"],
)
def test_run_refuses_hostile_input_before_it_writes_anything(
    tmp_path: Path, text: str, expected: str
) -> None:
    """As a user types it: `llmload run`, one line, exit 2 in seconds, and no results anywhere
    (the anchor bomb ran out of memory after 34 s; users: 1e9 was a fatal error, exit 134)."""
    work = tmp_path / "w"
    work.mkdir()
    write(work, text, {})
    r = subprocess.run(
        [sys.executable, "-m", "llmload", "run", "s.yaml", "--results", "out"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=work,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(tmp_path)},
    )
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert expected in lines[0], lines[0]
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["s.yaml", "w"], list(tmp_path.rglob("*"))
