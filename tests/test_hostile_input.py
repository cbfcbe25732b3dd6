"""Hostile input (issue 30, items 6-8): numbers that are not numbers, absurd sizes, YAML that
expands without end, header injection, names that climb out of the results directory. Each case
is one line ``llmload: FILE:LINE: field: message`` and exit 2, never a traceback, before anything is
sent or written. The cases run through tests/test_bad_input.py's runners: in-process, three as the real command.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli_inprocess import call_cli
from tests.test_bad_input import run_bad_input, run_bad_input_process

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
        "dataset not UTF-8",
        scn(workload="{kind: jsonl, path: d.jsonl}"),
        {"d.jsonl": b'{"prompt": "a"}\n{"prompt": "\xff"}\n'},
        [],
        "d.jsonl:2: not a UTF-8 text file (byte 0xff)",
    ),
    (
        "csv trace not UTF-8",
        scn(workload="{kind: trace, path: t.csv}", load="{}"),
        {"t.csv": CSV_HEAD.encode() + b"1,5,5\xfe\n"},
        [],
        "t.csv:3: not a UTF-8 text file (byte 0xfe)",
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
        "g.json:2: -Infinity is not a JSON number",
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


def as_bad_input(case: tuple, cmd: str = "validate", extra: tuple[str, ...] = ()) -> tuple:
    """A case of this table as tests/test_bad_input.py's runners take it (they add the command)."""
    _id, text, files, args, expected = case
    return (_id, text, files, cmd, [*args, *extra], expected)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_hostile_input_is_one_line_and_exit_2(tmp_path: Path, case: tuple) -> None:
    run_bad_input(tmp_path, as_bad_input(case))


def test_the_good_scenario_of_the_table_is_good(tmp_path: Path) -> None:
    for text in (GOOD, scn(), target('headers: {X-Team: "bench one\\tcafé"}')):
        (tmp_path / "s.yaml").write_text(text)
        r = call_cli(["validate", "s.yaml"], cwd=tmp_path)
        assert r.code == 0, r.err


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
    run_bad_input_process(tmp_path, ("run", text, {}, "run", ["--results", "out"], expected))
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["s.yaml"], list(tmp_path.rglob("*"))
