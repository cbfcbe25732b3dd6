"""The runs dashboard: every run with its targets, headline figures and events."""

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
    dashboard,
    q,
    regex_override,
    table,
    timeseries,
    unit_override,
    var_run_id,
    var_target,
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
