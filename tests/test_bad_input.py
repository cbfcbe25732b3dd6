"""Bad input in a scenario file: one clear line naming the file, line and field, exit 2, never a
traceback. Each case calls the `llmload` command's main in this process (tests/cli_inprocess.py), as a
user would type it; a few cases also run as a real process (SUBPROCESS_CASES), where a traceback is
what the user would see. Bad command-line options are tests/test_bad_options.py, with the same runner."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli_inprocess import call_cli
from tests.conftest import ROOT

GOOD = """\
name: t
targets:
  - name: a
    kind: openai
    base_url: http://127.0.0.1:9
    model: m
workload:
  input_tokens: 10
  output_tokens: 10
load:
  users: 1
  duration: 1s
"""


def edit(old: str, new: str) -> str:
    assert old in GOOD
    return GOOD.replace(old, new)


def add(text: str) -> str:
    return GOOD + text


TARGET_B = "  - name: b\n    kind: openai\n    base_url: http://127.0.0.1:9\n    model: m\n"

# (id, scenario text or bytes (None: no file), extra files, command (validate | run), extra args, expected)
CASES: list[tuple[str, str | bytes | None, dict[str, str | bytes], str, list[str], str]] = [
    ("missing file", None, {}, "validate", [], "s.yaml: file not found"),
    (
        "binary file",
        b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe",
        {},
        "validate",
        [],
        "s.yaml:1: not a UTF-8 text file",
    ),
    ("binary file run", b"\xff\xfe\x00\x01", {}, "run", [], "not a UTF-8 text file"),
    ("NUL byte", GOOD.replace("model: m", "model: m\x00"), {}, "validate", [], "s.yaml:6: a NUL byte"),
    ("bad indentation", edit("    model: m", "   model: m"), {}, "validate", [], "s.yaml:6: invalid YAML"),
    ("unclosed flow", add("slo: {ttft_p99_ms: 5\n"), {}, "validate", [], "invalid YAML"),
    ("top-level list", "- a\n- b\n", {}, "validate", [], "s.yaml:1: the scenario must be a mapping"),
    ("empty file", "", {}, "validate", [], "the scenario must be a mapping"),
    ("over 8 MiB", GOOD + "#" + "x" * 2**23 + "\n", {}, "validate", [], "s.yaml: larger than 8 MiB"),
    (
        "duplicate top key",
        add("name: again\n"),
        {},
        "validate",
        [],
        "s.yaml:13: name: duplicate key (first at line 1)",
    ),
    (
        "duplicate nested key",
        edit("    model: m", "    model: m\n    model: n"),
        {},
        "validate",
        [],
        "s.yaml:7: targets[0].model: duplicate key (first at line 6)",
    ),
    ("unknown top field", add("targetz: []\n"), {}, "validate", [], "s.yaml:13: targetz: unknown field"),
    (
        "unknown target field",
        edit("    model: m", "    modle: m"),
        {},
        "validate",
        [],
        "s.yaml:6: targets[0].modle: unknown field",
    ),
    ("no targets", "name: t\n", {}, "validate", [], "targets: required field is missing"),
    ("empty targets", "targets: []\n", {}, "validate", [], "s.yaml:1: targets:"),
    (
        "no base_url",
        edit("    base_url: http://127.0.0.1:9\n", ""),
        {},
        "validate",
        [],
        "s.yaml:3: targets[0]: base_url is required",
    ),
    (
        "base_url scheme",
        edit("http://127.0.0.1:9", "127.0.0.1:9"),
        {},
        "validate",
        [],
        "base_url must start with http://",
    ),
    ("bad kind", edit("kind: openai", "kind: ollama-ish"), {}, "validate", [], "s.yaml:4: targets[0].kind:"),
    (
        "duplicate target names",
        edit("    model: m\n", "    model: m\n" + TARGET_B.replace("name: b", "name: a")),
        {},
        "validate",
        [],
        "s.yaml:7: targets[1].name: target name 'a' is used twice (first at line 3)",
    ),
    ("bad target name", edit("name: a", "name: 'a b/c'"), {}, "validate", [], "s.yaml:3: targets[0].name:"),
    (
        "output_tokens 0",
        edit("output_tokens: 10", "output_tokens: 0"),
        {},
        "validate",
        [],
        "s.yaml:9: workload.output_tokens: Input should be greater than or equal to 1",
    ),
    (
        "output_tokens negative",
        edit("output_tokens: 10", "output_tokens: -5"),
        {},
        "validate",
        [],
        "workload.output_tokens: Input should be greater than or equal to 1",
    ),
    (
        "min above max",
        edit("input_tokens: 10", "input_tokens: {dist: uniform, min: 200, max: 100}"),
        {},
        "validate",
        [],
        "s.yaml:8: workload.input_tokens: min is larger than max",
    ),
    (
        "normal without mean",
        edit("input_tokens: 10", "input_tokens: {dist: normal}"),
        {},
        "validate",
        [],
        "dist normal needs `mean`",
    ),
    (
        "unknown dist",
        edit("input_tokens: 10", "input_tokens: {dist: zipf, min: 1}"),
        {},
        "validate",
        [],
        "workload.input_tokens.dist:",
    ),
    (
        "tokens as words",
        edit("input_tokens: 10", "input_tokens: many"),
        {},
        "validate",
        [],
        "workload.input_tokens:",
    ),
    (
        "empty prompts",
        add("  prompts: []\n")
        .replace("load:\n  users: 1\n  duration: 1s\n  prompts: []\n", "load:\n  users: 1\n  duration: 1s\n")
        .replace("  output_tokens: 10\n", "  output_tokens: 10\n  prompts: []\n"),
        {},
        "validate",
        [],
        "workload.prompts: List should have at least 1 item",
    ),
    (
        "jsonl without a file",
        edit("  input_tokens: 10", "  kind: jsonl\n  path: nowhere.jsonl\n  input_tokens: 10"),
        {},
        "validate",
        [],
        "nowhere.jsonl",
    ),
    (
        "malformed jsonl line",
        edit("  input_tokens: 10", "  kind: jsonl\n  path: p.jsonl\n  input_tokens: 10"),
        {"p.jsonl": '{"prompt": "a"}\n{"prompt": \n'},
        "validate",
        [],
        "p.jsonl:2",
    ),
    (
        "missing tokenizer",
        edit("  input_tokens: 10", "  tokenizer: tok.json\n  input_tokens: 10"),
        {},
        "validate",
        [],
        "tok.json: tokenizer file not found",
    ),
    (
        "temperature text",
        edit("  input_tokens: 10", "  temperature: hot\n  input_tokens: 10"),
        {},
        "validate",
        [],
        "workload.temperature:",
    ),
    ("users zero", edit("users: 1", "users: 0"), {}, "validate", [], "load.users:"),
    (
        "duration unit",
        edit("duration: 1s", "duration: 5 parsecs"),
        {},
        "validate",
        [],
        "s.yaml:12: load.duration: expected a duration",
    ),
    (
        "duration negative",
        edit("duration: 1s", "duration: -1"),
        {},
        "validate",
        [],
        "load.duration: duration must not be negative",
    ),
    ("mode", add("  mode: diagonal\n"), {}, "validate", [], "load.mode:"),
    ("max_requests zero", add("  max_requests: 0\n"), {}, "validate", [], "load.max_requests:"),
    (
        "stop_grace negative",
        add("  stop_grace: -5s\n"),
        {},
        "validate",
        [],
        "load.stop_grace: expected a duration",
    ),
    (
        "phases and shorthand",
        add("  phases: [{executor: constant-vus, vus: 1, duration: 1s}]\n"),
        {},
        "validate",
        [],
        "give either users/duration",
    ),
    (
        "phase missing vus",
        edit("  users: 1\n  duration: 1s\n", "  phases: [{executor: constant-vus, duration: 1s}]\n"),
        {},
        "validate",
        [],
        "load.phases[0].vus: required field is missing",
    ),
    (
        "unknown executor",
        edit("  users: 1\n  duration: 1s\n", "  phases: [{executor: warp-speed}]\n"),
        {},
        "validate",
        [],
        "load.phases[0]",
    ),
    (
        "read_timeout zero",
        add("client: {read_timeout: 0s}\n"),
        {},
        "validate",
        [],
        "s.yaml:13: client.read_timeout: Input should be greater than 0",
    ),
    (
        "connect_timeout zero",
        add("client: {connect_timeout: 0}\n"),
        {},
        "validate",
        [],
        "client.connect_timeout: Input should be greater than 0",
    ),
    (
        "first_byte_timeout negative",
        add("client: {first_byte_timeout: -3s}\n"),
        {},
        "validate",
        [],
        "client.first_byte_timeout:",
    ),
    (
        "scrape too often",
        add("client: {scrape_interval: 0.5s}\n"),
        {},
        "validate",
        [],
        "client.scrape_interval: must be at least 1 s",
    ),
    (
        "cpu threshold",
        add("client: {cpu_threshold_percent: 150}\n"),
        {},
        "validate",
        [],
        "client.cpu_threshold_percent:",
    ),
    ("slo negative", add("slo: {ttft_p99_ms: -1}\n"), {}, "validate", [], "slo.ttft_p99_ms:"),
    ("slo unknown", add("slo: {ttft_p99: 100}\n"), {}, "validate", [], "slo.ttft_p99: unknown field"),
    (
        "api price negative",
        add("cost: {api_price_per_mtok: -0.6}\n"),
        {},
        "validate",
        [],
        "s.yaml:13: cost.api_price_per_mtok: Input should be greater than 0",
    ),
    (
        "cost unknown",
        add("cost:\n  api_price_per_mtok: 0.6\n  per_hour: 2\n"),
        {},
        "validate",
        [],
        "s.yaml:15: cost.per_hour: unknown field",
    ),
    (
        "influx url",
        add("influx: {url: notaurl}\n"),
        {},
        "validate",
        [],
        "s.yaml:13: influx: url must be http(s)://host[:port]",
    ),
    (
        "unknown sim profile",
        "targets:\n  - {name: s, kind: sim, sim: {profile: no-such-profile}}\n",
        {},
        "validate",
        [],
        "s.yaml:2: targets[0].sim.profile: unknown simulator profile 'no-such-profile'",
    ),
    (
        "bad inline profile",
        "targets:\n  - {name: s, kind: sim, sim: {profile: {name: x, bogus: 1}}}\n",
        {},
        "validate",
        [],
        "targets[0].sim.profile: inline profile:",
    ),
    ("directory as scenario", None, {"d/x": "1"}, "validate", [], "is a directory"),
]


def write_case(tmp_path: Path, case: tuple) -> Path:
    """The case's scenario (or directory) and extra files under tmp_path; the scenario's path."""
    _id, scenario, files, _cmd, _args, _expected = case
    scn = tmp_path / ("d" if _id == "directory as scenario" else "s.yaml")
    if isinstance(scenario, bytes):
        scn.write_bytes(scenario)
    elif isinstance(scenario, str):
        scn.write_text(scenario)
    for name, content in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(content if isinstance(content, bytes) else content.encode())
    return scn


def run_bad_input(tmp_path: Path, case: tuple) -> None:
    """One case of a table like CASES, in this process: one line starting ``llmload``, exit 2."""
    _id, _scenario, _files, cmd, args, expected = case
    scn = write_case(tmp_path, case)
    r = call_cli([cmd, scn.name, *args], cwd=tmp_path)
    assert r.code == 2, r.err[-2000:]
    assert len(r.err_lines) == 1, r.err[-2000:]
    assert expected in r.err_lines[0], r.err_lines[0]
    assert r.err_lines[0].startswith("llmload"), r.err_lines[0]


def run_bad_input_process(tmp_path: Path, case: tuple) -> None:
    """The same case as a real ``llmload`` process: what a user sees, a traceback included."""
    _id, _scenario, _files, cmd, args, expected = case
    scn = write_case(tmp_path, case)
    r = subprocess.run(
        [sys.executable, "-m", "llmload", cmd, scn.name, *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(tmp_path)},
    )
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2, r.stderr[-2000:]
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert expected in lines[0], lines[0]
    assert lines[0].startswith("llmload"), lines[0]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, case: tuple) -> None:
    run_bad_input(tmp_path, case)


# As real processes: the interpreter's start-up, imports and exit path, where a traceback would show.
SUBPROCESS_CASES = ["binary file run", "unknown sim profile"]


@pytest.mark.integration
@pytest.mark.parametrize("name", SUBPROCESS_CASES)
def test_bad_input_in_a_real_process_is_one_line_and_exit_2(tmp_path: Path, name: str) -> None:
    run_bad_input_process(tmp_path, next(c for c in CASES if c[0] == name))
