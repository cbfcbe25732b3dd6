"""A closed-loop user pauses after a failure (Retry-After, else a doubling pause), and says so.

Without it, one user sent 14,339 requests in 5 s to a server answering 429. The counts asserted
here are upper bounds that only the pauses can keep: a busy machine sends fewer, never more.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.conftest import ROOT, TOLERANT_CLIENT


def run(
    tmp: Path, sse_server: str, spec: str, client: str = ""
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    scn = tmp / "s.yaml"
    scn.write_text(
        f"{TOLERANT_CLIENT.removesuffix('}')}{client}}}\n"
        f"targets:\n  - {{name: busy, kind: openai, base_url: '{sse_server}', model: test-model,"
        f" extra_body: {{llmload_test: {spec}}}}}\n"
        "load: {users: 2, duration: 3s, warmup: 0s, stop_grace: 5s}\n"
    )
    out = tmp / "r"
    r = subprocess.run(
        [sys.executable, "-m", "llmload", "run", str(scn), "--results", str(out), "--no-reports"],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=ROOT,
    )
    assert r.returncode == 3, r.stdout[-2000:] + r.stderr[-2000:]  # nothing succeeded: invalid
    summary = json.loads((out / "summary.json").read_text())
    lines = [json.loads(x) for x in (out / "requests.jsonl").read_text().splitlines()]
    return summary["targets"]["busy"]["requests"], lines


def test_retry_after_is_honoured_after_a_429(tmp_path: Path, sse_server: str) -> None:
    req, lines = run(tmp_path, sse_server, "{mode: raw, status: 429, retry_after: 1}")
    assert lines and all(x["status"] == "http_429" and x["retry_after_s"] == 1.0 for x in lines)
    # 2 users x (3 s / 1 s + the first request each): at most 8, however fast the machine.
    assert len(lines) == req["sent"] <= 8
    assert req["backoffs"] >= 1 and req["backoff_s"] == req["backoffs"] * 1.0


def test_without_retry_after_the_pause_doubles_up_to_its_cap(tmp_path: Path, sse_server: str) -> None:
    req, lines = run(
        tmp_path, sse_server, "{mode: raw, status: 503}", ", failure_pause: 0.25s, failure_pause_max: 1s"
    )
    assert lines and all(x["status"] == "http_5xx" for x in lines)
    # Pauses 0.25, 0.5, 1, 1, ... s: within 3 s at most 1 + 5 requests per user.
    assert len(lines) == req["sent"] <= 12
    assert req["backoffs"] >= 2 and req["backoff_s"] <= req["backoffs"] * 1.0


def test_no_pause_when_disabled(tmp_path: Path, sse_server: str) -> None:
    req, lines = run(tmp_path, sse_server, "{mode: raw, status: 503}", ", failure_pause: 0s")
    assert lines and req["backoffs"] == 0 and req["backoff_s"] == 0
