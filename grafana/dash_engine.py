"""The engine-comparison dashboard: client-side latency and throughput per target."""

from __future__ import annotations

from typing import Any

from dashlib import (  # the panel vocabulary
    BUCKET,
    FAILED,
    OK,
    RUN,
    TARGET,
    TF,
    Layout,
    _pct,
    dashboard,
    q,
    regex_override,
    right_axis,
    table,
    timeseries,
    unit_override,
    var_run_id,
    var_target,
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
