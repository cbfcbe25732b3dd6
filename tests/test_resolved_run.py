"""The resolved run: what llmload finds out is set on the typed scenario, and nothing is lost on the
way to a worker (no ``--set`` strings, no ``exclude_none`` round trip)."""

from __future__ import annotations

from llmload.config.resolved import SimAddress, scenario_from_payload, scenario_payload, with_found, with_sims
from llmload.config.scenario import parse_scenario

# Imported here, at collection: Locust's import monkey-patches the process (gevent), which must not
# happen inside a test while tests/conftest.py guards os.fork (gevent would keep the guard as fork).
from llmload.locust.plugin import load_for_options

TEXT = """\
name: nulls
targets:
  - {name: a, kind: sim, sim: {profile: test-fast-a}}
  - {name: b, kind: vllm, base_url: "http://127.0.0.1:9", metrics_url: ""}
workload: {input_tokens: 10, output_tokens: 5, temperature: null, salt: true}
influx: {url: "http://127.0.0.1:8086", database: x, password_env: null}
"""


def test_nulls_survive_resolution_and_the_trip_to_a_worker() -> None:
    sc = parse_scenario(TEXT, "nulls.yaml")
    assert sc.workload.temperature is None and sc.influx is not None and sc.influx.password_env is None
    resolved = with_found(with_sims(sc, {"a": SimAddress("http://127.0.0.1:1234")}), {"b": "m"}, "run-ab12")
    worker = scenario_from_payload(scenario_payload(resolved), resolved.source)
    for s in (resolved, worker):
        assert s.workload.temperature is None  # was 0.0 after the exclude_none round trip
        assert s.influx is not None and s.influx.password_env is None  # was INFLUX_PASSWORD
        assert s.workload.salt == "run-ab12"
        a, b = s.target("a"), s.target("b")
        assert a.base_url == "http://127.0.0.1:1234"
        assert a.metrics_url == "http://127.0.0.1:1234/metrics"
        assert a.gpu_metrics_url == "http://127.0.0.1:1234/dcgm/metrics"
        assert b.model == "m" and b.metrics_url == "" and a.model is None
    assert worker == resolved  # the worker validates the payload once and gets the same scenario


def test_a_target_that_names_its_pages_keeps_them() -> None:
    sc = parse_scenario(
        TEXT.replace(
            "sim: {profile: test-fast-a}}", "sim: {profile: test-fast-a}, metrics_url: 'http://m/x'}"
        ),
        "p.yaml",
    )
    a = with_sims(sc, {"a": SimAddress("http://127.0.0.1:5")}).target("a")
    assert a.metrics_url == "http://m/x" and a.gpu_metrics_url == "http://127.0.0.1:5/dcgm/metrics"


def test_the_plugin_takes_the_scenario_run_validated_and_validates_nothing(tmp_path, monkeypatch) -> None:
    import argparse

    import llmload.config.scenario
    from llmload.config.resolved import Handoff

    path = tmp_path / "nulls.yaml"
    path.write_text(TEXT)
    sc = parse_scenario(TEXT, str(path))
    key = (str(path), ("load.users=3",), "a")
    Handoff(key=key, scenario=sc).save(tmp_path / "h.pickle")
    opts = argparse.Namespace(
        scenario=str(path), llm_set=["load.users=3"], llm_targets="a", llm_run=str(tmp_path / "h.pickle")
    )

    def no_validation(*_: object, **__: object) -> None:
        raise AssertionError("validated again")

    monkeypatch.setattr(llmload.config.scenario, "validate_data", no_validation)
    assert load_for_options(opts) == sc
    # the web UI's form chose other edits: the plugin loads the file itself (and validates it)
    opts.llm_set = ["load.users=5"]
    monkeypatch.undo()
    other = load_for_options(opts)
    assert other.load.phases[0] != sc.load.phases[0] and [t.name for t in other.targets] == ["a"]


def test_every_shipped_scenario_survives_the_workers_validation() -> None:
    """A worker validates the payload its master sends (every field, nulls included): a rule that
    reads a null as given (a length distribution's fields) refused it, and every distributed run
    waited for workers that never came."""
    from pathlib import Path

    from llmload.config.scenario import load_scenario

    files = sorted((Path(__file__).resolve().parent.parent / "scenarios").glob("*.yaml"))
    assert len(files) >= 8
    for f in files:
        sc = load_scenario(f)
        assert scenario_from_payload(scenario_payload(sc), str(f)) == sc, f
