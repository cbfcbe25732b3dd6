"""Capacity search on the seed scenario's two simulated engines, checked against a dense sweep.

Runs ``llmload capacity scenarios/seed-70b-comparison.yaml --sim`` (TTFT p99 <= 2 s, error rate
<= 1%), then one rate sweep of both engines in 5% steps across both intervals, and prints per engine:
the capacity with its interval, the sweep's bracket (its knee, the highest level below its first miss
that met every SLO at its load, llmload/report/levels.py, to that miss) and whether the two overlap
(a grid's knee sits up to one step below the capacity); then the capacity ratio with its
interval beside the ratio of the profiles' calibrated throughputs at 40 streams (2,840 / 2,210 tok/s;
the capacity ratio need not equal it: at capacity each engine runs far more than 40 streams).

    python bench/bench_capacity.py [--start 8] [--requests 300]      # about 20-30 minutes on 2 cores
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path

from llmload.capacity.outcome import CapacityResult
from llmload.report.levels import level_rows
from llmload.report.results import load_summary
from llmload.slo_spec import SloSpec

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = ROOT / "scenarios" / "seed-70b-comparison.yaml"
CALIBRATED = {"vllm-awq": 2210.0, "aphrodite-exl2": 2840.0}  # profiles.yaml, 40 streams


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--start", default="8")
    ap.add_argument("--requests", default="300")
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    out = Path(a.out or tempfile.mkdtemp(prefix="bench-capacity-"))
    cap = out / "capacity"
    llm = [sys.executable, "-m", "llmload"]
    subprocess.run(
        [
            *llm,
            "capacity",
            str(SCENARIO),
            "--sim",
            "--start",
            a.start,
            "--requests",
            a.requests,
            "--results",
            str(cap),
        ],
        cwd=ROOT,
        check=False,
    )
    res = CapacityResult.model_validate_json((cap / "capacity.json").read_text())
    found = [t for t in res.targets if t.low and t.high]
    if not found:
        print("no interval to check")
        return 1
    lo = 0.9 * min(t.low for t in found if t.low)
    hi = 1.1 * max(t.high for t in found if t.high)
    levels = [round(lo * 1.05**i, 2) for i in range(int(math.log(hi / lo) / math.log(1.05)) + 1)]
    sweep = out / "sweep"
    phase = {
        "executor": "sweep",
        "vary": "rate",
        "levels": levels,
        "requests": int(a.requests),
        "settle": "10s",
    }
    load = {"warmup": "15s", "stop_grace": "60s", "stop_on_slo_miss": True, "phases": [phase]}
    subprocess.run(
        [
            *llm,
            "run",
            str(SCENARIO),
            "--sim",
            "--set",
            "load=" + json.dumps(load),
            "--results",
            str(sweep),
            "--quiet",
        ],
        cwd=ROOT,
        check=False,
    )
    summary = load_summary(sweep)
    rows = level_rows(summary, SloSpec.model_validate(summary.run.slo))
    print(f"\nsweep levels (req/s): {levels}")
    print(f"{'target':16} {'capacity':>9} {'interval':>16} {'sweep knee-first miss':>22}  overlap")
    for t in res.targets:
        mine = [r for r in rows if r.target == t.target and r.value is not None]
        miss = min((r.value for r in mine if not r.met and r.value is not None), default=math.inf)
        knee = max(
            (r.value for r in mine if r.counts and r.value is not None and r.value < miss), default=None
        )
        ok = knee is not None and knee <= (t.high or math.inf) and miss >= (t.low or 0)
        bracket = f"{knee}-{miss}"
        print(
            f"{t.target:16} {t.capacity!s:>9} {f'{t.low}-{t.high}':>16} {bracket:>22}  {'yes' if ok else 'NO'}"
        )
    for r in res.ratios:
        cal = CALIBRATED[r.better] / CALIBRATED[r.other]
        print(
            f"ratio {r.better}/{r.other}: {r.value:.3f} ({r.low}-{r.high}); calibrated throughput ratio {cal:.3f}"
        )
    print(f"results: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
