"""Distributed runs: a real Locust master and real worker processes on loopback, against simulators."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from llmload.base.cores import usable_cores
from llmload.locust.locust_log import REDISPATCH_WARNING
from tests.conftest import (
    counted_scenario,
    llmload_run,
    open_loop_scenario,
    start_port_file_process,
    two_sim_scenario,
)
from tests.oracles import nearest_rank
from tests.servers import distributed_run, free_port, spawn_llmload, stop_process

pytestmark = pytest.mark.integration  # every test here starts a child process

ROOT = Path(__file__).resolve().parent.parent


FREEZE_S = 6.0  # past Locust's 3 missed heartbeats, under llmload's 12 s of silence


def scenario(duration: str, users: int = 4) -> str:
    return two_sim_scenario("dist", duration=duration, users=users)


def test_master_and_two_workers_merge_exactly(tmp_path: Path) -> None:
    scn = tmp_path / "dist.yaml"
    scn.write_text(scenario("8s"))
    out = tmp_path / "r"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "llmload",
            "run",
            str(scn),
            "--workers",
            "2",
            "--results",
            str(out),
            "--no-reports",
        ],
        capture_output=True,
        text=True,
        timeout=150,
        cwd=ROOT,
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    lines = [json.loads(x) for x in (out / "requests.jsonl").read_text().splitlines()]
    assert summary["run"]["mode"] == "distributed"
    workers = {x["worker"] for x in lines}
    assert len(workers) == 2, workers  # both workers sent requests
    for name, t in summary["targets"].items():
        mine = [x for x in lines if x["target"] == name]
        assert t["requests"]["sent"] == len(mine) > 0
        ok = [x for x in mine if x["status"] == "ok" and x["level"] != "warmup"]
        assert t["latency_ms"]["ttft"]["count"] == len(ok)
        for p in (50, 99):
            want = nearest_rank([x["ttft_ms"] for x in ok], p)
            assert abs(t["latency_ms"]["ttft"][f"p{p}"] - want) <= 0.002
            want_e2e = nearest_rank([x["e2e_ms"] for x in ok], p)
            assert abs(t["latency_ms"]["e2e"][f"p{p}"] - want_e2e) <= 0.002
        assert t["tokens"]["output"] == sum(x["output_tokens"] for x in ok)
        # indexes are disjoint between workers and dense: a deterministic split of one sequence
        idx = sorted(x["index"] for x in mine)
        assert len(set(idx)) == len(idx)
        # both workers' read stamps merged: every kernel-stamped read has its client delay
        ts = summary["run"]["client"]["timestamps"][name]
        assert ts["source"] == "kernel" and ts["kernel_reads"] > 0
        assert ts["client_delay_ms"]["count"] == ts["kernel_reads"]


def test_workers_auto_starts_one_worker_per_core_less_one(tmp_path: Path) -> None:
    scn = tmp_path / "auto.yaml"
    scn.write_text(scenario("3s", users=2))
    out = tmp_path / "r"
    two = set(sorted(os.sched_getaffinity(0))[:2])  # at most 2 cores: 1 worker, however big the host
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "llmload",
            "run",
            str(scn),
            "--workers",
            "auto",
            "--results",
            str(out),
            "--no-reports",
        ],
        capture_output=True,
        text=True,
        timeout=150,
        cwd=ROOT,
        preexec_fn=lambda: os.sched_setaffinity(0, two),
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    cores = min(len(two), usable_cores())
    if cores > 1:
        assert summary["run"]["mode"] == "distributed"
        assert len(summary["run"]["workers"]) == cores - 1
    else:
        assert summary["run"]["mode"] == "local"


@pytest.mark.timeout(150)
def test_an_open_loop_plan_is_sent_once_across_the_workers(tmp_path: Path, sse_server: str) -> None:
    """The server sees each request of the plan once, and each is a line. The master itself once sent
    the whole open-loop plan again: every request twice at the server, the master's copies nowhere."""
    scn = open_loop_scenario(tmp_path / "open.yaml", sse_server, 20, 2)
    out = tmp_path / "r"
    r, _ = llmload_run(scn, out, "--workers", "2", timeout=120)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    run_id = json.loads((out / "summary.json").read_text())["run"]["run_id"]
    lines = [json.loads(x) for x in (out / "requests.jsonl").read_text().splitlines()]
    assert len({x["worker"] for x in lines}) == 2 and len(lines) == 40
    served = httpx.get(f"{sse_server}/llmload_test/requests", timeout=10).json()
    mine = {k: v["n"] for k, v in served.items() if k.startswith(f"{run_id}-")}
    assert sorted(mine) == sorted(f"{run_id}-t-{x['index']}" for x in lines)
    assert set(mine.values()) == {1}, sorted(mine.values())[-3:]


