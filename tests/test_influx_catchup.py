"""The spool's catch-up and its claims: no spooled line is posted twice, whoever sends it.

Unit: the claim (an atomic rename) is won by exactly one of several racing processes, and a
claim left by a dead process is released. Integration: a sink writing to VictoriaMetrics over
the v2 API (which, unlike InfluxDB, keeps a duplicate sample instead of overwriting it, so a
point posted twice shows as two samples) through an outage, with ``llmload influx replay``
processes racing the sink's own catch-up: every point is stored exactly once.
(tests/test_influx_run.py has the whole run against InfluxDB 1.x stopped and restarted.)
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from llmload.config.influx_config import InfluxConfig
from llmload.measure.records import RequestRecord
from llmload.sinks.influx import InfluxSink
from llmload.sinks.spool import CLAIMED, Spool, claim, pending_files, release_stale
from tests.servers import free_port, stop_process, vm_process

REPO = Path(__file__).resolve().parents[1]

CLAIMER = r"""
import sys
from pathlib import Path
from llmload.sinks.spool import claim, pending_files
got = [p.name for p in pending_files(Path(sys.argv[1])) if claim(p) is not None]
print(" ".join(got))
"""


@pytest.mark.integration
def test_racing_claimers_take_each_file_once(tmp_path: Path) -> None:
    spool = Spool(tmp_path, prefix="run-local")
    names = {spool.add([f"m f={i}.0 {i}"]).name for i in range(300)}  # type: ignore[union-attr]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CLAIMER, str(tmp_path)], stdout=subprocess.PIPE, text=True, env=env
        )
        for _ in range(4)
    ]
    taken = [p.communicate(timeout=60)[0].split() for p in procs]
    assert all(p.returncode == 0 for p in procs)
    flat = [n for t in taken for n in t]
    assert sorted(flat) == sorted(names)  # every file claimed, none by two processes
    assert not pending_files(tmp_path)
    # The claimers have exited: their claims are stale, and a replay releases them.
    assert release_stale(tmp_path) == 300
    assert {p.name for p in pending_files(tmp_path)} == names


def test_sink_skips_what_a_replay_claimed_and_counts_it(tmp_path: Path) -> None:
    spool = Spool(tmp_path, prefix="run-local")
    first = spool.add(["m f=1.0 1", "m f=2.0 2"])
    spool.add(["m f=3.0 3"])
    assert first is not None and claim(first) is not None  # another sender holds the oldest file
    c = spool.claim_next()
    assert c is not None and c.points == 1 and c.claimed.name.endswith(f"{CLAIMED}{os.getpid()}")
    spool.sent(c)
    assert spool.resent == 1 and spool.waiting == 0
    assert spool.remaining() == 2  # the other sender's file is still in the spool (claimed)
    assert release_stale(tmp_path) == 0  # its claimer (this process) is alive


def _start_vm(port: int, root: Path) -> subprocess.Popen[bytes]:
    proc = vm_process(port, root)
    deadline = time.monotonic() + 30
    while not _get(f"http://127.0.0.1:{port}/health"):
        assert proc.poll() is None and time.monotonic() < deadline, "victoria-metrics did not start"
        time.sleep(0.1)
    return proc


def _get(url: str) -> bytes | None:
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return bytes(resp.read())
    except OSError:
        return None


def _samples(port: int) -> int:
    import json
    import urllib.parse

    _get(f"http://127.0.0.1:{port}/internal/force_flush")
    q = urllib.parse.urlencode({"match[]": '{__name__="llm_request_index"}'})
    body = _get(f"http://127.0.0.1:{port}/api/v1/export?{q}") or b""
    return sum(len(json.loads(line)["values"]) for line in body.decode().splitlines() if line.strip())


@pytest.mark.integration
@pytest.mark.timeout(240)
def test_v2_outage_catch_up_and_racing_replays_store_each_point_once(tmp_path: Path) -> None:
    port, root = free_port(), tmp_path / "vm"
    root.mkdir()
    vm = _start_vm(port, root)
    url = f"http://127.0.0.1:{port}"
    spool_dir = tmp_path / "r" / "influx-spool"
    cfg = InfluxConfig(
        url=url, org="o", bucket="b", batch_size=20, flush_interval_s=0.05, max_retries=0, timeout_s=2.0
    )
    sink = InfluxSink(cfg, run_id="catchup", spool_dir=spool_dir)
    sink.start()
    tags = {"target": "t", "kind": "vllm", "model": "m"}
    t0 = time.time() - 600
    replays: list[subprocess.Popen[str]] = []
    n = 3000
    try:
        for i in range(n):
            sink.request(RequestRecord(target="t", index=i, start_time=t0 + i * 0.01), tags)
            if i == 300:
                stop_process(vm)  # the server goes away while points flow ...
            if i == 2000:
                vm = _start_vm(port, root)  # ... and comes back; replays race the catch-up
                replays = [
                    subprocess.Popen(
                        [sys.executable, "-m", "llmload", "influx", "replay", str(spool_dir)],
                        cwd=REPO,
                        env=dict(os.environ, PYTHONPATH=str(REPO)),
                        stdout=subprocess.PIPE,
                        stderr=subprocess.STDOUT,
                        text=True,
                    )
                    for _ in range(2)
                ]
            time.sleep(0.001)
        outs = [p.communicate(timeout=120)[0] for p in replays]
        stats = sink.close(timeout_s=30)
        replayed = sum(int(m) for o in outs for m in re.findall(r"replayed (\d+) points", o))
        assert stats["spooled"] > 0 and stats["dropped"] == 0, stats
        assert stats["remaining"] == 0 and not pending_files(spool_dir), (stats, outs)
        # Whoever sent a file, it was sent once: sink's catch-up + the replays = what was spooled.
        assert stats["resent"] + replayed == stats["spooled"], (stats, outs)
        assert stats["replayed"] == replayed
        assert stats["written"] + stats["spooled"] == n
        assert _samples(port) == n  # VictoriaMetrics keeps duplicates: none were posted
        print(f"spooled {stats['spooled']}, catch-up {stats['resent']}, replays {replayed}")
    finally:
        stop_process(vm)
