"""A worker on another host whose link is cut mid-run: detected, the run says so, nothing is counted twice.

Two hosts on this machine: a network namespace the test creates, joined to this one by a veth pair
(iproute2, as root). The master, the simulated engine and one worker stay here; the other worker
runs inside the namespace and reaches both over the veth link. `ip link set ... down` cuts that
host off mid-run; bringing it back up later must not add what was already counted or lost. The
cut-off worker hears no heartbeat from its master: it stops, spools its records and exits 5.
Without root or iproute2 the test skips (fails when CI=true).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from llmload.base.exitcodes import EXIT_MASTER_LOST
from llmload.locust.fleet import WORKER_LOST_AFTER_S
from tests.conftest import ROOT, start_port_file_process, stop_process
from tests.netns import Hosts, make_hosts
from tests.servers import free_port

pytestmark = [
    pytest.mark.integration,
    pytest.mark.timeout(240),
]  # integration: every test here starts a child process


@pytest.fixture
def hosts() -> Iterator[Hosts]:
    yield from make_hosts(a_is_here=True)


def worker(hosts: Hosts, port: int, log: Path, in_ns: bool) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "llmload", "worker", "--master-host", hosts.here, "--master-port", str(port)]
    if in_ns:
        cmd = hosts.on("b", cmd)
    with open(log, "wb") as out:
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=ROOT)


def test_a_worker_host_cut_off_mid_run_is_detected_and_nothing_is_counted_twice(
    hosts: Hosts, tmp_path: Path
) -> None:
    sim, sim_port = start_port_file_process(
        [
            sys.executable,
            "-m",
            "llmload.sim",
            "--host",
            hosts.here,
            "--port",
            "0",
            "--profile",
            "test-fast-a",
        ],
        tmp_path,
        "sim",
    )
    port = free_port()
    scn = tmp_path / "s.yaml"
    # 50 s: the cut comes once both workers reported, its detection may take 24 s, and the worker
    # that stayed must still send after it, on a busy host too
    scn.write_text(
        "client: {loop_lag_threshold_ms: 5000, cpu_threshold_percent: 100}\n"
        f"targets:\n  - {{name: fast, kind: openai, base_url: 'http://{hosts.here}:{sim_port}', model: test-model-a}}\n"
        "workload: {input_tokens: 40, output_tokens: 32}\n"
        "load: {users: 4, duration: 50s, warmup: 0s, stop_grace: 10s}\n"
    )
    out = tmp_path / "r"
    master_cmd = [sys.executable, "-m", "llmload", "run", str(scn), "--results", str(out), "--quiet"]
    master_cmd += ["--expect-workers", "2", "--master-bind-host", hosts.here, "--master-bind-port", str(port)]
    with open(tmp_path / "master.log", "wb") as mlog:
        master = subprocess.Popen(master_cmd, stdout=mlog, stderr=subprocess.STDOUT, cwd=ROOT)
    here = worker(hosts, port, tmp_path / "w-here.log", in_ns=False)
    there = worker(hosts, port, tmp_path / "w-there.log", in_ns=True)
    try:
        # Both workers have reported requests: every request line names its worker.
        deadline = time.monotonic() + 90
        req = out / "requests.jsonl"
        while (
            len({json.loads(x)["worker"] for x in (req.read_text().splitlines() if req.exists() else [])}) < 2
        ):
            assert master.poll() is None, (tmp_path / "master.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "both workers did not report within 90 s"
            time.sleep(0.5)
        t_cut = time.time()
        hosts.cut()
        lost_seen = time.monotonic() + 60
        while "stopped reporting" not in (
            (out / "events.jsonl").read_text() if (out / "events.jsonl").exists() else ""
        ):
            assert master.poll() is None and time.monotonic() < lost_seen, "the cut worker was not detected"
            time.sleep(0.5)
        hosts.restore()  # the host comes back while the run goes on
        orphan_rc = there.wait(30)  # it gave its master up within seconds of the cut (orphan.py)
        rc = master.wait(120)
    finally:
        for p in (master, here, there, sim):
            stop_process(p)
    log = (tmp_path / "master.log").read_text()
    assert rc == 3, log[-3000:]
    there_log = (tmp_path / "w-there.log").read_text()
    assert orphan_rc == EXIT_MASTER_LOST and "is gone: no heartbeat" in there_log, there_log[
        -2000:
    ]  # a lost worker makes the run invalid without --allow-worker-loss
    summary = json.loads((out / "summary.json").read_text())
    run = summary["run"]
    here_log = (tmp_path / "w-here.log").read_text()
    # only the cut worker: the one that stayed up is never counted out (its log says why if it was)
    assert run["status"] == "degraded" and len(run["lost_workers"]) == 1, (
        json.dumps(run["lost_workers"]) + "\n" + log[-3000:] + "\n" + here_log[-3000:]
    )
    lost = run["lost_workers"][0]
    print(f"detected after {lost['t'] - t_cut:.1f} s")  # for the bench notes (-s)
    assert lost["t"] - t_cut < WORKER_LOST_AFTER_S + 12  # noticed after its silence (+ ticks), not at the end
    lines = [json.loads(x) for x in (out / "requests.jsonl").read_text().splitlines()]
    keys = [(x["worker"], x["target"], x["index"]) for x in lines]
    assert len(keys) == len(set(keys))  # the restored worker's reports added nothing twice
    assert summary["targets"]["fast"]["requests"]["sent"] == len(lines)
    # What the cut worker reported before the cut is kept and counted.
    assert sum(1 for x in lines if x["worker"] == lost["worker"]) > 0
    # The worker that stayed keeps its run: what it sent after the loss is recorded and reported
    # (a scenario sent to it again would have replaced the run its users issue on).
    assert any(x["worker"] != lost["worker"] and x["start_time"] > lost["t"] for x in lines)
    assert "verdict: degraded" in log
    # Its records, spooled into the results directory (the same disk here), hold what it never reported.
    spooled = [json.loads(x) for f in (out / "orphans").glob("*.jsonl") for x in f.read_text().splitlines()]
    assert spooled and {x["worker"] for x in spooled} == {lost["worker"]}
