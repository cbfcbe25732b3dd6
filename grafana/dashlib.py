"""Building blocks for llmload's Grafana dashboards: queries, panels, variables, annotations.

Shared by the dashboard descriptions (dash_*.py); grafana/build.py renders them to JSON.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

DS_UID = "llmload-influx"
DS = {"type": "influxdb", "uid": DS_UID}
SCHEMA_VERSION = 39
OUT_DIR = Path(__file__).resolve().parent / "dashboards"

RUN = '"run_id" =~ /^$run_id$/'
TARGET = '"target" =~ /^$target$/'
HOST = '"host" =~ /^$host$/'
OK = "\"status\" = 'ok'"
FAILED = "\"status\" != 'ok'"
TF = "$timeFilter"
BUCKET = "GROUP BY time($__interval)"


# ---- queries, panels, variables --------------------------------------------------------------------
def q(ref: str, query: str, alias: str = "", fmt: str = "time_series") -> dict[str, Any]:
    """One raw InfluxQL target."""
    t: dict[str, Any] = {
        "refId": ref,
        "datasource": DS,
        "query": query,
        "rawQuery": True,
        "resultFormat": fmt,
    }
    if alias:
        t["alias"] = alias
    return t


def _field_config(unit: str, custom: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    defaults: dict[str, Any] = {"unit": unit}
    if custom:
        defaults["custom"] = custom
    defaults.update(extra)
    return {"defaults": defaults, "overrides": []}


class Layout:
    """Places panels left to right on Grafana's 24-column grid, wrapping to new rows."""

    def __init__(self) -> None:
        self.x = 0
        self.y = 0
        self.row_h = 0
        self.next_id = 1

    def place(self, w: int, h: int) -> tuple[int, dict[str, int]]:
        if self.x + w > 24:
            self.x, self.y, self.row_h = 0, self.y + self.row_h, 0
        pos = {"h": h, "w": w, "x": self.x, "y": self.y}
        self.x += w
        self.row_h = max(self.row_h, h)
        pid = self.next_id
        self.next_id += 1
        return pid, pos