def _spawn(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    return spawn_llmload(args, log, {**os.environ, "LLMLOAD_MASTER_TIMEOUT": "8"})


@pytest.mark.timeout(180)
def test_killed_worker_marks_the_run_degraded_and_exits_3(tmp_path: Path) -> None:
    scn = tmp_path / "dist.yaml"
    scn.write_text(scenario("14s"))
    out = tmp_path / "r"
    with distributed_run(scn, out, tmp_path, [{}, {}], {"LLMLOAD_MASTER_TIMEOUT": "8"}) as (master, workers):
        deadline = time.monotonic() + 60
        while not (out / "requests.jsonl").exists() or not (out / "requests.jsonl").read_text().strip():
            assert time.monotonic() < deadline, (tmp_path / "master.log").read_text()[-3000:]
            assert master.poll() is None, (tmp_path / "master.log").read_text()[-3000:]
            time.sleep(0.5)
        time.sleep(2)
        os.kill(workers[0].pid, signal.SIGKILL)
        t_kill = time.time()
        code = master.wait(120)
    log = (tmp_path / "master.log").read_text()
    assert code == 3, log[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    run = summary["run"]
    assert run["status"] == "degraded"
    lost = run["lost_workers"]
    assert len(lost) == 1
    # counted out after the kill, on its silence (no timing: a busy host may notice later, never earlier)
    assert lost[0]["last_report"] <= lost[0]["t"] and t_kill <= lost[0]["t"]
    assert "stopped reporting" in lost[0]["reason"]
    assert any("lost" in r for r in run["reasons"])
    events = (out / "events.jsonl").read_text()
    assert "worker_lost" in events
    # the surviving worker's requests are all accounted for
    lines = [json.loads(x) for x in (out / "requests.jsonl").read_text().splitlines()]
    for name, t in summary["targets"].items():
        assert t["requests"]["sent"] == sum(1 for x in lines if x["target"] == name)


def _wait_for(
    what: Callable[[], bool], proc: subprocess.Popen[bytes], log: Path, timeout_s: float = 60.0
) -> None:
    deadline = time.monotonic() + timeout_s
    while not what():
        assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
        time.sleep(0.2)


@pytest.mark.timeout(150)
@pytest.mark.parametrize(("sig", "said"), [(signal.SIGTERM, "quit"), (signal.SIGSTOP, "was lost")])
def test_the_last_worker_leaving_before_the_start_ends_the_run_in_one_line(
    tmp_path: Path, sig: signal.Signals, said: str
) -> None:
    """Locust quits a headless master when its last worker quits, or misses its heartbeats (frozen
    here; starved on a busy host; llmload counts it lost after 12 s of silence first). Before the
    start (the worker still checking the targets) that exited 0 with no line at all (tests/test_hosts.py
    saw it twice, at Locust's 3 s)."""
    server, port = start_port_file_process(
        [sys.executable, str(ROOT / "tests" / "sse_server.py")], tmp_path, "sse"
    )
    scn = tmp_path / "gone.yaml"
    scn.write_text(
        "client: {ready_timeout: 60s}\n"
        f"targets: [{{name: t, kind: openai, base_url: 'http://127.0.0.1:{port}', model: test-model}}]\n"
        "load: {users: 2, duration: 10s, warmup: 0s}\n"
    )
    out, log = tmp_path / "r", tmp_path / "master.log"
    with distributed_run(scn, out, tmp_path, [{}]) as (master, workers):
        try:
            _wait_for((out / "run.json").exists, master, log)  # the master reached the target itself
        finally:
            stop_process(server)  # now its worker cannot
        _wait_for(lambda: "waiting for target t" in log.read_text(), master, log)
        workers[0].send_signal(sig)
        code = master.wait(60)
    text = log.read_text()
    assert code == 2, text[-3000:]
    lines = [x for x in text.splitlines() if "nothing was sent" in x]
    assert len(lines) == 1 and f"every worker {said} before the start" in lines[0], text[-3000:]
    assert "Traceback" not in text and not out.exists()
    # Locust's re-dispatch to no worker said "You can't start a distributed test ..." before it
    assert REDISPATCH_WARNING not in text, text[-3000:]


@pytest.mark.timeout(180)
def test_the_only_worker_frozen_mid_run_goes_on_and_is_not_lost(tmp_path: Path, sse_server: str) -> None:
    """The only worker frozen 6 s mid-run (SIGSTOP, as a starved host does): Locust's master counted it
    missing after 3 s and stopped the test, and llmload then counted it lost though it came back
    (degraded, exit 3, 10 requests unaccounted; 2026-12-07). Its silence is under llmload's own
    limit (12 s): the plan goes on to its end with it, and every request the server got is a line."""
    key = uuid.uuid4().hex
    spec = {"mode": "timed", "n": 4, "first_ms": 5, "interval_ms": 50}
    load = "{users: 2, duration: 16s, warmup: 0s}"
    scn = counted_scenario(tmp_path / "s.yaml", sse_server, key, spec, load)
    out, log = tmp_path / "r", tmp_path / "master.log"

    def received() -> int:
        return int(httpx.get(f"{sse_server}/llmload_test/stats?key={key}", timeout=5).json()["received"])

    with distributed_run(scn, out, tmp_path, [{}]) as (master, workers):
        _wait_for(lambda: received() > 0, master, log)
        workers[0].send_signal(signal.SIGSTOP)
        time.sleep(FREEZE_S)
        workers[0].send_signal(signal.SIGCONT)
        back = time.time()
        code = master.wait(120)
    text = log.read_text()
    run = json.loads((out / "summary.json").read_text())["run"]
    assert not run["lost_workers"] and run["status"] != "degraded", text[-3000:]
    assert code == run["exit_code"] == 0, text[-3000:]
    lines = [json.loads(x) for x in (out / "requests.jsonl").read_text().splitlines()]
    assert len(lines) == received()
    assert any(x["start_time"] > back for x in lines)  # it went on sending after its pause


@pytest.mark.timeout(240)
def test_a_worker_loading_a_large_dataset_keeps_its_master_and_its_run(
    tmp_path: Path, sse_server: str
) -> None:
    """A worker builds its run from the master's scenario inside Locust's message loop. A 270 MB
    ShareGPT file held it 9.6 s: Locust's master counted it missing after 3 s and ended the run before
    its start. Read paced, the worker's own watch then took its live master for gone, no heartbeat
    being read meanwhile (2026-12-07). Here 600,000 small conversations (seconds to load, here and on
    a faster host) and the least idle limit (LLMLOAD_MASTER_TIMEOUT 3 s): the run goes through."""
    key = uuid.uuid4().hex
    conv = {"conversations": [{"from": "human", "value": "q"}, {"from": "gpt", "value": "a b"}]}
    (tmp_path / "many.json").write_text(json.dumps([conv] * 600_000))
    spec = {"mode": "timed", "n": 2, "first_ms": 5, "interval_ms": 20}
    scn = counted_scenario(tmp_path / "s.yaml", sse_server, key, spec, "{users: 2, duration: 3s, warmup: 0s}")
    scn.write_text(scn.read_text() + "workload: {kind: sharegpt, path: many.json}\n")
    out, log = tmp_path / "r", tmp_path / "master.log"
    with distributed_run(scn, out, tmp_path, [{}], {"LLMLOAD_MASTER_TIMEOUT": "3"}) as (master, workers):
        code = master.wait(180)
        worker_code = workers[0].wait(30)
    text, wlog = log.read_text(), (tmp_path / "w0.log").read_text()
    assert code == 0 and worker_code == 0, text[-2000:] + wlog[-2000:]
    assert "is gone" not in wlog and "lost" not in text, text[-2000:] + wlog[-2000:]
    lines = (out / "requests.jsonl").read_text().splitlines()
    assert (
        0
        < len(lines)
        == int(httpx.get(f"{sse_server}/llmload_test/stats?key={key}", timeout=5).json()["received"])
    )


@pytest.mark.timeout(120)
def test_workers_stop_when_the_master_disappears(tmp_path: Path) -> None:
    scn = tmp_path / "dist.yaml"
    scn.write_text(scenario("60s", users=2))
    out = tmp_path / "r"
    port = free_port()
    master = _spawn(
        [
            "run",
            str(scn),
            "--expect-workers",
            "1",
            "--master-bind-port",
            str(port),
            "--results",
            str(out),
            "--no-reports",
        ],
        tmp_path / "master.log",
    )
    worker = _spawn(["worker", "--master-port", str(port)], tmp_path / "w.log")
    try:
        deadline = time.monotonic() + 60
        while not (out / "requests.jsonl").exists() or not (out / "requests.jsonl").read_text().strip():
            assert time.monotonic() < deadline, (tmp_path / "master.log").read_text()[-3000:]
            time.sleep(0.5)
        # its simulators get SIGTERM through PR_SET_PDEATHSIG
        os.kill(master.pid, signal.SIGKILL)
        worker.wait(40)  # it stops by itself (LLMLOAD_MASTER_TIMEOUT); a worker still loading would time out
    finally:
        for p in (master, worker):
            if p.poll() is None:
                p.kill()
                p.wait()
