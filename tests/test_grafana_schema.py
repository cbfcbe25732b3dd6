"""The provisioned dashboards against Grafana's own dashboard schema, and their conventions.

The schema (tests/fixtures/grafana/dashboard.schema.json) is generated from the npm package
@grafana/schema by scripts/grafana-schema/generate.sh; see tests/fixtures/grafana/README.md.
No Grafana server can run here, so this is the structural check; tests/test_grafana_queries.py
runs every query against real data.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import re
from types import ModuleType
from typing import Any

import jsonschema
import pytest
import yaml

from tests.conftest import ROOT

GRAFANA = ROOT / "grafana"
DASH_DIR = GRAFANA / "dashboards"
SCHEMA = ROOT / "tests" / "fixtures" / "grafana" / "dashboard.schema.json"
DS_UID = "llmload-influx"
MEASUREMENTS = {"llm_request", "llm_interval", "llm_event", "gpu", "engine"}
EXPECTED = {"llmload-engine-comparison.json", "llmload-gpu-memory.json", "llmload-runs.json"}


def _validator() -> jsonschema.Draft7Validator:
    schema = json.loads(SCHEMA.read_text())
    jsonschema.Draft7Validator.check_schema(schema)
    return jsonschema.Draft7Validator(schema)


def _dashboards() -> dict[str, dict[str, Any]]:
    return {f.name: json.loads(f.read_text()) for f in sorted(DASH_DIR.glob("*.json"))}


def _builder() -> ModuleType:
    spec = importlib.util.spec_from_file_location("grafana_build", GRAFANA / "build.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_three_dashboards_exist() -> None:
    assert set(_dashboards()) == EXPECTED


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_dashboard_validates_against_the_grafana_schema(name: str) -> None:
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in _validator().iter_errors(_dashboards()[name])]
    assert not errors, f"{name}:\n" + "\n".join(errors[:20])


def _break_panel_key(d: dict[str, Any]) -> None:
    d["panels"][0]["descripton"] = d["panels"][0].pop("description")  # misspelt key


def _break_grid(d: dict[str, Any]) -> None:
    del d["panels"][1]["gridPos"]["w"]


def _break_schema_version(d: dict[str, Any]) -> None:
    del d["schemaVersion"]


def _break_variable_type(d: dict[str, Any]) -> None:
    d["templating"]["list"][0]["type"] = "querry"


def _break_annotation(d: dict[str, Any]) -> None:
    del d["annotations"]["list"][1]["iconColor"]


def _break_field_config(d: dict[str, Any]) -> None:
    d["panels"][0]["fieldConfig"]["defaults"]["units"] = "ms"


@pytest.mark.parametrize(
    "breaker",
    [
        _break_panel_key,
        _break_grid,
        _break_schema_version,
        _break_variable_type,
        _break_annotation,
        _break_field_config,
    ],
)
def test_a_broken_copy_fails_validation(breaker: Any) -> None:
    validator = _validator()
    for name, dash in _dashboards().items():
        broken = copy.deepcopy(dash)
        breaker(broken)
        assert list(validator.iter_errors(broken)), f"{breaker.__name__} on {name} was not caught"


def test_committed_json_is_what_the_builder_writes() -> None:
    build = _builder()
    assert set(build.DASHBOARDS) == EXPECTED
    for name, fn in build.DASHBOARDS.items():
        assert (DASH_DIR / name).read_text(encoding="utf-8") == build.render(fn), (
            f"{name} differs from grafana/build.py: run .venv/bin/python grafana/build.py"
        )


def _panels(dash: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for p in dash["panels"]:
        out.append(p)
        out.extend(p.get("panels", []))
    return out


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_dashboard_conventions(name: str) -> None:
    dash = _dashboards()[name]
    assert dash["uid"] == name.removesuffix(".json")
    assert dash["schemaVersion"] >= 39
    assert [v["name"] for v in dash["templating"]["list"]][:2] == ["run_id", "target"]
    for var in dash["templating"]["list"]:
        assert var["datasource"]["uid"] == DS_UID
        assert var["query"].startswith("SHOW TAG VALUES FROM "), var["name"]
        assert var.get("description"), var["name"]
    panels = _panels(dash)
    assert len({p["id"] for p in panels}) == len(panels), "panel ids must be unique"
    for p in panels:
        where = f"{name} / {p.get('title')!r}"
        desc = p.get("description", "")
        assert desc.endswith(".") and not re.search(r"[.!?]\s+[A-Z]", desc), (
            f"{where}: one-sentence description"
        )
        assert p["datasource"]["uid"] == DS_UID, where
        assert p["targets"], where
        for t in p["targets"]:
            assert t["datasource"]["uid"] == DS_UID and t["rawQuery"] is True, where
            query = t["query"]
            measurements = set(re.findall(r'FROM "(\w+)"', query))
            assert measurements and measurements <= MEASUREMENTS, f"{where}: {measurements}"
            assert "$timeFilter" in query, f"{where}: no $timeFilter"
            assert not re.search(r"\$(run_id|target|host)\b", re.sub(r"=~ /\^\$\w+\$/", "", query)), (
                f"{where}: variables must be used as =~ /^$var$/ (one value, several, or All)"
            )
    runs_events = [a for a in dash["annotations"]["list"] if a["datasource"].get("uid") == DS_UID]
    assert len(runs_events) == 1 and 'FROM "llm_event"' in runs_events[0]["target"]["query"]


def test_datasource_provisioning_reads_everything_from_the_environment() -> None:
    doc = yaml.safe_load((GRAFANA / "provisioning" / "datasources" / "influxdb.yaml").read_text())
    assert doc["apiVersion"] == 1
    (ds,) = doc["datasources"]
    assert ds["uid"] == DS_UID and ds["type"] == "influxdb"
    assert ds["jsonData"]["version"] == "InfluxQL"
    assert ds["url"] == "${INFLUX_URL}"
    assert ds["user"] == "${INFLUX_USER}"
    assert ds["jsonData"]["dbName"] == "${INFLUX_DB}"
    assert ds["secureJsonData"]["password"] == "${INFLUX_PASSWORD}"
    assert ds["jsonData"]["httpHeaderName1"] == "Authorization"
    assert ds["secureJsonData"]["httpHeaderValue1"] == "Token ${INFLUX_TOKEN}"
    referenced = set(re.findall(r"\$\{(\w+)\}", json.dumps(doc)))  # the values, not the comments
    assert referenced == {"INFLUX_URL", "INFLUX_DB", "INFLUX_USER", "INFLUX_PASSWORD", "INFLUX_TOKEN"}
    # every dashboard points at this datasource and no other
    for name, dash in _dashboards().items():
        uids = set(re.findall(r'"uid": "([^"]+)"', json.dumps(dash)))
        assert uids <= {DS_UID, "-- Grafana --", dash["uid"]}, f"{name}: {uids}"


def test_dashboard_provider_loads_the_mounted_folder() -> None:
    doc = yaml.safe_load((GRAFANA / "provisioning" / "dashboards" / "llmload.yaml").read_text())
    (prov,) = doc["providers"]
    assert prov["type"] == "file"
    assert prov["options"]["path"] == "/var/lib/grafana/dashboards"


def test_no_secret_in_grafana_files() -> None:
    for f in GRAFANA.rglob("*"):
        if f.is_file() and f.suffix in (".json", ".yaml", ".yml"):
            text = f.read_text()
            assert not re.search(r"(?i)(token|password)\s*[:=]\s*['\"]?[A-Za-z0-9_\-]{8,}", text), f


def test_docs_describe_every_dashboard_and_panel() -> None:
    doc = (ROOT / "docs" / "grafana.md").read_text()
    for name, dash in _dashboards().items():
        assert dash["uid"] in doc, name
        for p in _panels(dash):
            assert f"**{p['title']}**" in doc, f"docs/grafana.md does not describe {name} / {p['title']!r}"
