"""Many hosts for real: the README's distributed commands on two test hosts joined by a link.

Host A and host B are network namespaces of their own (tests/netns.py), so the commands run exactly
as the README writes them, fixed default ports included; only SCENARIO, N and the master's address
are filled in. The master, the simulated engine it starts and InfluxDB live on A, the workers on B;
every request and every worker's InfluxDB point crosses the veth link. Each test also reads what the processes said while they waited.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.netns import Hosts, make_hosts
from tests.servers import INFLUXD, require_binary, stop_process

pytestmark = [
    pytest.mark.integration,
    pytest.mark.timeout(240),
]  # integration: every test here starts a child process

CLIENT = "client: {loop_lag_threshold_ms: 5000, cpu_threshold_percent: 100, ready_timeout: 30s}\n"
SIM = "targets:\n  - {name: fast, kind: sim, sim: {profile: test-fast-a}}\n"
WORKLOAD = "workload: {input_tokens: 40, output_tokens: 32}\n"


@pytest.fixture
def hosts() -> Iterator[Hosts]:
    yield from make_hosts(a_is_here=False)


def readme_commands() -> tuple[list[str], list[str]]:
    """The master and worker commands of the README's "many hosts" row, as written."""
    row = next(x for x in (ROOT / "README.md").read_text().splitlines() if x.startswith("| many hosts |"))
    cmds = [shlex.split(c) for c in re.findall(r"`([^`]+)`", row)]
    master = next(c for c in cmds if c[:2] == ["llmload", "master"] and "--headless" in c)
    worker = next(c for c in cmds if c[:2] == ["llmload", "worker"])
    return master, worker


def fill(cmd: list[str], **values: str) -> list[str]:
    out = [values.get(x, x) for x in cmd]
    assert out[0] == "llmload"
    return [sys.executable, "-m", "llmload", *out[1:]]


