"""The results directory matches its published schemas (docs/schemas/), which are the models' own."""

from __future__ import annotations

import json
from pathlib import Path
from typing import get_args

import jsonschema
import pytest

from llmload.measure.histogram import Histogram
from llmload.measure.records import STATUS_CLASSES
from llmload.schema.results_model import (
    Latency,
    RequestLine,
    Status,
    Summary,
    TelemetryRow,
    TimeseriesRow,
)
from llmload.schema.schemas import SCHEMAS, schema_text
from tests.conftest import ROOT, TOLERANT_CLIENT, llmload_run

PUBLISHED = ROOT / "docs" / "schemas"


def test_the_published_schemas_are_the_models_own() -> None:
    for name, model in SCHEMAS.items():
        path = PUBLISHED / f"{name}.schema.json"
        assert path.read_text() == schema_text(model), (
            f"{path} is stale: python -m llmload.schema.schemas docs/schemas"
        )
    assert set(get_args(Status)) == set(STATUS_CLASSES)  # one list of classes, in two notations
    assert list(Latency.model_fields) == list(Histogram().summary_ms())  # one latency block, two notations


def test_a_real_run_matches_the_published_schemas(tmp_path: Path, sse_server: str) -> None:
    scn = tmp_path / "s.yaml"
    scn.write_text(
        f"{TOLERANT_CLIENT}\n"
        f"targets:\n  - name: a\n    kind: openai\n    base_url: '{sse_server}'\n    model: test-model\n"
        "    extra_body: {llmload_test: {mode: timed, n: 8, first_ms: 5, interval_ms: 20}}\n"
        "load: {users: 2, duration: 5s, warmup: 0s}\n"
    )
    out = tmp_path / "r"
    r, _ = llmload_run(scn, out, "--quiet")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    schema = {n: json.loads((PUBLISHED / f"{n}.schema.json").read_text()) for n in SCHEMAS}
    lines = [json.loads(x) for x in (out / "requests.jsonl").read_text().splitlines()]
    rows = [json.loads(x) for x in (out / "timeseries.jsonl").read_text().splitlines()]
    assert lines and rows
    for x in lines:
        jsonschema.validate(x, schema["requests-line"])
    for x in rows:
        jsonschema.validate(x, schema["timeseries-row"])
    summary = json.loads((out / "summary.json").read_text())
    jsonschema.validate(summary["run"], schema["summary-run"])
    jsonschema.validate(summary, schema["summary"])
    # The model reads it back and writes it again key for key: readers and the file agree (and a
    # key a writer put in that the model does not know would be dropped here).
    assert Summary.model_validate(summary).dump() == summary
    # (a reasoning request's keys are on its own lines only: records.to_json, docs/metrics.md)
    assert [RequestLine.model_validate(x).model_dump(exclude_unset=True) for x in lines] == lines
    assert [TimeseriesRow.model_validate(x).model_dump() for x in rows] == rows
    # And a line that breaks the shape is caught (the check is not vacuous).
    bad = dict(lines[0], status="fine")
    try:
        jsonschema.validate(bad, schema["requests-line"])
    except jsonschema.ValidationError:
        pass
    else:
        raise AssertionError("a request line with an unknown status passed the schema")


@pytest.mark.integration
def test_telemetry_rows_of_a_real_run_match_their_schema_and_load_typed(tmp_path: Path) -> None:
    """A simulated engine serves /metrics: its scraped rows are telemetry.jsonl's."""
    from llmload.report.results import load_run

    scn = tmp_path / "s.yaml"
    scn.write_text(
        f"{TOLERANT_CLIENT}\n"
        "targets: [{name: a, kind: sim, sim: {profile: test-fast-a}}]\n"
        "workload: {input_tokens: 16, output_tokens: 16}\n"
        "load: {users: 2, duration: 3s}\n"
    )
    out = tmp_path / "r"
    r, _ = llmload_run(scn, out, "--quiet")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    schema = json.loads((PUBLISHED / "telemetry-row.schema.json").read_text())
    rows = [json.loads(x) for x in (out / "telemetry.jsonl").read_text().splitlines()]
    assert {x["source"] for x in rows} >= {"engine"} and len({x["t"] for x in rows}) >= 2
    for x in rows:
        jsonschema.validate(x, schema)
    assert [TelemetryRow.model_validate(x).model_dump(exclude_none=True) for x in rows] == rows
    run = load_run(out)
    assert len(run.telemetry) == len(rows) and len(run.timeseries) > 0 and len(run.requests) > 0
    assert {s.metric for s in run.telemetry} >= {"requests_finished_total", "generation_tokens_total"}
