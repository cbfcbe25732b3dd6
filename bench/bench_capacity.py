"""Capacity search on the seed scenario's two simulated engines, checked against a dense sweep.

Runs ``llmload capacity scenarios/seed-70b-comparison.yaml --sim`` (TTFT p99 <= 2 s, error rate
<= 1%), then probes both engines at every load of a dense grid (7% steps across both intervals, each
load a run like a probe), and prints per engine: the capacity with its interval, the grid's bracket
(its knee, the highest load below its first miss that met every SLO, to that miss) and whether the
two overlap (a grid's knee sits up to one step below the capacity); then the capacity ratio with its
interval beside the ratio of the profiles' calibrated throughputs at 40 streams (2,840 / 2,210 tok/s;
the capacity ratio need not equal it: at capacity each engine runs far more than 40 streams).

    python bench/bench_capacity.py [--start 8] [--requests 300] [--capacity DIR]  # about 15 minutes on 2 cores
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path

from llmload.capacity.judge import judge
from llmload.capacity.outcome import CapacityResult
from llmload.capacity.probe import ProbeSpec, probe_load
from llmload.config.executors import Capacity
from llmload.config.scenario import load_scenario
from llmload.report.results import load_run

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = ROOT / "scenarios" / "seed-70b-comparison.yaml"
CALIBRATED = {"vllm-awq": 2210.0, "aphrodite-exl2": 2840.0}  # profiles.yaml, 40 streams


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--start", default="8")
    ap.add_argument("--requests", default="300")
    ap.add_argument("--out", default="")
    ap.add_argument("--capacity", default="", help="an earlier search's results directory: check it only")
    a = ap.parse_args()
    out = Path(a.out or tempfile.mkdtemp(prefix="bench-capacity-"))
    cap = Path(a.capacity) if a.capacity else out / "capacity"
    llm = [sys.executable, "-m", "llmload"]
    if not a.capacity:
        cmd = ["capacity", str(SCENARIO), "--sim", "--start", a.start, "--requests", a.requests]
        subprocess.run([*llm, *cmd, "--results", str(cap)], cwd=ROOT, check=False)
    res = CapacityResult.model_validate_json((cap / "capacity.json").read_text())
    found = [t for t in res.targets if t.low and t.high]
    if not found:
        print("no interval to check")
        return 1
    lo = 0.9 * min(t.low for t in found if t.low)
    hi = 1.1 * max(t.high for t in found if t.high)
    levels = [round(lo * 1.07**i, 2) for i in range(int(math.log(hi / lo) / math.log(1.07)) + 1)]
    # The dense check probes every level of the grid as the search probes one load (its warm-up,
    # its length, both engines at once): a sweep's short back-to-back levels never reach the queue
    # a long-running load builds (measured: every level up to 35 req/s "met" TTFT p99 <= 2 s).
    sc = load_scenario(str(SCENARIO), ["simulate=true"])
    settings = Capacity.model_validate({"executor": "capacity", "requests": int(a.requests)})
    assert sc.slo is not None
    met: dict[str, dict[float, bool]] = {t.target: {} for t in res.targets}
    for lv in levels:
        load = probe_load(sc, settings, ProbeSpec(0, "", lv, 0))
        d = out / "dense" / f"rate={lv}"
        subprocess.run(
            [
                *llm,
                "run",
                str(SCENARIO),
                "--sim",
                "--set",
                "load=" + json.dumps(load),
                "--set",
                "client.selftest=off",
            ]
            + ["--results", str(d), "--quiet", "--no-reports"],
            cwd=ROOT,
            check=False,
        )
        run = load_run(d)
        for t in res.targets:
            met[t.target][lv] = judge(run, t.target, sc.slo).passed
    print(f"\ndense grid (req/s): {levels}")
    print(f"{'target':16} {'capacity':>9} {'interval':>16} {'grid knee-first miss':>22}  overlap")
    for t in res.targets:
        mine = met[t.target]
        miss = min((v for v, ok in mine.items() if not ok), default=math.inf)
        knee = max((v for v, ok in mine.items() if ok and v < miss), default=None)
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