def spawn(hosts: Hosts, host: str, cmd: list[str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "wb") as out:
        return subprocess.Popen(
            hosts.on(host, cmd), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=ROOT
        )


def wait_log(log: Path, text: str, proc: subprocess.Popen[bytes], timeout_s: float = 90) -> None:
    deadline = time.monotonic() + timeout_s
    while text not in (log.read_text() if log.exists() else ""):
        assert proc.poll() is None, log.read_text()[-3000:]
        assert time.monotonic() < deadline, f"no {text!r} within {timeout_s:g} s:\n{log.read_text()[-3000:]}"
        time.sleep(0.2)


def finish(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        stop_process(p)


def start_run(
    hosts: Hosts, tmp: Path, load: str
) -> tuple[subprocess.Popen[bytes], list[subprocess.Popen[bytes]]]:
    """The README's commands: the master on host A, two workers on host B, started once it waits."""
    scn = tmp / "hosts.yaml"
    scn.write_text(CLIENT + SIM + WORKLOAD + load)
    master_cmd, worker_cmd = readme_commands()
    master = fill(master_cmd, SCENARIO=str(scn), N="2") + ["--results", str(tmp / "r")]
    m = spawn(hosts, "a", master, tmp / "master.log")
    wait_log(tmp / "master.log", "waiting for 2 worker(s)", m)  # says so before any worker exists
    workers = [spawn(hosts, "b", fill(worker_cmd, H=hosts.a), tmp / f"w{i}.log") for i in range(2)]
    return m, workers


INFLUX_CONF = """\
reporting-disabled = true
bind-address = "127.0.0.1:8088"
[meta]
  dir = "{root}/meta"
[data]
  dir = "{root}/data"
  wal-dir = "{root}/wal"
  query-log-enabled = false
[http]
  enabled = true
  bind-address = "0.0.0.0:8086"
  log-enabled = false
"""


def influx_on_a(hosts: Hosts, tmp: Path) -> subprocess.Popen[bytes]:
    """InfluxDB 1.x on host A, listening on every address there (its own namespace: port 8086 is free)."""
    binary = require_binary(INFLUXD)
    root = tmp / "influxd"
    root.mkdir()
    (root / "influxdb.conf").write_text(INFLUX_CONF.format(root=root))
    proc = spawn(hosts, "a", [binary, "-config", str(root / "influxdb.conf")], root / "influxd.log")
    deadline = time.monotonic() + 60
    while True:
        try:
            influxql(hosts, 'CREATE DATABASE "llmload"')
            return proc
        except AssertionError:
            assert proc.poll() is None and time.monotonic() < deadline, (root / "influxd.log").read_text()[
                -2000:
            ]
            time.sleep(0.5)


def influxql(hosts: Hosts, q: str) -> list[list[object]]:
    """Run InfluxQL on host A's InfluxDB, from host A; the rows' values."""
    code = (
        "import json,sys,urllib.parse,urllib.request;"
        "d=urllib.parse.urlencode({'q':sys.argv[1],'db':'llmload'}).encode();"
        "print(urllib.request.urlopen('http://127.0.0.1:8086/query',d,timeout=5).read().decode())"
    )
    r = subprocess.run(
        hosts.on("a", [sys.executable, "-c", code, q]), capture_output=True, text=True, timeout=30
    )
    assert r.returncode == 0, r.stderr[-500:]
    out = json.loads(r.stdout)["results"][0]
    return [v for series in out.get("series", []) for v in series["values"]]


def results(out: Path) -> tuple[dict, list[dict]]:
    summary = json.loads((out / "summary.json").read_text())
    return summary, [json.loads(x) for x in (out / "requests.jsonl").read_text().splitlines()]


def test_the_readme_commands_run_two_workers_across_a_link_and_merge_exactly(
    hosts: Hosts, tmp_path: Path
) -> None:
    influx = influx_on_a(hosts, tmp_path)  # the master and both workers write to it across the link
    sink = f"influx: {{url: 'http://{hosts.a}:8086', database: llmload}}\n"
    m, workers = start_run(hosts, tmp_path, "load: {users: 4, duration: 8s, warmup: 0s}\n" + sink)
    try:
        rc = m.wait(180)
        stored = influxql(hosts, "SELECT count(index) FROM llm_request GROUP BY worker")
    finally:
        finish([m, *workers, influx])
    log = (tmp_path / "master.log").read_text()
    assert rc == 0, log[-3000:]
    assert "Traceback" not in log
    # The master said where its simulator listens; the workers reached it across the link.
    assert re.search(r"simulator for target fast listens on 0\.0\.0\.0:\d+", log), log[-3000:]
    for i in range(2):
        wlog = (tmp_path / f"w{i}.log").read_text()
        assert f"connecting to the master at {hosts.a}:5557" in wlog, wlog
        assert "connected to the master" in wlog and "Traceback" not in wlog, wlog
    summary, lines = results(tmp_path / "r")
    assert summary["run"]["status"] == "ok" and summary["run"]["lost_workers"] == []
    assert len({x["worker"] for x in lines}) == 2  # both workers sent, from host B
    t = summary["targets"]["fast"]
    assert t["requests"]["sent"] == len(lines) > 0
    # Merged exactly: the engine's own counters (scraped on host A) agree with the merged records.
    rows = {r["figure"]: r for r in t["server_agreement"]["rows"]}
    assert rows["requests"]["server"] == rows["requests"]["client"] == len(lines), rows["requests"]
    assert rows["output tokens"]["server"] == sum(x["output_tokens"] for x in lines)
    # InfluxDB on host A holds one llm_request point per request line, written by the workers on host B.
    print(
        f"{len(lines)} requests from 2 workers; server counted {rows['requests']['server']}; influx {stored}"
    )
    assert sum(int(str(v[1])) for v in stored) == len(lines), stored
    assert len(stored) == 2  # one series per worker


def test_cutting_every_worker_off_ends_in_exit_3_with_the_workers_named(hosts: Hosts, tmp_path: Path) -> None:
    m, workers = start_run(hosts, tmp_path, "load: {users: 4, duration: 60s, warmup: 0s, stop_grace: 5s}\n")
    out = tmp_path / "r"
    try:
        req = out / "requests.jsonl"
        deadline = time.monotonic() + 90
        while (
            len({json.loads(x)["worker"] for x in (req.read_text().splitlines() if req.exists() else [])}) < 2
        ):
            assert m.poll() is None and time.monotonic() < deadline, (tmp_path / "master.log").read_text()[
                -3000:
            ]
            time.sleep(0.5)
        t_cut = time.time()
        hosts.cut()
        rc = m.wait(120)
    finally:
        finish([m, *workers])
    log = (tmp_path / "master.log").read_text()
    assert rc == 3, log[-3000:]
    summary, lines = results(out)
    run = summary["run"]
    assert run["status"] == "degraded", run
    lost = run["lost_workers"]
    assert sorted(w["worker"] for w in lost) == sorted({x["worker"] for x in lines})  # both, by name
    print("detected after", [round(w["t"] - t_cut, 1) for w in lost], "s")  # for the bench notes (-s)
    assert all(w["t"] - t_cut < 20 for w in lost)  # noticed after their silence, not at the plan's end
    assert all(str(w["worker"]) in log for w in lost)
    # What they reported before the cut is kept and counted once.
    keys = [(x["worker"], x["index"]) for x in lines]
    assert len(keys) == len(set(keys)) and summary["targets"]["fast"]["requests"]["sent"] == len(lines)
    assert summary["run"]["duration_s"] < 60  # the plan did not run on with no one to send


def test_a_worker_that_cannot_reach_a_target_is_named_and_nothing_is_sent(
    hosts: Hosts, tmp_path: Path
) -> None:
    """A base_url on host A's loopback: the master reaches it, the workers on host B cannot."""
    scn = tmp_path / "loop.yaml"
    sim_cmd = [
        sys.executable,
        "-m",
        "llmload.sim",
        "--host",
        "127.0.0.1",
        "--port",
        "8000",
        "--profile",
        "test-fast-a",
    ]
    sim = spawn(hosts, "a", sim_cmd, tmp_path / "sim.log")
    scn.write_text(
        CLIENT.replace("30s", "8s")
        + "targets:\n  - {name: far, kind: openai, base_url: 'http://127.0.0.1:8000', model: test-model-a}\n"
        + WORKLOAD
        + "load: {users: 2, duration: 10s, warmup: 0s}\n"
    )
    master_cmd, worker_cmd = readme_commands()
    m = spawn(
        hosts,
        "a",
        fill(master_cmd, SCENARIO=str(scn), N="1") + ["--results", str(tmp_path / "r")],
        tmp_path / "m.log",
    )
    w = spawn(hosts, "b", fill(worker_cmd, H=hosts.a), tmp_path / "w.log")
    try:
        rc = m.wait(120)
    finally:
        finish([m, w, sim])
    log = (tmp_path / "m.log").read_text()
    assert rc == 2, log[-3000:]
    assert "Traceback" not in log
    line = next(x for x in log.splitlines() if "nothing was sent" in x)
    assert re.search(
        r"worker \S+: target far \(http://127\.0\.0\.1:8000\) not ready .*connection refused", line
    ), line
    assert "waiting for target far" in log  # what it waited for, relayed from the worker, before it gave up
    assert not (tmp_path / "r").exists()


def test_the_web_ui_form_says_where_to_press_start_and_who_is_connected(hosts: Hosts, tmp_path: Path) -> None:
    import signal

    scn = tmp_path / "ui.yaml"
    scn.write_text(CLIENT + SIM + WORKLOAD + "load: {users: 2, duration: 5s}\n")
    master_cmd, worker_cmd = readme_commands()
    ui_cmd = [x for x in master_cmd if x != "--headless"]  # the row's other form
    m = spawn(
        hosts,
        "a",
        fill(ui_cmd, SCENARIO=str(scn), N="1") + ["--results", str(tmp_path / "r")],
        tmp_path / "m.log",
    )
    wait_log(tmp_path / "m.log", "web UI at http://127.0.0.1:8089: press Start there", m)
    w = spawn(hosts, "b", fill(worker_cmd, H=hosts.a), tmp_path / "w.log")
    try:
        wait_log(tmp_path / "m.log", "1 worker(s) connected: ", m)
        wait_log(tmp_path / "m.log", "waiting for Start in the web UI", m)
        wait_log(tmp_path / "w.log", "waiting for the master to start a test", w)
        m.send_signal(signal.SIGINT)
        rc = m.wait(60)
    finally:
        finish([m, w])
    log = (tmp_path / "m.log").read_text()
    assert rc == 130 and "Traceback" not in log, log[-3000:]
    assert not (tmp_path / "r").exists()  # no test was started: nothing to keep
