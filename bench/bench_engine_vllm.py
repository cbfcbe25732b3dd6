"""llmload's figures against a real vLLM server's own counters (the CPU build, the tiny test model).

    python bench/bench_engine_vllm.py [--requests N]

For chat and completions at concurrency 1, 4 and 8 it runs llmload, reads the server's /metrics
before and after (the baseline measured in the same run), and prints each figure beside the
server's, with the difference: requests and tokens (must be equal), TTFT and E2E means (the
agreement target: within 5 % or 5 ms), output tok/s (within 3 %). The means are timings a busy
machine shifts (the server's front-end is starved before and after vLLM's own clock), which is
why they are measured here and not asserted in `make test`. Needs `make engines` first.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.engine_checks import counters, warm_up  # noqa: E402
from tests.engines import start_vllm, tiny_model  # noqa: E402 - the same server the tests use


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=32, help="requests per run")
    args = ap.parse_args()
    if not (ROOT / ".venv-vllm" / "bin" / "vllm").exists():
        print("bench_engine_vllm: vLLM's CPU build is not installed (make engines); skipped")
        return 0
    tmp = Path(tempfile.mkdtemp(prefix="llmload-bench-vllm-"))
    rows = []
    with start_vllm(tiny_model(tmp)) as server:
        warm_up(server)
        for api in ("chat", "completions"):
            for users in (1, 4, 8):
                out = tmp / f"{api}-{users}"
                scn = tmp / f"{api}-{users}.yaml"
                scn.write_text(
                    f"targets:\n  - {{name: vllm, kind: vllm, base_url: '{server.base_url}', "
                    f"model: {server.model}, api: {api}}}\n"
                    "workload: {input_tokens: {dist: uniform, min: 16, max: 48}, output_tokens: 32}\n"
                    f"load: {{users: {users}, max_requests: {args.requests}}}\n"
                    "client: {scrape_interval: 600s, loop_lag_threshold_ms: 5000, cpu_threshold_percent: 100}\n"
                )
                before = counters(server, "vllm")
                cmd = [sys.executable, "-m", "llmload", "run", str(scn), "--results", str(out)]
                subprocess.run(
                    cmd + ["--llm-quiet", "--no-reports"], cwd=ROOT, capture_output=True, check=True
                )
                after = counters(server, "vllm")
                d = {k: after[k] - before[k] for k in before}
                b = json.loads((out / "summary.json").read_text())["targets"]["vllm"]
                rows.append((api, users, b, d))
    print(
        f"{'api':<12}{'c':>3}  {'req':>9}  {'out tok':>13}  {'TTFT mean ms':>22}  {'E2E mean ms':>24}  {'tok/s':>19}"
    )
    for api, users, b, d in rows:
        ttft_s = d["vllm:time_to_first_token_seconds_sum"] / d["vllm:time_to_first_token_seconds_count"] * 1e3
        e2e_s = d["vllm:e2e_request_latency_seconds_sum"] / d["vllm:e2e_request_latency_seconds_count"] * 1e3
        ttft, e2e = b["latency_ms"]["ttft"]["mean"], b["latency_ms"]["e2e"]["mean"]
        tp = b["throughput"]
        rate_s = d["vllm:generation_tokens_total"] / tp["window_s"]
        print(
            f"{api:<12}{users:>3}  {b['requests']['sent']:>4}/{d['vllm:request_success_total']:<4.0f}"
            f"  {b['tokens']['output']:>6}/{d['vllm:generation_tokens_total']:<6.0f}"
            f"  {ttft:>7.1f}/{ttft_s:<6.1f} {ttft - ttft_s:+5.1f} ms"
            f"  {e2e:>7.1f}/{e2e_s:<7.1f} {e2e - e2e_s:+6.1f} ms"
            f"  {tp['output_tok_s']:>7.1f}/{rate_s:<7.1f} x{tp['output_tok_s'] / rate_s:.3f}"
        )
    print("(llmload / server; differences and ratio to the server's figure)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
