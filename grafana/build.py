"""Build the provisioned Grafana dashboards (grafana/dashboards/*.json) from one description.

    .venv/bin/python grafana/build.py          # rewrite the JSON files
    .venv/bin/python grafana/build.py --check  # exit 1 when a committed file differs (CI)

The JSON files are what Grafana loads and what is committed; this script is their source, so
that every panel shares the same datasource reference, query shape and conventions. Queries are
raw InfluxQL (they run unchanged on InfluxDB 1.8, 2.x through DBRP and 3.x) with Grafana's
``$timeFilter``, ``$__interval`` and the dashboard variables ``$run_id``, ``$target``, ``$host``
always written in the regex form ``=~ /^$var$/`` (correct for one value, several, or All).
tests/test_grafana_queries.py runs every one of them against a real InfluxDB holding a real run.
"""

from __future__ import annotations

import json
import sys
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


def engine_comparison() -> dict[str, Any]:
    lay = Layout()
    iv = f'FROM "llm_interval" WHERE {RUN} AND {TARGET} AND {TF} {BUCKET}, "target" fill(none)'
    panels = [
        timeseries(
            lay,
            "TTFT p50 / p99 per target",
            "Time to first token of successful requests, percentiles over the requests that started in each "
            "time bucket (percentile() over llm_request).",
            [
                q("A", _pct("ttft_ms", 50, OK), "$tag_target p50"),
                q("B", _pct("ttft_ms", 99, OK), "$tag_target p99"),
            ],
            "ms",
            min_interval="2s",
        ),
        timeseries(
            lay,
            "ITL p50 / p99 per target",
            "Inter-token latency from llmload's exact per-interval histograms (llm_interval): the median of the "
            "interval p50s and the worst interval p99 in each bucket.",
            [
                q("A", f'SELECT median("itl_p50_ms") {iv}', "$tag_target p50"),
                q("B", f'SELECT max("itl_p99_ms") {iv}', "$tag_target p99"),
            ],
            "ms",
            min_interval="2s",
        ),
        timeseries(
            lay,
            "TPOT p50 / p99 per target",
            "Time per output token, (E2E - TTFT) / (output tokens - 1) per successful request, percentiles "
            "per time bucket (percentile() over llm_request).",
            [
                q("A", _pct("tpot_ms", 50, OK), "$tag_target p50"),
                q("B", _pct("tpot_ms", 99, OK), "$tag_target p99"),
            ],
            "ms",
            min_interval="2s",
        ),
        timeseries(
            lay,
            "E2E p50 / p99 per target",
            "End-to-end request latency (send to end of stream) of successful requests, percentiles per time "
            "bucket.",
            [
                q("A", _pct("e2e_ms", 50, OK), "$tag_target p50"),
                q("B", _pct("e2e_ms", 99, OK), "$tag_target p99"),
            ],
            "ms",
            min_interval="2s",
        ),
        timeseries(
            lay,
            "Output tokens/s per target",
            "Client-side output token throughput per target, as reported each interval by llmload (llm_interval "
            "output_tok_s).",
            [q("A", f'SELECT mean("output_tok_s") {iv}', "$tag_target")],
            "short",
            min_interval="2s",
        ),
        timeseries(
            lay,
            "Requests/s per target",
            "Completed requests per second per target, successful or not, as reported each interval "
            "(llm_interval req_s).",
            [q("A", f'SELECT mean("req_s") {iv}', "$tag_target")],
            "reqps",
            min_interval="2s",
        ),
        timeseries(
            lay,
            "Failures by class",
            "Failed requests per time bucket, stacked by target and failure class (llm_request status other "
            "than ok: connect, timeout, http_4xx, http_429, http_5xx, stream_error, truncated, ...).",
            [
                q(
                    "A",
                    f'SELECT count("index") FROM "llm_request" WHERE {RUN} AND {TARGET} AND {FAILED} AND {TF} '
                    f'{BUCKET}, "target", "status" fill(none)',
                    "$tag_target $tag_status",
                )
            ],
            "short",
            bars=True,
            min_interval="2s",
        ),
        timeseries(
            lay,
            "Streams in flight per target",
            "Open streams per target as reported each interval (solid) against the number of simulated users "
            "(dashed, right axis).",
            [
                q("A", f'SELECT mean("in_flight") {iv}', "$tag_target in flight"),
                q("B", f'SELECT max("users") {iv}', "$tag_target users"),
            ],
            "short",
            min_interval="2s",
            overrides=[right_axis(".* users$", "short")],
        ),
        timeseries(
            lay,
            "Client health: loop lag p99 and CPU",
            "The load generator's own event-loop lag p99 (ms) and CPU (% dashed, right axis); when they climb, "
            "client-side latencies stop being trustworthy.",
            [
                q("A", f'SELECT max("loop_lag_p99_ms") {iv}', "$tag_target loop lag p99"),
                q("B", f'SELECT max("cpu_percent") {iv}', "$tag_target cpu"),
            ],
            "ms",
            w=24,
            min_interval="2s",
            overrides=[right_axis(".* cpu$", "percent")],
        ),
    ]
    where_ok = f"WHERE {RUN} AND {TARGET} AND {OK} AND {TF}"
    panels.append(
        table(
            lay,
            "Per-target summary for the selected run",
            "One row per target: requests, failures, latency percentiles of successful requests, output tokens "
            "and mean client tok/s over the time range, merged from four queries on the target column.",
            [
                q(
                    "A",
                    f'SELECT count("index") AS "requests", sum("output_tokens") AS "output tokens" FROM "llm_request" '
                    f'WHERE {RUN} AND {TARGET} AND {TF} GROUP BY "target"',
                    fmt="table",
                ),
                q(
                    "B",
                    f'SELECT count("index") AS "failed" FROM "llm_request" WHERE {RUN} AND {TARGET} AND {FAILED} '
                    f'AND {TF} GROUP BY "target"',
                    fmt="table",
                ),
                q(
                    "C",
                    'SELECT percentile("ttft_ms", 50) AS "TTFT p50", percentile("ttft_ms", 99) AS "TTFT p99", '
                    'percentile("tpot_ms", 50) AS "TPOT p50", percentile("tpot_ms", 99) AS "TPOT p99", '
                    'percentile("e2e_ms", 50) AS "E2E p50", percentile("e2e_ms", 99) AS "E2E p99" '
                    f'FROM "llm_request" {where_ok} GROUP BY "target"',
                    fmt="table",
                ),
                q(
                    "D",
                    f'SELECT mean("output_tok_s") AS "tok/s", mean("req_s") AS "req/s" FROM "llm_interval" '
                    f'WHERE {RUN} AND {TARGET} AND {TF} GROUP BY "target"',
                    fmt="table",
                ),
            ],
            [
                {"id": "merge", "options": {}},
                {
                    "id": "organize",
                    "options": {"excludeByName": {"Time": True}, "renameByName": {"target": "Target"}},
                },
            ],
            h=7,
            overrides=[
                regex_override(
                    "^(TTFT|TPOT|E2E) p\\d+$", [{"id": "unit", "value": "ms"}, {"id": "decimals", "value": 1}]
                ),
                unit_override("tok/s", "short", 0),
                unit_override("req/s", "reqps", 2),
            ],
        )
    )
    return dashboard(
        "llmload-engine-comparison",
        "llmload: engine comparison",
        "Engines side by side under the same traffic: latency percentiles, throughput, failures and streams "
        "per target for one llmload run.",
        panels,
        [var_run_id(multi=False), var_target()],
    )


