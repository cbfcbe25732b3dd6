"""Scenario validation: one clear line naming file, line and field; exit code 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmload.config.scenario import Scenario, load_scenario, parse_scenario
from llmload.config.yamlsrc import InputError
from tests.cli_inprocess import CliResult, call_cli

ROOT = Path(__file__).resolve().parent.parent

GOOD = """\
name: t
targets:
  - name: a
    kind: vllm
    base_url: http://127.0.0.1:8000
    model: m
    extra_body: {min_p: 0.05}
    labels: {quantization: awq}
workload:
  input_tokens: 64
  output_tokens: {dist: uniform, min: 10, max: 20}
load:
  users: 4
  duration: 2m
  warmup: 5s
"""


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "scn.yaml"
    p.write_text(text)
    return p


def validate_cli(path: Path) -> CliResult:
    """``llmload validate PATH``, in this process (tests/cli_inprocess.py)."""
    return call_cli(["validate", str(path)], cwd=path.parent)


def test_good_file_validates(tmp_path: Path) -> None:
    sc = load_scenario(write(tmp_path, GOOD))
    assert sc.targets[0].extra_body == {"min_p": 0.05}
    assert sc.load.phases[0].duration == 120.0 and sc.load.phases[0].vus == 4
    assert sc.load.warmup == 5.0
    r = validate_cli(write(tmp_path, GOOD))
    assert r.code == 0, r.err
    assert "ok" in r.out


@pytest.mark.parametrize(
    "edit,line,field,words",
    [
        (("    model: m\n", ""), None, None, None),  # model is optional (taken from /v1/models): stays valid
        (("    kind: vllm\n", ""), 3, "targets[0].kind", "required field is missing"),
        (("  users: 4\n", "  users: many\n"), 13, "load.users", "integer"),
        (("    kind: vllm\n", "    kind: vllmx\n"), 4, "targets[0].kind", "'vllmx'"),
        (("  input_tokens: 64\n", "  input_tokenz: 64\n"), 10, "workload.input_tokenz", "unknown field"),
        (("  duration: 2m\n", "  duration: soon\n"), 14, "load.duration", "duration"),
        (("    base_url: http://127.0.0.1:8000\n", ""), 3, "targets[0]", "base_url is required"),
    ],
)
def test_errors_name_file_line_and_field(tmp_path: Path, edit, line, field, words) -> None:
    text = GOOD.replace(*edit)
    p = write(tmp_path, text)
    if line is None:
        load_scenario(p)
        return
    with pytest.raises(InputError) as ei:
        load_scenario(p)
    msg = str(ei.value)
    assert msg.startswith(f"{p}:{line}: {field}:"), msg
    assert words in msg
    assert "\n" not in msg
    r = validate_cli(p)
    assert r.code == 2
    assert r.err.strip().count("\n") == 0, r.err  # one line
    assert "Traceback" not in r.err
    assert f"{p}:{line}" in r.err


def test_bad_yaml_names_the_line(tmp_path: Path) -> None:
    p = write(tmp_path, GOOD.replace("  users: 4\n", "  users: [4\n"))
    r = validate_cli(p)
    assert r.code == 2 and "invalid YAML" in r.err and f"{p}:" in r.err
    assert "Traceback" not in r.err


def test_missing_file_and_duplicate_targets(tmp_path: Path) -> None:
    r = validate_cli(tmp_path / "nope.yaml")
    assert r.code == 2 and "file not found" in r.err
    dup = GOOD + "  # dup\n"
    dup = GOOD.replace("workload:", "  - {name: a, kind: tgi, base_url: 'http://127.0.0.1:1'}\nworkload:")
    with pytest.raises(InputError, match="used twice"):
        parse_scenario(dup, "dup.yaml")


def test_set_overrides_by_target_name_and_index() -> None:
    sc = parse_scenario(GOOD, "x.yaml", ["targets.a.base_url=http://127.0.0.1:9", "load.duration=10s"])
    assert sc.targets[0].base_url == "http://127.0.0.1:9"
    assert sc.load.phases[0].duration == 10.0
    sc = parse_scenario(GOOD, "x.yaml", ["targets.0.labels.gpus=2"])
    assert sc.targets[0].labels["gpus"] == "2"
    with pytest.raises(InputError, match="no list item"):
        parse_scenario(GOOD, "x.yaml", ["targets.zzz.model=q"])


def test_secrets_are_redacted_from_the_public_dict() -> None:
    text = GOOD.replace(
        "    labels:", "    headers: {Authorization: Bearer sk-live-123, X-Trace: 1}\n    labels:"
    )
    sc = parse_scenario(text.replace("    model: m\n", "    model: m\n    api_key_env: MY_KEY\n"), "x.yaml")
    pub = sc.public_dict()
    assert "sk-live-123" not in str(pub)
    assert pub["targets"][0]["api_key_env"] == "MY_KEY"  # the variable's name, never its value


def test_shipped_scenarios_validate() -> None:
    files = sorted((ROOT / "scenarios").glob("*.yaml"))
    assert files
    for f in files:
        r = validate_cli(f)
        assert r.code == 0, f"{f}: {r.err}"


def test_a_validated_scenario_is_resolved_once_and_cannot_be_edited() -> None:
    from pydantic import ValidationError

    sc = parse_scenario(
        "targets:\n"
        "  - {name: a, kind: vllm, base_url: 'http://127.0.0.1:9', model: m, sim: {profile: test-fast-a}}\n"
        "load: {users: 3, duration: 5s}\n"
        "slo: {ttft_p99_ms: 500}\n"
        "influx: {url: 'http://127.0.0.1:9'}\n"
        "simulate: true\n"
    )
    # what validation resolved: the shorthand as a phase, simulate as a sim target, typed sections
    [t] = sc.targets
    assert (t.kind, t.base_url, t.labels["simulated_kind"], sc.simulate) == ("sim", None, "vllm", False)
    assert [type(p).__name__ for p in sc.load.phases] == ["ConstantVUs"] and sc.load.users is None
    assert sc.slo is not None and sc.slo.ttft_p99_ms == 500 and sc.slo.active() == {"ttft_p99_ms": 500}
    assert sc.influx is not None and (sc.influx.api, sc.influx.database) == ("v1", "llmload")
    # nothing after validation edits it, at any depth
    for obj, field, value in (
        (sc, "name", "x"),
        (t, "model", "other"),
        (sc.load, "warmup", 1.0),
        (sc.load.phases[0], "vus", 9),
        (sc.slo, "ttft_p99_ms", 1.0),
        (sc.influx, "url", "http://elsewhere"),
        (sc.client, "read_timeout", 1.0),
    ):
        with pytest.raises(ValidationError, match="frozen"):
            setattr(obj, field, value)
    # the dumped scenario (what a worker receives) validates to the same plan
    again = parse_scenario(json.dumps(sc.model_dump(mode="json", exclude_none=True)))
    assert again.model_dump() == sc.model_dump()

    # a vLLM target's metrics_url follows its base_url
    real = parse_scenario("targets: [{name: a, kind: vllm, base_url: 'http://127.0.0.1:9/', model: m}]\n")
    assert real.targets[0].metrics_url == "http://127.0.0.1:9/metrics"


@pytest.mark.parametrize(
    ("workload", "field"),
    [
        ("input_tokens: 10\n  speedup: 2", "speedup"),
        ("kind: prefix\n  turns: 4", "turns"),
        ("kind: multiturn\n  prefix_groups: 2", "prefix_groups"),
        ("kind: trace\n  path: t.jsonl\n  prompts: [hi]", "prompts"),
        ("kind: synthetic\n  path: data.jsonl", "path"),
    ],
)
def test_a_field_of_another_workload_kind_is_refused_at_its_line(workload: str, field: str) -> None:
    text = f"targets: [{{name: a, kind: sim, sim: {{profile: test-fast-a}}}}]\nworkload:\n  {workload}\n"
    line = 1 + next(i for i, x in enumerate(text.splitlines()) if x.strip().startswith(field + ":"))
    with pytest.raises(InputError) as e:
        parse_scenario(text, "w.yaml")
    assert str(e.value).startswith(f"w.yaml:{line}: workload.{field}: belongs to workload kind"), str(e.value)


def test_the_fields_of_each_kind_are_accepted() -> None:
    base = "targets: [{name: a, kind: sim, sim: {profile: test-fast-a}}]\n"
    for workload in (
        "{kind: prefix, prefix_groups: 2, prefix_tokens: 64}",
        "{kind: multiturn, turns: 2, think_time: 1s}",
        "{kind: synthetic, prompts: [hi]}",
    ):
        sc = parse_scenario(base + f"workload: {workload}\n", "w.yaml")
        assert sc.workload.kind in workload


@pytest.mark.parametrize(
    ("workload", "line", "expected"),
    [
        ("seed: 1\n  kind: bogus", 4, "workload.kind: must be one of synthetic, jsonl, sharegpt"),
        ("kind: jsonl", 2, "workload.path: required field is missing"),
        ("kind: trace\n  speedup: 2", 2, "workload.path: required field is missing"),
    ],
)
def test_a_workload_kind_that_names_no_model_or_lacks_its_file_is_one_line(
    workload: str, line: int, expected: str
) -> None:
    text = f"targets: [{{name: a, kind: sim, sim: {{profile: test-fast-a}}}}]\nworkload:\n  {workload}\n"
    with pytest.raises(InputError) as e:
        parse_scenario(text, "w.yaml")
    assert str(e.value).startswith(f"w.yaml:{line}: {expected}"), str(e.value)
    assert "more)" not in str(e.value)


def test_each_workload_kind_is_its_own_model_and_round_trips() -> None:
    """The workload is a union by kind: the chosen kind's model holds only its fields, and the
    dumped scenario validates to the same model again (a worker re-reads it that way)."""
    base = "targets: [{name: a, kind: sim, sim: {profile: test-fast-a}}]\n"
    seen = set()
    for workload in ("{}", "{kind: prefix}", "{kind: multiturn, turns: 2}", "{kind: sharegpt, path: d.json}"):
        sc = parse_scenario(base + f"workload: {workload}\n", "w.yaml")
        again = Scenario.model_validate(sc.model_dump())
        assert type(again.workload) is type(sc.workload)
        assert again.workload == sc.workload
        seen.add(type(sc.workload).__name__)
        assert len({"turns", "prefix_groups", "speedup"} & set(type(sc.workload).model_fields)) <= 1
    assert len(seen) == 4
