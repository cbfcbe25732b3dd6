"""Every query of every provisioned dashboard, run on real data.

A session fixture starts a real InfluxDB 1.6.7 (tests/servers.py), two real simulators (one with
fault injection, so failure classes exist), a real collector per simulator (engine /metrics and the
simulator's DCGM text, tagged with the target), and a real `llmload run` of a two-target scenario
writing to that InfluxDB. Then each variable query, panel query and annotation query is given
Grafana's macro substitution and must return at least one row with a non-null value; a query that
returns nothing fails with the dashboard and panel named. There is no Grafana server here: the
substitution below imitates the InfluxDB datasource's ($timeFilter, $__interval with the panel's
min interval, regex-escaped variables, `(a|b)` for several values).

No GPU exists here: the GPU side is the simulator's DCGM-exporter emulation, read by the real
collector exactly as it would read dcgm-exporter.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from llmload.sim.profiles import load_profile
from tests.conftest import ROOT, start_port_file_process, stop_process
from tests.servers import InfluxHandle, influxdb_server

pytestmark = pytest.mark.integration  # every test here starts a child process

DASH_DIR = ROOT / "grafana" / "dashboards"
DATASOURCE = ROOT / "grafana" / "provisioning" / "datasources" / "influxdb.yaml"
DB = "llmload"
TARGETS = {"fast-a": ("test-fast-a", "vllm"), "fast-b": ("test-fast-b", "aphrodite")}
FAULTY = "fast-b"  # its simulator aborts a share of streams mid-way

SCENARIO = """\
name: grafana-check
targets:
  - name: fast-a
    kind: vllm
    base_url: {url_a}
    model: test-model-a
    labels: {{engine: vllm}}
  - name: fast-b
    kind: aphrodite
    base_url: {url_b}
    model: test-model-b
    labels: {{engine: aphrodite}}
workload:
  seed: 7
  input_tokens: {{dist: uniform, min: 50, max: 100}}
  output_tokens: 48
  ignore_eos: true
load:
  users: 4
  duration: 7s
  warmup: 1s
  stop_grace: 10s
