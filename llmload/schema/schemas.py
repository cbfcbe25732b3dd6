"""The published JSON schemas of llmload's results files (docs/schemas/), from llmload/schema/results_model.py.

python -m llmload.schema.schemas docs/schemas
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from pydantic import BaseModel

from llmload.schema.results_model import RequestLine, RunBlock, Summary, TelemetryRow, TimeseriesRow

SCHEMAS: dict[str, type[BaseModel]] = {
    "requests-line": RequestLine,
    "timeseries-row": TimeseriesRow,
    "telemetry-row": TelemetryRow,
    "summary-run": RunBlock,
    "summary": Summary,
}


def schema_text(model: type[BaseModel]) -> str:
    return json.dumps(model.model_json_schema(), indent=2, sort_keys=True) + "\n"


def write_schemas(out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, model in SCHEMAS.items():
        p = out_dir / f"{name}.schema.json"
        p.write_text(schema_text(model))
        paths.append(p)
    return paths


if __name__ == "__main__":
    for path in write_schemas(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/schemas")):
        print(path)
