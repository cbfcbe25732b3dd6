"""TTFT error per request through a real `llmload run`, joined to the server's own log by request id.

The scripted server (tests/sse_server.py, pinned to the other core) logs, for each X-Request-Id,
when it read the request and when it wrote the first token. Each line of requests.jsonl is joined to
its entry (``<run_id>-<target>-<index>``), and two errors are printed per request:

- first-token error: when the run says the first token came (``start_time + ttft_ms``, wall clock)
  minus when the server wrote it (wall clock): the client's stamping error alone;
- TTFT error: the run's TTFT minus the server's (read to first write): the above plus the request's
  way to the server and the time the server's own loop took to read it (a loaded asyncio server
  reads late), so it is an upper bound on what the client adds.

Closed loop, streams of 50 tokens/s, at several stream counts, with kernel receive stamps and with
user-space stamps (``client.timestamps``), quiet and with both cores kept busy.

    python bench/bench_run_ids.py [--levels 50,150,250] [--seconds 6] [--no-busy]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(p / 100 * len(xs)))], 3) if xs else float("nan")


def one_run(url: str, streams: int, seconds: float, stamps: str, tmp: Path, tag: str) -> dict:
    scenario = tmp / f"{tag}.yaml"
    timed = "{llmload_test: {mode: timed, n: 50, first_ms: 20, interval_ms: 20}}"
    scenario.write_text(
        f"name: {tag}\n"
        f"targets: [{{name: b, kind: openai, base_url: '{url}', model: test-model, extra_body: {timed}}}]\n"
        f"load: {{users: {streams}, spawn_rate: {streams}, duration: {seconds}s}}\n"
        f"client: {{timestamps: {stamps}, loop_lag_threshold_ms: 100000, cpu_threshold_percent: 100}}\n"
    )
    out = tmp / tag
    subprocess.run(
        [
            sys.executable,
            "-m",
            "llmload",
            "run",
            str(scenario),
            "--results",
            str(out),
            "--no-reports",
            "--quiet",
        ],
        cwd=ROOT,
        check=False,
        capture_output=True,
        timeout=seconds + 180,
    )
    summary = json.loads((out / "summary.json").read_text())
    run_id = summary["run"]["run_id"]
    with urllib.request.urlopen(url + "/llmload_test/requests", timeout=10) as r:
        log = json.loads(r.read())
    errs, first = [], []
    for raw in (out / "requests.jsonl").read_text().splitlines():
        line = json.loads(raw)
        entry = log.get(f"{run_id}-{line['target']}-{line['index']}")
        if line["status"] == "ok" and entry and "first_sent" in entry and line["ttft_ms"] is not None:
            errs.append(line["ttft_ms"] - (entry["first_sent"] - entry["arrived"]) * 1000.0)
            first.append((line["start_time"] + line["ttft_ms"] / 1000.0 - entry["first_sent_wall"]) * 1000.0)
    client = summary["run"]["client"]
    ts = client["timestamps"]["b"]
    delay = ts["client_delay_ms"]
    return {
        "stamps": client["timestamps"]["b"]["source"],
        "streams": streams,
        "joined": len(errs),
        "lines": summary["targets"]["b"]["requests"]["sent"],
        "output_tok_s": summary["targets"]["b"]["throughput"]["output_tok_s"],
        "first_token_err_p50_ms": pct(first, 50),
        "first_token_err_p99_ms": pct(first, 99),
        "ttft_err_p50_ms": pct(errs, 50),
        "ttft_err_p99_ms": pct(errs, 99),
        "ttft_err_max_ms": round(max(errs), 3) if errs else None,
        "loop_lag_p99_ms": client["loop_lag_ms"]["p99"],
        "client_delay_p99_ms": delay["p99"],
        "first_tokens": ts["first_tokens"],
        "user_first_tokens": ts["user_first_tokens"],
        "coalesced_first_tokens": ts["coalesced_first_tokens"],
        "flags": [f["metric"] for f in client.get("flags", [])],
        "status": summary["run"]["status"],
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--levels", default="50,150,250")
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--no-busy", action="store_true")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp())
    port_file = tmp / "port"
    cores = sorted(os.sched_getaffinity(0))
    server = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "sse_server.py"), "--port-file", str(port_file)]
    )
    rows = []
    try:
        while not port_file.exists():
            time.sleep(0.02)
        url = f"http://127.0.0.1:{port_file.read_text()}"
        if len(cores) >= 2:
            os.sched_setaffinity(server.pid, {cores[-1]})
        print(
            "per request, joined by X-Request-Id: first-token and TTFT error (run - server), streams of 50 tok/s"
        )
        for busy in (False,) if a.no_busy else (False, True):
            hogs = (
                [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in cores] if busy else []
            )
            try:
                for n in [int(x) for x in a.levels.split(",")]:
                    pair = []
                    for stamps in ("kernel", "user"):
                        res = one_run(url, n, a.seconds, stamps, tmp, f"ids-{stamps}-{n}-{int(busy)}")
                        print(json.dumps({"both_cores_busy": busy, **res}), flush=True)
                        pair.append(res)
                    rows.append((f"{n} streams" + (" + busy" if busy else ""), *pair))
            finally:
                for h in hogs:
                    h.kill()
                    h.wait()
    finally:
        server.terminate()
        server.wait()
    print(f"\n{'':>20}  {'first-token error ms':^39}  {'TTFT error ms (upper bound)':^39}")
    head = ("p50 kern", "p50 user", "p99 kern", "p99 user")
    print(f"{'load':>20}  " + "  ".join(f"{h:>8}" for h in head * 2))
    for label, k, u in rows:
        cells = [k["first_token_err_p50_ms"], u["first_token_err_p50_ms"], k["first_token_err_p99_ms"]]
        cells += [u["first_token_err_p99_ms"], k["ttft_err_p50_ms"], u["ttft_err_p50_ms"]]
        cells += [k["ttft_err_p99_ms"], u["ttft_err_p99_ms"]]
        print(f"{label:>20}  " + "  ".join(f"{c:>8}" for c in cells))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
