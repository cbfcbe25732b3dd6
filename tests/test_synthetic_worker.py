"""bench/synthetic_worker.py against a real worker: what the fleet bench sends is what a worker sends.

The same scenario on the same master, once with a real ``llmload worker`` and once with one synthetic
worker, each through a recording relay (tests/zmq_tap.py). The synthetic worker must send the same
message types, the same bytes for each message of fixed form, deltas of the same shape (every field
a real worker fills, every histogram it fills non-empty) with request lines of the same size, and
leave its master a summary.json of the same shape with every request line written. A change to what
workers send that the bench does not follow fails here, before the bench's figures go stale.
"""

from __future__ import annotations

import json
import re
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.servers import free_port, spawn_llmload

pytestmark = pytest.mark.integration  # masters, workers and relays are child processes

ROOT = Path(__file__).resolve().parent.parent
WORKER_ID = re.compile(r"[\w.-]+_[0-9a-f]{32}")  # Locust names a worker host_uuid
NUMBER = re.compile(r"[0-9.]+")  # keys that are data: Locust's buckets and seconds


def shape(x: Any, path: str, out: dict[str, set[str]], lists: bool = True) -> dict[str, set[str]]:
    """Every path in ``x`` with the types found there; keys that are data (numbers, worker ids)
    collapse to one, and an empty list has no ``[]`` path below it (``lists=False``: no list is
    looked into, for a summary whose lists hold what the run found: flags, reasons, levels)."""
    if isinstance(x, dict):
        out.setdefault(path, set()).add("dict")
        for k, v in x.items():
            key = "#" if NUMBER.fullmatch(k) else WORKER_ID.sub("<worker>", k)
            shape(v, f"{path}.{key}", out, lists)
    elif isinstance(x, list):
        out.setdefault(path, set()).add("list")
        for v in x if lists else ():
            shape(v, f"{path}[]", out, lists)
    else:
        out.setdefault(path, set()).add("number" if isinstance(x, (int, float)) else type(x).__name__)
    return out


def settled(shapes: dict[str, set[str]]) -> dict[str, set[str]]:
    """A field unset in some messages (None) and set in others is the same field."""
    return {p: (t - {"NoneType"} if len(t) > 1 else t) for p, t in shapes.items()}


def one_run(kind: str, scenario: Path, tmp: Path) -> tuple[list[dict[str, Any]], Path]:
    """One master and one worker of ``kind`` through the relay: what the worker sent, the results."""
    master_port, relay_port = free_port(), free_port()
    tape, out = tmp / f"{kind}.jsonl", tmp / f"r-{kind}"
    relay = subprocess.Popen(
        [sys.executable, str(ROOT / "tests/zmq_tap.py"), str(relay_port), str(master_port), str(tape)]
    )
    args = ["run", str(scenario), "--expect-workers", "1", "--master-bind-port", str(master_port)]
    master = spawn_llmload([*args, "--results", str(out), "--no-reports"], tmp / f"master-{kind}.log")
    if kind == "real":
        worker = spawn_llmload(["worker", "--master-port", str(relay_port)], tmp / "worker-real.log")
    else:
        cmd = [sys.executable, str(ROOT / "bench/synthetic_worker.py"), "--master-port", str(relay_port)]
        with open(tmp / "worker-synthetic.log", "wb") as log:
            worker = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
    try:
        code = master.wait(150)
        assert code == 0, (tmp / f"master-{kind}.log").read_text()[-3000:]
        worker.wait(60)  # it quits when the master says so
    finally:
        for p in (master, worker, relay):
            if p.poll() is None:
                p.kill()
                p.wait()
    sent = [m for m in map(json.loads, tape.read_text().splitlines()) if m["dir"] == "up"]
    return sent, out


def deltas(sent: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """llmload's deltas that carried request lines."""
    return [
        m["data"]["llmload"]
        for m in sent
        if m["type"] == "stats" and m["data"].get("llmload", {}).get("lines")
    ]


@pytest.mark.timeout(420)
def test_a_synthetic_worker_sends_what_a_real_worker_sends(tmp_path: Path, sim_a: Any) -> None:
    scenario = tmp_path / "fleet.yaml"
    scenario.write_text(  # bench/bench_fleet.py's scenario: one target, a plain load
        "client: {loop_lag_threshold_ms: 100000, cpu_threshold_percent: 100}\n"
        f"targets:\n  - {{name: fast, kind: openai, base_url: '{sim_a.base_url}', model: test-model-a}}\n"
        "workload: {input_tokens: 40, output_tokens: 200}\n"
        "load: {users: 2, duration: 8s, warmup: 0s, stop_grace: 10s}\n"
    )
    real, real_out = one_run("real", scenario, tmp_path)
    synth, synth_out = one_run("synthetic", scenario, tmp_path)

    kinds = {m["type"] for m in real}
    assert {m["type"] for m in synth} == kinds
    for kind in kinds - {"stats"}:  # fixed form: the same bytes, up to the digits of a count or time
        r = statistics.mean(m["bytes"] for m in real if m["type"] == kind)
        s = statistics.mean(m["bytes"] for m in synth if m["type"] == kind)
        assert abs(s - r) <= 0.05 * r, (kind, r, s)

    rd, sd = deltas(real), deltas(synth)
    assert rd and sd
    assert settled(shape(sd, "delta", {})) == settled(shape(rd, "delta", {}))
    stats_keys = {tuple(sorted(m["data"])) for m in real if m["type"] == "stats" and "llmload" in m["data"]}
    assert {tuple(sorted(m["data"])) for m in synth if m["type"] == "stats"} == stats_keys

    def line_bytes(sent: list[dict[str, Any]]) -> float:
        return statistics.mean(n for m in sent for n in m.get("line_bytes", []))

    assert line_bytes(synth) == pytest.approx(line_bytes(real), rel=0.05)

    summaries = [json.loads((out / "summary.json").read_text()) for out in (real_out, synth_out)]
    # a real worker's run may flag a figure on a busy host (run.client.flags), a synthetic one not
    assert settled(shape(summaries[1], "summary", {}, False)) == settled(
        shape(summaries[0], "summary", {}, False)
    )
    for summary, out in zip(summaries, (real_out, synth_out), strict=True):
        lines = (out / "requests.jsonl").read_text().splitlines()
        assert summary["targets"]["fast"]["requests"]["sent"] == len(lines) > 0
        assert summary["run"]["status"] == "ok", summary["run"]["reasons"]