def gpu_memory() -> dict[str, Any]:
    lay = Layout()

    def eng(metric: str, select: str = 'mean("value")') -> str:
        return (
            f'SELECT {select} FROM "engine" WHERE "metric" = \'{metric}\' AND {HOST} AND {TF} '
            f'{BUCKET}, "target", "host" fill(none)'
        )

    def gpu(field: str, agg: str = "mean") -> str:
        return f'SELECT {agg}("{field}") FROM "gpu" WHERE {HOST} AND {TF} {BUCKET}, "host", "gpu" fill(none)'

    client_tok_s = (
        f'SELECT mean("output_tok_s") FROM "llm_interval" WHERE {RUN} AND {TARGET} AND {TF} '
        f'{BUCKET}, "target" fill(none)'
    )
    counter_rate = 'non_negative_derivative(max("value"), 1s)'
    diff = 'non_negative_difference(max("value"))'
    panels = [
        timeseries(
            lay,
            "GPU memory used per host and GPU",
            "Framebuffer memory in use per GPU (solid) and the card's total (dashed); flat under vLLM and "
            "Aphrodite, which pre-allocate, so read KV-cache usage for load.",
            [
                q("A", gpu("memory_used_bytes"), "$tag_host gpu$tag_gpu used"),
                q("B", gpu("memory_total_bytes", "max"), "$tag_host gpu$tag_gpu total"),
            ],
            "bytes",
            overrides=[
                regex_override(
                    ".* total$", [{"id": "custom.lineStyle", "value": {"fill": "dash", "dash": [10, 10]}}]
                )
            ],
        ),
        timeseries(
            lay,
            "KV-cache usage per engine",
            "Fraction of the engine's KV-cache blocks in use (engine metric kv_cache_usage_ratio), the real "
            "memory-pressure signal of a pre-allocating engine.",
            [q("A", eng("kv_cache_usage_ratio"), "$tag_target ($tag_host)")],
            "percentunit",
        ),
        timeseries(
            lay,
            "GPU utilisation",
            "Share of time a kernel was running on each GPU (gpu_util_ratio from NVML or DCGM).",
            [q("A", gpu("gpu_util_ratio"), "$tag_host gpu$tag_gpu")],
            "percentunit",
        ),
        timeseries(
            lay,
            "GPU power",
            "Board power draw per GPU in watts (power_watts).",
            [q("A", gpu("power_watts"), "$tag_host gpu$tag_gpu")],
            "watt",
        ),
        timeseries(
            lay,
            "Engine requests running / waiting",
            "Requests the engine is decoding (running) and queued (waiting), from its own /metrics as "
            "normalised by the collector.",
            [
                q("A", eng("requests_running"), "$tag_target running"),
                q("B", eng("requests_waiting"), "$tag_target waiting"),
            ],
            "short",
        ),
        timeseries(
            lay,
            "Engine vs client output tokens/s",
            "Generation tokens/s counted by the engine (rate of generation_tokens_total, solid) against the "
            "output tokens/s llmload received (dashed), on one timeline.",
            [
                q("A", eng("generation_tokens_total", counter_rate), "$tag_target engine"),
                q("B", client_tok_s, "$tag_target client"),
            ],
            "short",
            min_interval="2s",
            overrides=[
                regex_override(
                    ".* client$", [{"id": "custom.lineStyle", "value": {"fill": "dash", "dash": [10, 10]}}]
                )
            ],
        ),
        timeseries(
            lay,
            "Preemptions/s",
            "Requests preempted per second by the engine's scheduler (non_negative_derivative of "
            "preemptions_total); non-zero means the KV cache ran out.",
            [q("A", eng("preemptions_total", counter_rate), "$tag_target")],
            "short",
        ),
        timeseries(
            lay,
            "Prefix-cache hit ratio",
            "Prefix-cache hits / queries within each bucket from the engine's counters (solid), and the "
            "collector's cumulative ratio since engine start (dashed).",
            [
                q(
                    "A",
                    f'SELECT sum("hits") / sum("queries") FROM '
                    f'(SELECT {diff} AS "hits" FROM "engine" WHERE "metric" = \'prefix_cache_hits_total\' '
                    f'AND {HOST} AND {TF} {BUCKET}, "target", "host"), '
                    f'(SELECT {diff} AS "queries" FROM "engine" WHERE "metric" = \'prefix_cache_queries_total\' '
                    f'AND {HOST} AND {TF} {BUCKET}, "target", "host") '
                    f'WHERE {TF} {BUCKET}, "target", "host" fill(none)',
                    "$tag_target per bucket",
                ),
                q("B", eng("prefix_cache_hit_ratio"), "$tag_target cumulative"),
            ],
            "percentunit",
            overrides=[
                regex_override(
                    ".* cumulative$",
                    [{"id": "custom.lineStyle", "value": {"fill": "dash", "dash": [10, 10]}}],
                )
            ],
        ),
    ]
    panels.append(
        table(
            lay,
            "Energy per 1,000 output tokens (time range)",
            "Joules the target's GPUs used over the time range (increase of energy_joules, summed over the "
            "GPUs its collector tagged with target=...) per 1,000 output tokens llmload received; set the "
            "time range to the run, idle time counts.",
            [
                q(
                    "A",
                    'SELECT sum("joules") AS "energy_j" FROM (SELECT spread("energy_joules") AS "joules" '
                    f'FROM "gpu" WHERE {HOST} AND {TF} GROUP BY "host", "gpu", "target") '
                    f'WHERE {TARGET} GROUP BY "target"',
                    fmt="table",
                ),
                q(
                    "B",
                    'SELECT sum("output_tokens") AS "output_tokens" FROM "llm_request" '
                    f'WHERE {RUN} AND {TARGET} AND {TF} GROUP BY "target"',
                    fmt="table",
                ),
            ],
            [
                {"id": "merge", "options": {}},
                {
                    "id": "calculateField",
                    "options": {
                        "mode": "binary",
                        "alias": "joules_per_token",
                        "binary": {"left": "energy_j", "operator": "/", "right": "output_tokens"},
                        "replaceFields": False,
                    },
                },
                {
                    "id": "calculateField",
                    "options": {
                        "mode": "binary",
                        "alias": "J per 1k tokens",
                        "binary": {"left": "joules_per_token", "operator": "*", "right": "1000"},
                        "replaceFields": False,
                    },
                },
                {
                    "id": "organize",
                    "options": {
                        "excludeByName": {"Time": True, "joules_per_token": True},
                        "renameByName": {
                            "target": "Target",
                            "energy_j": "Energy (J)",
                            "output_tokens": "Output tokens",
                        },
                    },
                },
            ],
            h=6,
            overrides=[unit_override("J per 1k tokens", "none", 1), unit_override("Energy (J)", "joule", 0)],
        )
    )
    return dashboard(
        "llmload-gpu-memory",
        "llmload: GPU, memory and engine internals",
        "GPU memory, KV cache, utilisation, power and energy per token next to the engine's scheduler "
        "metrics and the client's throughput, on one timeline (collector data: gpu and engine).",
        panels,
        [var_run_id(multi=False), var_target(), var_host()],
    )


