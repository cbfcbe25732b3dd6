"""What scraping a real vLLM server's /metrics costs it: the same load with scraping off and every 1, 5, 15 s.

    python bench/bench_scrape_cost.py [--repeats 4] [--duration 20] [--users 4]

One vLLM CPU server (the tiny test model, tests/engines.py), one time-bound closed-loop load (chat,
``--users`` streams, 16-48 prompt tokens, 64 output tokens, ``ignore_eos``), run once per setting in
each round, the order rotated every round, so a server that warms or a neighbour that wakes up lands
on every setting alike (after one unrecorded run: a fresh server's first is its slowest). Prints per
setting the median output tok/s and TPOT p50 of its runs (their range), the median of the per-round
ratios to the round's run with scraping off, and what the scrapes themselves measured
(llmload/measure/scrape_cost.py: count per run, wall time p50, the busy share it bounds). Then the
wall time and size of one scrape of the idle server's page asked for plain and for gzip
(llmload/hosts/scrape.py asks for it plain).

The measured default (llmload/config/scenario.py ``scrape_interval``) follows from this table:
scraping is on by default only at an interval whose cost is below 1 % (docs/telemetry.md).
Needs `make engines` first. Timing on a shared machine: run it with no other engine running.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.engine_checks import warm_up  # noqa: E402
from tests.engines import EngineServer, start_vllm, tiny_model, vllm_python  # noqa: E402

SETTINGS = ("off", "1s", "5s", "15s")


def one_run(
    tmp: Path, server: EngineServer, setting: str, i: int, args: argparse.Namespace
) -> dict[str, float]:
    metrics = "metrics_url: ''" if setting == "off" else f"metrics_url: '{server.metrics_url}'"
    interval = "600s" if setting == "off" else setting
    scn = tmp / f"{setting}-{i}.yaml"
    scn.write_text(
        f"targets:\n  - {{name: vllm, kind: vllm, base_url: '{server.base_url}', model: {server.model}, {metrics}}}\n"
        "workload: {seed: 7, input_tokens: {dist: uniform, min: 16, max: 48}, output_tokens: 64, ignore_eos: true}\n"
        f"load: {{users: {args.users}, duration: {args.duration}s, warmup: 2s, stop_grace: 60s}}\n"
        f"client: {{scrape_interval: {interval}, loop_lag_threshold_ms: 5000, cpu_threshold_percent: 100}}\n"
    )
    out = tmp / f"{setting}-{i}"
    cmd = [
        sys.executable,
        "-m",
        "llmload",
        "run",
        str(scn),
        "--results",
        str(out),
        "--llm-quiet",
        "--no-reports",
    ]
    subprocess.run(cmd, cwd=ROOT, capture_output=True, check=False)
    b = json.loads((out / "summary.json").read_text())["targets"]["vllm"]
    scrape = b.get("scrape") or {}
    return {
        "tok_s": b["throughput"]["output_tok_s"],
        "tpot": b["latency_ms"]["tpot"]["p50"],
        "scrapes": scrape.get("count", 0),
        "wall_ms": (scrape.get("duration_ms") or {}).get("p50") or 0.0,
        "busy_pct": scrape.get("busy_pct") or 0.0,
    }


def page_wall_ms(url: str, encoding: str, n: int = 15) -> tuple[float, int]:
    """Median wall time of ``n`` scrapes of an idle server's page, and its size on the wire."""
    took, size = [], 0
    for _ in range(n):
        req = urllib.request.Request(url, headers={"Accept-Encoding": encoding})
        t0 = time.perf_counter()
        with urllib.request.urlopen(req, timeout=30) as r:
            size = len(r.read())
        took.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(took), size


def _paired(runs: dict[str, list[dict[str, float]]], setting: str, key: str) -> float:
    """The median of the per-round ratios: runs of one round are minutes apart, a neighbour's load
    changes less between them than across the whole bench."""
    return statistics.median(x[key] / off[key] for x, off in zip(runs[setting], runs["off"], strict=True))


def _other_engines(server: EngineServer) -> list[str]:
    """Engine servers on this machine other than the bench's own (a neighbour's load skews the runs)."""
    out = subprocess.run(["pgrep", "-f", "vllm serve|aphrodite run"], capture_output=True, text=True).stdout
    return [pid for pid in out.split() if _group(int(pid)) not in (server.proc.pid, None)]


def _group(pid: int) -> int | None:
    try:
        return os.getpgid(pid)  # the bench's server runs in a group of its own (tests/engines.py)
    except ProcessLookupError:
        return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--repeats", type=int, default=4, help="rounds (each runs every setting once, each first once)"
    )
    ap.add_argument("--duration", type=int, default=20, help="seconds of load per run, after 2 s of warm-up")
    ap.add_argument("--users", type=int, default=4)
    args = ap.parse_args()
    if vllm_python() is None:
        print("bench_scrape_cost: vLLM's CPU build is not installed (make engines); skipped")
        return 0
    tmp = Path(tempfile.mkdtemp(prefix="llmload-bench-scrape-"))
    runs: dict[str, list[dict[str, float]]] = {s: [] for s in SETTINGS}
    loaded = 0  # runs with another engine's process on this shared machine at their start or end
    with start_vllm(tiny_model(tmp)) as server:
        warm_up(server)
        plain = page_wall_ms(server.metrics_url, "identity")
        gz = page_wall_ms(server.metrics_url, "gzip")
        one_run(tmp, server, "off", -1, args)  # unrecorded: the first run after start is the slowest
        for r in range(args.repeats):
            order = SETTINGS[r % len(SETTINGS) :] + SETTINGS[: r % len(SETTINGS)]
            for s in order:
                before = _other_engines(server)
                runs[s].append(one_run(tmp, server, s, r, args))
                loaded += bool(before or _other_engines(server))
                print(f"  round {r + 1} {s:>4}: {runs[s][-1]['tok_s']:.1f} tok/s", flush=True)
    if loaded:
        print(
            f"({loaded} of {args.repeats * len(SETTINGS)} runs began or ended with another engine on this machine)"
        )
    print(f"{args.repeats} rounds x {len(SETTINGS)} settings, {args.users} users, {args.duration} s each")
    print(
        f"{'scrape':<7}{'tok/s median (range)':>26}{'ratio':>8}{'TPOT p50 ms (range)':>24}{'ratio':>8}"
        f"{'scrapes/run':>13}{'wall p50 ms':>13}{'busy %':>9}"
    )
    for s in SETTINGS:
        tok = [x["tok_s"] for x in runs[s]]
        tpot = [x["tpot"] for x in runs[s]]
        mt, mp = statistics.median(tok), statistics.median(tpot)
        print(
            f"{s:<7}{mt:>10.1f} ({min(tok):.1f}-{max(tok):.1f}){_paired(runs, s, 'tok_s'):>8.3f}"
            f"{mp:>10.2f} ({min(tpot):.2f}-{max(tpot):.2f}){_paired(runs, s, 'tpot'):>8.3f}"
            f"{statistics.median(x['scrapes'] for x in runs[s]):>13.0f}"
            f"{statistics.median(x['wall_ms'] for x in runs[s]):>13.1f}"
            f"{statistics.median(x['busy_pct'] for x in runs[s]):>9.3f}"
        )
    print(
        f"one scrape of the idle server's page: plain {plain[0]:.1f} ms ({plain[1]:,} bytes), "
        f"gzip {gz[0]:.1f} ms ({gz[1]:,} bytes)"
    )
    print(
        "(ratio: the median over rounds of the setting's run over the same round's run with scraping off; "
        "tok/s below 1 and TPOT above 1 are the cost)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
