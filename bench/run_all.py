"""`make bench`: every benchmark, one after the other. Each prints its figures and ratios; the checks
moved here from the tests (too long for `make test`) print `check ok` / `check FAILED` and fail the run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
BENCHES = [
    "bench_stream.py",
    "bench_hotpath.py",  # CPU per chunk of each part of a run's hot path besides the socket
    "bench_readpath.py",  # CPU per chunk of the read path against a bare Python epoll loop (issue 27)
    "bench_fullrun.py",  # CPU per chunk of a whole run, each reader, and the self-test held to it (issue 27)
    "bench_run_ids.py",
    "bench_sim.py",
    "bench_sim_calibration.py",  # moved from the tests: the seed profiles measured by llmload run
    "bench_capacity_sweep.py",  # moved from the tests: a capacity search against a dense sweep
    "bench_influx.py",
    "bench_distributed.py",
    "bench_master_merge.py",  # what one worker report costs a master (issue 28: the fleet's floor)
    "bench_fleet.py",  # one master against 10-1,000 synthetic workers (about 8 minutes)
    "bench_report.py",
    "bench_gate.py",  # the regression gate: A/A false alarms and a 10% slowdown caught, on the simulator
    "bench_engine_vllm.py",
    "bench_scrape_cost.py",  # a real vLLM: scraping off, every 1, 5, 15 s (5-7 minutes)
    "bench_rss.py",  # 10 minutes: last
]


def main() -> int:
    failed = []
    for name in BENCHES:
        path = HERE / name
        if not path.exists():
            continue
        print(f"\n=== {name} ===", flush=True)
        r = subprocess.run([sys.executable, str(path)], cwd=HERE.parent)
        if r.returncode != 0:
            failed.append(name)
    if failed:
        print(f"\nbenchmarks that failed to run: {', '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
