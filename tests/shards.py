"""`make test`'s process tier in shards that run side by side, and their runner.

    python -m tests.shards N [pytest args...]   # N pytest processes, each with --shard I/N

Most of the integration tier waits (for a server to be ready, a worker to be declared lost, a
plan's seconds to pass) rather than computes, so two shards on a 2-core machine take a little over
half the time of one, and every test must already pass with both cores busy (the house rule).

A shard is a set of whole test files, balanced by the seconds each file took in a measured run
(``WEIGHTS``; a file not listed counts ``DEFAULT_S`` per test). Files that share what cannot be
doubled on one machine go together in one ``GROUPS`` entry: the real vLLM and Aphrodite servers
(one CPU engine at a time), the network-namespace hosts. A stale weight only unbalances the shards; it never
drops a test: every collected file lands in exactly one shard.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

# Seconds per file in `pytest --durations=0` on the 2-core machine (make test's two shards, 2026-12-05;
# files under 3 s are left out: DEFAULT_S per test that starts processes stands for them).
WEIGHTS: dict[str, float] = {
    "test_seed_real.py": 119,
    "test_capacity.py": 102,
    "test_engine_vllm.py": 76,
    "test_webui.py": 74,
    "test_webui_stop.py": 35,  # 2 modes x (Stop, New, Stop), measured 34 s on its own (2026-12-05)
    "test_engine_aphrodite.py": 73,
    "test_influx_run.py": 71,
    "test_signals.py": 70,
    "test_orphan_workers.py": 82,
    "test_distributed.py": 61,
    "test_throughput.py": 53,
    "test_hosts.py": 52,
    "test_load_models.py": 50,
    "test_docs_commands.py": 40,
    "test_netns_worker.py": 39,
    "test_failure_pacing.py": 35,
    "test_signal_sweep.py": 32,
    "test_engine_vllm_reasoning.py": 25,
    "test_finalize.py": 24,
    "test_run_cli.py": 23,
    "test_faults.py": 17,
    "test_influx_sink.py": 15,
    "test_grafana_queries.py": 15,
    "test_results_model.py": 14,
    "test_scrape.py": 12,
    "test_reasoning_run.py": 12,
    "test_selftest.py": 11,
    "test_compose_entrypoint.py": 11,
    "test_stamps.py": 10,
    "test_report_simulated.py": 10,
    "test_salt.py": 10,
    "test_sim_load_http.py": 9,
    "test_stream_timeouts.py": 8,
    "test_report_realrun.py": 8,
    "test_secrets.py": 8,
    "test_disk_full.py": 7,
    "test_collector_cli.py": 6,
    "test_report_html.py": 5,
    "test_sim_http.py": 5,
    "test_verdict_flags.py": 5,
    "test_metrics.py": 4,
    "test_trace.py": 4,
    "test_influx_catchup.py": 4,
    "test_code_shape.py": 4,
    "test_sim_cli.py": 4,
    "test_capacity_page.py": 4,
    "test_influx_preflight.py": 3,
}
DEFAULT_S = 3.0  # per test that starts processes, for a file not in WEIGHTS (in-process ones: 0)
GROUPS: list[tuple[str, ...]] = [
    # one real CPU engine per machine (vLLM, then Aphrodite), one file after another
    (
        "test_engine_vllm.py",
        "test_engine_vllm_reasoning.py",
        "test_stream_client.py",
        "test_engine_aphrodite.py",
        "test_seed_real.py",
    ),
    ("test_hosts.py", "test_netns_worker.py"),  # the namespaces' subnets
]


def assign(counts: dict[str, int], n: int) -> dict[str, int]:
    """Each file's shard (``counts``: every file, with its number of tests that start processes):
    groups and files, heaviest first, each to the lightest shard so far."""
    units: list[tuple[str, ...]] = [g for g in GROUPS if any(f in counts for f in g)]
    grouped = {f for g in units for f in g}
    units += [(f,) for f in sorted(counts) if f not in grouped]

    def weight(unit: tuple[str, ...]) -> float:
        return sum(WEIGHTS.get(f, DEFAULT_S * counts.get(f, 0)) for f in unit if f in counts)

    loads = [0.0] * n
    shard_of: dict[str, int] = {}
    for unit in sorted(units, key=lambda u: (-weight(u), u)):
        i = loads.index(min(loads))
        loads[i] += weight(unit)
        shard_of.update({f: i for f in unit})
    return shard_of


def parse(spec: str) -> tuple[int, int]:
    """``I/N`` -> (I, N), 0 <= I < N."""
    i, _, n = spec.partition("/")
    if not (i.isdigit() and n.isdigit() and 0 <= int(i) < int(n)):
        raise ValueError(f"--shard takes I/N with 0 <= I < N, not {spec!r}")
    return int(i), int(n)


def main(argv: list[str]) -> int:
    """Run N shards side by side; print each shard's output whole, in order; fail if any failed."""
    n, args = int(argv[0]), argv[1:]
    logs = Path(tempfile.mkdtemp(prefix="llmload-shards-"))
    procs = []
    for i in range(n):
        log = (logs / f"shard{i}.log").open("w")
        cmd = [sys.executable, "-m", "pytest", *args, f"--shard={i}/{n}", "-p", "no:cacheprovider"]
        procs.append((subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT), log))
    codes = []
    for i, (proc, log) in enumerate(procs):
        codes.append(proc.wait())
        log.close()
        print(f"===== shard {i + 1} of {n}: exit {codes[-1]} =====", flush=True)
        print((logs / f"shard{i}.log").read_text(), flush=True)
    # 5: nothing collected in a shard (a small selection) is not a failure
    return next((c for c in codes if c not in (0, 5)), 0)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
