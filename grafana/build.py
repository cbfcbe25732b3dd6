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

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run as a script or loaded by path (tests)

from dash_engine import engine_comparison  # noqa: E402
from dash_gpu import gpu_memory  # noqa: E402
from dash_runs import runs  # noqa: E402
from dashlib import OUT_DIR  # noqa: E402

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