"""


@dataclass
class RunData:
    influx: InfluxHandle
    run_id: str
    summary: dict[str, Any]
    requests: list[dict[str, Any]]  # requests.jsonl
    t_from_ms: int
    t_to_ms: int

    def raw(self, query: str) -> list[dict[str, Any]]:
        """InfluxQL -> the list of series (name, tags, columns, values); raises on an error."""
        body = urllib.parse.urlencode({"q": query, "db": DB, "epoch": "ms"}).encode()
        with urllib.request.urlopen(self.influx.url + "/query", data=body, timeout=30) as resp:
            doc = json.loads(resp.read())
        out: list[dict[str, Any]] = []
        for result in doc.get("results", []):
            if "error" in result:
                raise AssertionError(f"InfluxQL error: {result['error']}\n  query: {query}")
            out.extend(result.get("series", []))
        return out


@pytest.fixture(scope="session")
def run_data(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunData]:
    tmp = tmp_path_factory.mktemp("grafana")
    with influxdb_server(tmp) as influx:
        influx.create_database(DB)
        procs: list[subprocess.Popen[bytes]] = []
        try:
            urls: dict[str, str] = {}
            for name, (profile, _) in TARGETS.items():
                cmd = [sys.executable, "-m", "llmload.sim", "--port", "0", "--seed", "3"]
                if name == FAULTY:
                    prof = load_profile(profile).model_dump(mode="json")
                    prof["fault_rate"] = 0.1
                    cmd += ["--profile-json", json.dumps(prof)]
                else:
                    cmd += ["--profile", profile]
                proc, port = start_port_file_process(cmd, tmp, name)
                procs.append(proc)
                urls[name] = f"http://127.0.0.1:{port}"
            scenario = tmp / "grafana-check.yaml"
            scenario.write_text(SCENARIO.format(url_a=urls["fast-a"], url_b=urls["fast-b"]))
            collectors = []
            for name, (_, dialect) in TARGETS.items():
                log = open(tmp / f"collector-{name}.log", "wb")  # noqa: SIM115 - closed below
                collectors.append(
                    (
                        subprocess.Popen(
                            [
                                sys.executable,
                                "-m",
                                "collectors",
                                "--engine-metrics",
                                f"{urls[name]}/metrics",
                                "--engine-kind",
                                dialect,
                                "--gpu",
                                f"dcgm:{urls[name]}/dcgm/metrics",
                                "--tag",
                                f"target={name}",
                                "--host-tag",
                                f"host-{name}",
                                "--interval",
                                "1",
                                "--duration",
                                "13",
                                "--influx",
                                f"{influx.url}?db={DB}",
                                "--influx-flush-interval",
                                "0.5",
                            ],  # fmt: skip
                            cwd=ROOT,
                            stdout=log,
                            stderr=subprocess.STDOUT,
                        ),
                        log,
                    )
                )
            t0 = time.time()
            results = tmp / "results"
            run = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "llmload",
                    "run",
                    str(scenario),
                    "--results",
                    str(results),
                    "--quiet",
                    "--no-reports",
                    "--influx",
                    f"{influx.url}?db={DB}",
                ],  # fmt: skip
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=120,
            )
            for proc, log in collectors:
                try:
                    rc = proc.wait(40)
                finally:
                    log.close()
                assert rc == 0, f"collector exited {rc}: {Path(log.name).read_text()[-2000:]}"
            summary_path = results / "summary.json"
            assert summary_path.is_file(), (
                f"llmload run wrote no summary (rc {run.returncode}): {run.stderr[-2000:]}"
            )
            summary = json.loads(summary_path.read_text())
            yield RunData(
                influx=influx,
                run_id=summary["run"]["run_id"],
                summary=summary,
                requests=[
                    json.loads(line) for line in (results / "requests.jsonl").read_text().splitlines() if line
                ],
                t_from_ms=int((t0 - 5) * 1000),
                t_to_ms=int((time.time() + 5) * 1000),
            )
        finally:
            for p in procs:
                stop_process(p)


# ---- Grafana's InfluxQL macro substitution, imitated ------------------------------------------------
_REGEX_SPECIAL = re.compile(r"([\\^$*+?.()|\[\]{}/])")  # @grafana/data escapeRegex's set


def _escape_regex(value: str) -> str:
    return _REGEX_SPECIAL.sub(r"\\\1", value)


def _datasource_min_interval() -> str:
    (ds,) = yaml.safe_load(DATASOURCE.read_text())["datasources"]
    return str(ds["jsonData"].get("timeInterval") or "1s")


def interpolate(query: str, data: RunData, variables: dict[str, list[str]], min_interval: str = "") -> str:
    """Substitute $timeFilter, $__interval and the dashboard variables as Grafana would."""
    out = query.replace("$timeFilter", f"time >= {data.t_from_ms}ms and time <= {data.t_to_ms}ms")
    # Grafana's $__interval is at least the panel's min interval, else the datasource's timeInterval
    out = out.replace("$__interval", min_interval or _datasource_min_interval())
    for name in sorted(variables, key=len, reverse=True):
        values = variables[name]
        escaped = [_escape_regex(v) for v in values]
        regex_value = escaped[0] if len(escaped) == 1 else "(" + "|".join(escaped) + ")"
        out = re.sub(
            r"(=~|!~)\s*/([^/]*)\$\{?" + name + r"\}?([^/]*)/",
            lambda m, rv=regex_value: f"{m.group(1)} /{m.group(2)}{rv}{m.group(3)}/",
            out,
        )
        out = re.sub(r"\$\{?" + name + r"\b\}?", values[0], out)  # a plain (non-regex) use
    left = re.findall(r"\$[A-Za-z_{][\w}]*", out)
    assert not left, f"unsubstituted macro(s) {left} in: {out}"
    return out


def _has_value(series: list[dict[str, Any]]) -> bool:
    for s in series:
        cols = s["columns"]
        for row in s.get("values", []):
            if any(v is not None for c, v in zip(cols, row, strict=False) if c != "time"):
                return True
    return False


def _dashboards() -> list[tuple[str, dict[str, Any]]]:
    files = sorted(DASH_DIR.glob("*.json"))
    assert len(files) >= 3, f"expected the three llmload dashboards in {DASH_DIR}"
    return [(f.name, json.loads(f.read_text())) for f in files]


def resolve_variables(name: str, dash: dict[str, Any], data: RunData) -> dict[str, list[str]]:
    """Run each variable query (in order, like Grafana) and choose values from what it returned."""
    chosen: dict[str, list[str]] = {}
    for var in dash["templating"]["list"]:
        query = interpolate(var["query"], data, chosen)
        series = data.raw(query)
        values = sorted({str(row[1]) for s in series for row in s.get("values", [])})
        assert values, f"{name}: variable ${var['name']} query returned nothing: {query}"
        if var["name"] == "run_id":
            assert data.run_id in values, f"{name}: $run_id options {values} lack the run {data.run_id}"
            chosen["run_id"] = values if var.get("multi") else [data.run_id]
        else:
            chosen[var["name"]] = values if (var.get("multi") or var.get("includeAll")) else values[:1]
    return chosen


def test_variable_queries_return_the_run_targets_and_hosts(run_data: RunData) -> None:
    for name, dash in _dashboards():
        chosen = resolve_variables(name, dash, run_data)
        assert set(chosen) >= {"run_id", "target"}, name
        assert chosen["target"] == sorted(TARGETS), f"{name}: $target options {chosen['target']}"
        if "host" in chosen:
            assert chosen["host"] == sorted(f"host-{t}" for t in TARGETS), f"{name}: $host {chosen['host']}"


def test_every_panel_query_returns_rows_on_a_real_run(run_data: RunData) -> None:
    empty: list[str] = []
    checked = 0
    for name, dash in _dashboards():
        chosen = resolve_variables(name, dash, run_data)
        for panel in dash["panels"]:
            for target in panel.get("targets", []):
                query = interpolate(target["query"], run_data, chosen, panel.get("interval", ""))
                checked += 1
                if not _has_value(run_data.raw(query)):
                    empty.append(f"{name} / {panel['title']!r} / {target['refId']}: {query}")
    assert checked >= 30, f"only {checked} panel queries found"
    assert not empty, "queries that returned no non-null row:\n" + "\n".join(empty)


def test_run_events_annotation_query_returns_the_run_events(run_data: RunData) -> None:
    for name, dash in _dashboards():
        chosen = resolve_variables(name, dash, run_data)
        annos = [a for a in dash["annotations"]["list"] if a.get("datasource", {}).get("type") == "influxdb"]
        assert len(annos) == 1, f"{name}: expected one InfluxDB annotation query"
        target = annos[0]["target"]
        series = run_data.raw(interpolate(target["query"], run_data, chosen))
        assert _has_value(series), f"{name}: the run-events annotation query returned nothing"
        cols = series[0]["columns"]
        for key in ("titleColumn", "textColumn", "tagsColumn"):
            for col in target[key].split(","):
                assert col in cols, f"{name}: annotation {key} {col!r} not among the columns {cols}"
        kinds = {row[cols.index("kind")] for s in series for row in s["values"]}
        assert {"start", "stop"} <= kinds, f"{name}: run events {kinds}"


def _tokens(data: RunData, target: str) -> int:
    """Output tokens of every request sent to ``target`` (requests.jsonl; warm-up included)."""
    return sum(r["output_tokens"] or 0 for r in data.requests if r["target"] == target)


def _panel(dash_file: str, title_prefix: str) -> dict[str, Any]:
    dash = json.loads((DASH_DIR / dash_file).read_text())
    for p in dash["panels"]:
        if p["title"].startswith(title_prefix):
            return p
    raise AssertionError(f"{dash_file}: no panel titled {title_prefix!r}...")


def _table(data: RunData, dash_file: str, panel: dict[str, Any], ref: str) -> dict[str, dict[str, Any]]:
    """A table-format query's rows keyed by target: {target: {column: value}}."""
    dash = json.loads((DASH_DIR / dash_file).read_text())
    chosen = resolve_variables(dash_file, dash, data)
    target = next(t for t in panel["targets"] if t["refId"] == ref)
    out: dict[str, dict[str, Any]] = {}
    for s in data.raw(interpolate(target["query"], data, chosen)):
        for row in s["values"]:
            out[s["tags"]["target"]] = dict(zip(s["columns"], row, strict=False))
    return out


