"""The regression gate's false-alarm and detection rates (issue 29, item 1), on the simulator.

Runs the quickstart (two simulated engines, short) ``A_RUNS`` times as it is and ``SLOW_RUNS`` times
with every step of both profiles 10% slower, then draws ``PAIRS`` comparisons of each kind with
``llmload compare BASE CAND --baseline R1 --baseline R2 --fail-on-regression`` semantics:

- A/A: baseline, two repeats and candidate are four different unchanged runs: a regression found is a
  false alarm (the issue: at most 1 in 20);
- slowed: baseline and repeats unchanged, the candidate slowed: a regression found is a catch (the
  issue: at least 19 in 20).

Both are printed with the same pairs judged without the repeats (no noise floor), for the ratio.
``python bench/bench_gate.py [A_RUNS SLOW_RUNS]``; about 30 s a run on a quiet 2-core machine. The runs
stay in results/bench-gate/ for a second look.
"""

from __future__ import annotations

import random
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from llmload.report.compare import Comparison, compare_runs
from llmload.sim.profiles import load_profile

ROOT = Path(__file__).resolve().parent.parent
PAIRS = 20
SLOWER = 1.10
RUN = ["--quiet", "--no-reports", "--set", "load.duration=20s"]  # the README's CI recipe


def slowed_scenario(tmp: Path) -> Path:
    """The quickstart with each target's profile inline and every step time 10% longer."""
    sc = yaml.safe_load((ROOT / "scenarios" / "quickstart.yaml").read_text())
    for t in sc["targets"]:
        prof = load_profile(t["sim"]["profile"]).model_dump(mode="json")
        prof["step"] = {k: v * SLOWER for k, v in prof["step"].items()}
        prof["name"] += "-slowed"
        t["sim"]["profile"] = prof
    out = tmp / "slowed.yaml"
    out.write_text(yaml.safe_dump(sc))
    return out


def runs(scenario: Path, n: int, tmp: Path, tag: str) -> list[Path]:
    out = []
    for i in range(n):
        d = tmp / f"{tag}{i}"
        cmd = [sys.executable, "-m", "llmload", "run", str(scenario), "--results", str(d), *RUN]
        r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        if not (d / "summary.json").exists():
            raise SystemExit(f"{tag} run {i} wrote no summary (rc {r.returncode}): {r.stderr[-500:]}")
        out.append(d)
        print(f"  {tag} run {i + 1}/{n}: exit {r.returncode}", flush=True)
    return out


def judged(base: Path, cand: Path, repeats: list[Path]) -> Comparison:
    return compare_runs(base, cand, resamples=500, repeats=repeats)


def rates(a: list[Path], slow: list[Path]) -> None:
    rng = random.Random(29)
    aa = [rng.sample(a, 4) for _ in range(PAIRS)]
    sl = [(*rng.sample(a, 3), rng.choice(slow)) for _ in range(PAIRS)]
    for name, draws in (("A/A (false alarms)", aa), ("10% slower (caught)", sl)):
        floor = bare = 0
        for base, r1, r2, cand in draws:
            found = judged(base, cand, [r1, r2]).regressions
            floor += bool(found)
            bare += bool(judged(base, cand, []).regressions)
            for d in found if "A/A" in name else []:
                print(
                    f"  false alarm {base.name} -> {cand.name}: {d.label} {d.metric} {d.diff_pct:+.1f}%"
                    f" (floor {d.noise_pct or 0:.1f}%)"
                )
        print(f"{name:22} {floor:2d} of {PAIRS} with 2 baseline repeats, {bare:2d} of {PAIRS} without")


def main() -> int:
    n_a, n_s = (int(x) for x in sys.argv[1:3]) if len(sys.argv) > 2 else (8, 4)
    tmp = ROOT / "results" / "bench-gate"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    print(f"{n_a} unchanged and {n_s} slowed quickstart runs (20 s each)", flush=True)
    a = runs(ROOT / "scenarios" / "quickstart.yaml", n_a, tmp, "a")
    slow = runs(slowed_scenario(tmp), n_s, tmp, "s")
    rates(a, slow)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