def timeseries(
    lay: Layout,
    title: str,
    description: str,
    targets: list[dict[str, Any]],
    unit: str,
    *,
    w: int = 12,
    h: int = 8,
    bars: bool = False,
    min_interval: str = "",
    overrides: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    pid, pos = lay.place(w, h)
    custom: dict[str, Any] = {"drawStyle": "bars" if bars else "line", "lineWidth": 1, "spanNulls": False}
    if bars:
        custom.update(fillOpacity=80, stacking={"mode": "normal", "group": "A"})
    else:
        custom.update(fillOpacity=0, showPoints="auto")
    fc = _field_config(unit, custom)
    if overrides:
        fc["overrides"] = overrides
    panel: dict[str, Any] = {
        "id": pid,
        "type": "timeseries",
        "title": title,
        "description": description,
        "datasource": DS,
        "gridPos": pos,
        "fieldConfig": fc,
        "options": {
            "legend": {
                "displayMode": "table",
                "placement": "bottom",
                "showLegend": True,
                "calcs": ["mean", "max"],
            },
            "tooltip": {"mode": "multi", "sort": "desc"},
        },
        "targets": targets,
    }
    if min_interval:
        panel["interval"] = min_interval
    return panel


def table(
    lay: Layout,
    title: str,
    description: str,
    targets: list[dict[str, Any]],
    transformations: list[dict[str, Any]],
    *,
    w: int = 24,
    h: int = 8,
    unit: str = "short",
    overrides: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    pid, pos = lay.place(w, h)
    fc = _field_config(unit, {"align": "auto", "cellOptions": {"type": "auto"}, "filterable": True})
    if overrides:
        fc["overrides"] = overrides
    return {
        "id": pid,
        "type": "table",
        "title": title,
        "description": description,
        "datasource": DS,
        "gridPos": pos,
        "fieldConfig": fc,
        "options": {"showHeader": True, "cellHeight": "sm", "footer": {"show": False, "reducer": ["sum"]}},
        "targets": targets,
        "transformations": transformations,
    }


def unit_override(field: str, unit: str, decimals: int | None = None) -> dict[str, Any]:
    props: list[dict[str, Any]] = [{"id": "unit", "value": unit}]
    if decimals is not None:
        props.append({"id": "decimals", "value": decimals})
    return {"matcher": {"id": "byName", "options": field}, "properties": props}


def regex_override(pattern: str, props: list[dict[str, Any]]) -> dict[str, Any]:
    return {"matcher": {"id": "byRegexp", "options": pattern}, "properties": props}


def right_axis(pattern: str, unit: str) -> dict[str, Any]:
    return regex_override(
        pattern,
        [
            {"id": "custom.axisPlacement", "value": "right"},
            {"id": "unit", "value": unit},
            {"id": "custom.lineStyle", "value": {"fill": "dash", "dash": [10, 10]}},
        ],
    )


def variable(
    name: str, label: str, query: str, *, multi: bool, include_all: bool, description: str, sort: int = 1
) -> dict[str, Any]:
    return {
        "name": name,
        "label": label,
        "description": description,
        "type": "query",
        "datasource": DS,
        "query": query,
        "refresh": 2,  # on time range change
        "sort": sort,
        "multi": multi,
        "includeAll": include_all,
        "options": [],
    }


def var_run_id(multi: bool) -> dict[str, Any]:
    return variable(
        "run_id",
        "Run",
        'SHOW TAG VALUES FROM "llm_request" WITH KEY = "run_id" WHERE $timeFilter',
        multi=multi,
        include_all=multi,
        sort=2,  # descending: run ids end in their UTC start time, so the newest of a scenario comes first
        description="llmload run id (<scenario>-<UTC start>) from llm_request in the time range.",
    )


def var_target() -> dict[str, Any]:
    return variable(
        "target",
        "Target",
        f'SHOW TAG VALUES FROM "llm_request" WITH KEY = "target" WHERE {RUN}',
        multi=True,
        include_all=True,
        description="Scenario target names (engines) seen in the selected run(s).",
    )


def var_host() -> dict[str, Any]:
    return variable(
        "host",
        "GPU host",
        'SHOW TAG VALUES FROM "gpu" WITH KEY = "host"',
        multi=True,
        include_all=True,
        description="Hosts whose collector wrote gpu points (the collector's --host-tag).",
    )


def annotations() -> dict[str, Any]:
    """Grafana's built-in annotations plus llmload's run events (llm_event) on every panel."""
    return {
        "list": [
            {
                "builtIn": 1,
                "datasource": {"type": "grafana", "uid": "-- Grafana --"},
                "enable": True,
                "hide": True,
                "iconColor": "rgba(0, 211, 255, 1)",
                "name": "Annotations & Alerts",
                "type": "dashboard",
            },
            {
                "datasource": DS,
                "enable": True,
                "iconColor": "rgba(255, 152, 48, 1)",
                "name": "Run events",
                "target": {
                    "refId": "Anno",
                    "query": f'SELECT "title", "text", "kind" FROM "llm_event" WHERE {RUN} AND {TF}',
                    "rawQuery": True,
                    "resultFormat": "table",
                    "fromAnnotations": True,
                    "queryType": "tags",
                    "titleColumn": "title",
                    "textColumn": "text",
                    "tagsColumn": "kind",
                },
            },
        ]
    }


def dashboard(
    uid: str, title: str, description: str, panels: list[dict[str, Any]], variables: list[dict[str, Any]]
) -> dict[str, Any]:
    return {
        "uid": uid,
        "title": title,
        "description": description,
        "tags": ["llmload"],
        "timezone": "browser",
        "editable": True,
        "graphTooltip": 1,  # shared crosshair: every panel reads on one timeline
        "time": {"from": "now-1h", "to": "now"},
        "refresh": "10s",
        "schemaVersion": SCHEMA_VERSION,
        "version": 1,
        "links": [
            {
                "title": "llmload dashboards",
                "type": "dashboards",
                "tags": ["llmload"],
                "asDropdown": True,
                "includeVars": True,
                "keepTime": True,
                "icon": "external link",
                "targetBlank": False,
                "tooltip": "",
                "url": "",
            }
        ],
        "annotations": annotations(),
        "templating": {"list": variables},
        "panels": panels,
    }


# ---- the dashboards ---------------------------------------------------------------------------------
def _pct(field: str, p: int, where: str) -> str:
    return (
        f'SELECT percentile("{field}", {p}) FROM "llm_request" WHERE {RUN} AND {TARGET} AND {where} AND {TF} '
        f'{BUCKET}, "target" fill(none)'
    )