def test_summary_table_counts_match_the_run_summary(run_data: RunData) -> None:
    panel = _panel("llmload-engine-comparison.json", "Per-target summary")
    counts = _table(run_data, "llmload-engine-comparison.json", panel, "A")
    failed = _table(run_data, "llmload-engine-comparison.json", panel, "B")
    for name, block in run_data.summary["targets"].items():
        assert counts[name]["requests"] == block["requests"]["sent"], name
        assert counts[name]["output tokens"] == _tokens(run_data, name) > 0, name
        assert (failed.get(name, {}).get("failed") or 0) == block["requests"]["failed"], name
    assert run_data.summary["targets"][FAULTY]["requests"]["failed"] > 0, (
        "fault injection produced no failure"
    )


def test_failure_classes_panel_matches_the_run_summary(run_data: RunData) -> None:
    panel = _panel("llmload-engine-comparison.json", "Failures by class")
    dash = json.loads((DASH_DIR / "llmload-engine-comparison.json").read_text())
    chosen = resolve_variables("comparison", dash, run_data)
    totals: dict[tuple[str, str], float] = {}
    query = interpolate(panel["targets"][0]["query"], run_data, chosen, panel.get("interval", ""))
    for s in run_data.raw(query):
        key = (s["tags"]["target"], s["tags"]["status"])
        totals[key] = totals.get(key, 0) + sum(row[1] for row in s["values"] if row[1] is not None)
    expected = {
        (t, cls): n
        for t, block in run_data.summary["targets"].items()
        for cls, n in block["requests"]["by_class"].items()
        if cls != "ok" and n
    }
    assert expected, "the run had no failures to show"
    assert totals == expected


def test_energy_per_token_inputs_cover_each_target(run_data: RunData) -> None:
    panel = _panel("llmload-gpu-memory.json", "Energy per 1,000 output tokens")
    energy = _table(run_data, "llmload-gpu-memory.json", panel, "A")
    tokens = _table(run_data, "llmload-gpu-memory.json", panel, "B")
    for name in run_data.summary["targets"]:
        assert energy[name]["energy_j"] > 0, name
        assert tokens[name]["output_tokens"] == _tokens(run_data, name) > 0, name
    # the transformation divides the two columns the queries name
    calc = [t for t in panel["transformations"] if t["id"] == "calculateField"]
    assert calc[0]["options"]["binary"] == {"left": "energy_j", "operator": "/", "right": "output_tokens"}
