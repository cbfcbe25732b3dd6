"""The capacity search on two small simulated engines, held against a dense sweep of the same engines
(moved here from the test suite, where it took minutes; tests/test_capacity.py keeps the search).

Runs ``llmload capacity tests/fixtures/capacity-sims.yaml``, then one ``llmload run`` sweeping both
engines over a 7% grid across both intervals (each level as long as a probe), and checks per engine
that the grid's bracket (its knee, the highest level below its first miss, to that miss) overlaps the
search's interval.

    python bench/bench_capacity_sweep.py   # a few minutes on 2 cores; exit 1 when a check fails
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path

from llmload.capacity.outcome import CapacityResult
from llmload.config.slo_spec import SloSpec
from llmload.report.levels import level_rows
from llmload.report.results import load_run

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "capacity-sims.yaml"
TOLERANT_CLIENT = ["--set", "client.loop_lag_threshold_ms=5000", "--set", "client.cpu_threshold_percent=100"]


def main() -> int:
    tmp = Path(tempfile.mkdtemp(prefix="bench-capacity-sweep-"))
    llm = [sys.executable, "-m", "llmload"]
    out = subprocess.run([*llm, "capacity", str(FIXTURE), "--results", str(tmp / "cap")], cwd=ROOT, text=True)
    if out.returncode != 0:
        print(f"check FAILED llmload capacity exits 0 (got {out.returncode})")
        return 1
    res = CapacityResult.model_validate_json((tmp / "cap" / "capacity.json").read_text())
    caps = {t.target: t for t in res.targets}
    if not all(t.low and t.high for t in caps.values()):
        print(f"check FAILED every target has an interval: {caps}")
        return 1
    lo = 0.8 * min(t.low for t in caps.values() if t.low)
    hi = 1.1 * max(t.high for t in caps.values() if t.high)
    levels = [round(lo * 1.07**i, 2) for i in range(int(math.log(hi / lo) / math.log(1.07)) + 1)]
    text = FIXTURE.read_text()
    sweep = tmp / "sweep.yaml"
    sweep.write_text(
        text.split("  phases:")[0]
        + "  stop_on_slo_miss: true\n  phases:\n    - executor: sweep\n      vary: rate\n"
        + f"      levels: {json.dumps(levels)}\n      requests: 300\n      settle: 2s\n"
        + "slo:"
        + text.split("slo:")[1]
    )
    cmd = [
        *llm,
        "run",
        str(sweep),
        "--results",
        str(tmp / "sweep"),
        "--no-reports",
        "--quiet",
        *TOLERANT_CLIENT,
    ]
    subprocess.run(cmd, cwd=ROOT, timeout=900)
    if not (tmp / "sweep" / "summary.json").is_file():
        print("check FAILED the sweep wrote summary.json")
        return 1
    run = load_run(tmp / "sweep", with_requests=False)
    rows = level_rows(run.summary, SloSpec.model_validate(run.summary.run.slo))
    ok = True
    for t in caps.values():
        mine = [r for r in rows if r.target == t.target and r.value is not None]
        first_miss = min((r.value for r in mine if not r.met), default=math.inf)
        knee = max((r.value for r in mine if r.counts and r.value < first_miss), default=None)
        overlaps = knee is not None and knee <= (t.high or math.inf) and first_miss >= (t.low or 0)
        ok &= overlaps
        print(
            f"check {'ok    ' if overlaps else 'FAILED'} {t.target}: capacity {t.capacity} ({t.low}-{t.high}), "
            f"grid bracket {knee} to {first_miss}: they overlap"
        )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
