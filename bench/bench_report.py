"""Benchmark: report and compare speed on synthetic runs (prints figures and ratios).

    .venv/bin/python bench/bench_report.py [--requests 5000] [--resamples 2000]

Writes two synthetic results directories (tests/synth.py, one target, --requests each,
the candidate's TTFT shifted +30%), then times:
- loading a results directory (the baseline every report step pays),
- compare_runs (paired bootstrap, 7 metrics) and its ratio to the load time,
- the same bootstrap for one quantile metric in pure Python (the baseline numpy must beat),
- write_all (report.html + report.md + junit.xml).

Target: compare_runs under 3 s for 5,000 requests per side with 2,000 resamples on one core.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from llmload.report.compare import compare_runs  # noqa: E402
from llmload.report.outputs import write_all  # noqa: E402
from llmload.report.results import load_run  # noqa: E402
from tests.synth import SynthTarget, write_results_dir  # noqa: E402 - the tests' synthetic results


def _timed(fn):  # type: ignore[no-untyped-def]
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def _pure_python_bootstrap(a: list[float], b: list[float], resamples: int) -> tuple[float, float]:
    rng = random.Random(0)
    n = len(a)
    k = max(1, -(-99 * n // 100)) - 1
    diffs = []
    for _ in range(resamples):
        idx = [rng.randrange(n) for _ in range(n)]
        diffs.append(sorted(b[i] for i in idx)[k] - sorted(a[i] for i in idx)[k])
    diffs.sort()
    return diffs[int(0.025 * resamples)], diffs[int(0.975 * resamples) - 1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=5000)
    ap.add_argument("--resamples", type=int, default=2000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = write_results_dir(
            Path(tmp) / "b", [SynthTarget("sim", output_tokens=16)], requests_per_target=args.requests
        )
        cand = write_results_dir(
            Path(tmp) / "c",
            [SynthTarget("sim", output_tokens=16, ttft_scale=1.3)],
            requests_per_target=args.requests,
        )
        t_load, run = _timed(lambda: (load_run(base), load_run(cand)))
        t_cmp, cmp = _timed(lambda: compare_runs(base, cand, resamples=args.resamples))
        a = [r["ttft_ms"] for r in run[0].requests if r["ttft_ms"] is not None]
        b = [r["ttft_ms"] for r in run[1].requests if r["ttft_ms"] is not None]
        py_resamples = max(20, args.resamples // 20)
        t_py, _ = _timed(lambda: _pure_python_bootstrap(a, b, py_resamples))
        t_py_full = t_py * args.resamples / py_resamples
        t_write, _ = _timed(lambda: write_all(cand))
    regressions = ", ".join(d.metric for d in cmp.regressions)
    print(f"requests per side       {args.requests}, resamples {args.resamples}")
    print(f"load both runs          {t_load:8.3f} s")
    print(
        f"compare_runs (7 metrics){t_cmp:8.3f} s   ratio to load {t_cmp / t_load:6.1f}x   regressions: {regressions}"
    )
    print(f"pure-Python, 1 metric   {t_py_full:8.3f} s   (extrapolated from {py_resamples} resamples)")
    print(f"numpy speed-up          {t_py_full * 7 / t_cmp:8.1f}x  (7 metrics pure Python vs compare_runs)")
    print(f"write_all (html+md+xml) {t_write:8.3f} s")


if __name__ == "__main__":
    main()