def runs() -> dict[str, Any]:
    lay = Layout()
    by_run = f'WHERE {RUN} AND {TARGET} AND {TF} GROUP BY "run_id", "target"'
    link = {
        "title": "Compare the engines of this run",
        "url": "/d/llmload-engine-comparison?var-run_id=${__data.fields.run_id}&${__url_time_range}",
        "targetBlank": False,
    }
    panels = [
        table(
            lay,
            "Runs and their headline figures",
            "One row per run and target: requests, failures, median and p99 TTFT and "
            "TPOT, output tokens and mean tok/s; click a run id to open the comparison.",
            [
                q(
                    "A",
                    f'SELECT count("index") AS "requests", sum("output_tokens") AS "output tokens" '
                    f'FROM "llm_request" {by_run}',
                    fmt="table",
                ),
                q(
                    "B",
                    f'SELECT count("index") AS "failed" FROM "llm_request" WHERE {RUN} AND {TARGET} AND {FAILED} '
                    f'AND {TF} GROUP BY "run_id", "target"',
                    fmt="table",
                ),
                q(
                    "C",
                    'SELECT percentile("ttft_ms", 50) AS "TTFT p50", percentile("ttft_ms", 99) AS "TTFT p99", '
                    'percentile("tpot_ms", 50) AS "TPOT p50", percentile("tpot_ms", 99) AS "TPOT p99" '
                    f'FROM "llm_request" WHERE {RUN} AND {TARGET} AND {OK} AND {TF} GROUP BY "run_id", "target"',
                    fmt="table",
                ),
                q("D", f'SELECT mean("output_tok_s") AS "tok/s" FROM "llm_interval" {by_run}', fmt="table"),
            ],
            [
                {"id": "merge", "options": {}},
                {
                    "id": "organize",
                    "options": {
                        "excludeByName": {"Time": True},
                        "indexByName": {"run_id": 0, "target": 1},
                        "renameByName": {},
                    },
                },
            ],
            h=10,
            overrides=[
                {
                    "matcher": {"id": "byName", "options": "run_id"},
                    "properties": [{"id": "links", "value": [link]}],
                },
                regex_override(
                    "^(TTFT|TPOT) p\\d+$", [{"id": "unit", "value": "ms"}, {"id": "decimals", "value": 1}]
                ),
                unit_override("tok/s", "short", 0),
            ],
        ),
        timeseries(
            lay,
            "Requests per run over time",
            "Requests started per time bucket for each selected run and target, successful or not.",
            [
                q(
                    "A",
                    f'SELECT count("index") FROM "llm_request" WHERE {RUN} AND {TARGET} AND {TF} '
                    f'{BUCKET}, "run_id", "target" fill(none)',
                    "$tag_run_id $tag_target",
                )
            ],
            "short",
            bars=True,
            w=24,
            min_interval="2s",
        ),
        table(
            lay,
            "Run events",
            "Start, stop, phase and stage changes, lost workers and warnings written by llmload (llm_event); "
            "the same events are annotations on every llmload dashboard.",
            [
                q(
                    "A",
                    f'SELECT "kind", "title", "text", "worker" FROM "llm_event" WHERE {RUN} AND {TF}',
                    fmt="table",
                )
            ],
            [],
            h=9,
        ),
    ]
    return dashboard(
        "llmload-runs",
        "llmload: runs",
        "Every llmload run in the time range with its targets and headline figures, and the events each run "
        "wrote.",
        panels,
        [var_run_id(multi=True), var_target()],
    )


DASHBOARDS = {
    "llmload-engine-comparison.json": engine_comparison,
    "llmload-gpu-memory.json": gpu_memory,
    "llmload-runs.json": runs,
}


def render(build: Any) -> str:
    return json.dumps(build(), indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = []
    for name, build in DASHBOARDS.items():
        path = OUT_DIR / name
        text = render(build)
        if check:
            if not path.is_file() or path.read_text(encoding="utf-8") != text:
                stale.append(name)
        else:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path}")
    if stale:
        print(f"grafana/dashboards out of date (run grafana/build.py): {', '.join(stale)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
