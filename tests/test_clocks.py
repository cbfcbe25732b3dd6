"""Worker clocks against the master's (llmload/measure/clock_offset.py, llmload/locust/clocks.py).

The arithmetic in-process; then a real master with two real workers, one of them with its wall clock
moved 2.5 s ahead by libfaketime (LD_PRELOAD: time.time() in that process only; the kernel's clock,
and so the server's, stay true). What is asserted follows from causality, which no busy host breaks:
a round trip brackets the master's reading, so the estimate is within its uncertainty of the truth,
and a request sent on the corrected schedule reaches the server no earlier than planned (less that
uncertainty).
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import httpx
import pytest

from llmload.measure.clock_offset import BOUND_MS, ClockOffset, disagreement, shifted
from llmload.measure.records import RequestRecord
from llmload.measure.runstate import Collector
from tests.conftest import open_loop_scenario
from tests.required import require
from tests.servers import distributed_run

FAKETIME = next(iter(sorted(Path("/usr/lib").glob("*/faketime/libfaketime.so.1"))), Path("libfaketime.so.1"))
SKEW_S = 2.5
RATE = 20.0


def test_the_estimate_is_within_its_uncertainty_and_prefers_the_shortest_round_trip() -> None:
    rng = random.Random(4)
    true = -2.5  # master minus worker
    est = ClockOffset()
    for _ in range(40):  # asymmetric delays, some long (a busy host)
        send = rng.uniform(0, 100)
        out, back = rng.expovariate(1 / 0.002), rng.expovariate(1 / 0.02)
        est.sample(send - true, send + out, send + out + back - true)  # worker clock = master - true
        assert est.uncertainty_s is not None and abs(est.offset_s - true) <= est.uncertainty_s + 1e-12
    assert est.uncertainty_s == min(r for r, _ in est.samples) / 2
    assert est.taken == 40 and len(est.samples) == 16
    est.sample(10.0, 5.0, 9.0)  # the worker's clock stepped back mid-trip: nothing to learn
    assert est.taken == 40
    assert ClockOffset().offset_s == 0.0 and ClockOffset().to_wire() is None
    blind = ClockOffset()
    assert blind.use() == 0.0 and blind.blind_uses == 1  # moved before any round trip: said so
    blind.sample(0.0, 1.0, 0.004)
    blind.use()
    blind.sample(0.0, 1.0, 0.002)  # a better round trip later: the times moved earlier keep their bound
    assert blind.to_wire() == {
        "offset_ms": 999.0,
        "uncertainty_ms": 1.0,
        "used_uncertainty_ms": 2.0,
        "unmeasured_uses": 1,
        "samples": 2,
    }


def test_a_delta_moves_onto_the_masters_clock_and_its_durations_do_not() -> None:
    c = Collector(["t"], worker="w")
    c.streamed.open("t", "main", "1", 100.0)
    c.started("t")
    rec = RequestRecord(target="t", index=3, phase="main", level="1", intended_time=100.5, status="ok")
    rec.start_time, rec.ttft_s, rec.e2e_s = 100.75, 0.125, 0.5
    c.record(rec)
    before = c.drain()
    line = dict(before["lines"][0])
    moved = shifted(json.loads(json.dumps(before)), -2.5)
    got = moved["lines"][0]
    assert got["start_time"] == 98.25 and got["intended_time"] == 98.0
    assert {k: v for k, v in got.items() if k not in ("start_time", "intended_time")} == {
        k: v for k, v in line.items() if k not in ("start_time", "intended_time")
    }
    assert moved["windows"][0][3] == 97.5 and moved["t"] == before["t"] - 2.5
    assert moved["levels"] == json.loads(json.dumps(before["levels"]))  # histograms: durations only


def test_workers_that_may_disagree_are_said_to() -> None:
    ok = {"a": {"offset_ms": 0.1, "uncertainty_ms": 0.2}, "b": {"offset_ms": -0.3, "uncertainty_ms": 0.1}}
    assert disagreement(ok) is None
    moved = {**ok, "b": {"offset_ms": -2500.0, "uncertainty_ms": 0.4}}
    assert "corrected" in (disagreement(moved) or "")
    vague = {**ok, "b": {"offset_ms": 0.0, "uncertainty_ms": 0.1, "used_uncertainty_ms": BOUND_MS * 3}}
    note = disagreement(vague) or ""
    assert "known within 3.000 ms only" in note and f"bound {BOUND_MS:g} ms" in note
    early = {**ok, "b": {**ok["b"], "unmeasured_uses": 2}}
    assert "before its first round trip" in (disagreement(early) or "")


@pytest.mark.integration
@pytest.mark.timeout(180)
def test_a_worker_with_its_clock_ahead_sends_on_the_masters_schedule(tmp_path: Path, sse_server: str) -> None:
    require(FAKETIME.exists(), "libfaketime is missing (apt-get install faketime)")
    # user-space stamps: libfaketime moves time.time() in the worker, not the kernel's stamps
    scn = open_loop_scenario(tmp_path / "clocks.yaml", sse_server, RATE, 3, client="timestamps: user")
    out = tmp_path / "r"
    ahead = {"LD_PRELOAD": str(FAKETIME), "FAKETIME": f"+{SKEW_S}", "FAKETIME_DONT_FAKE_MONOTONIC": "1"}
    with distributed_run(scn, out, tmp_path, [{}, ahead]) as (master, _):
        code = master.wait(150)
    log = (tmp_path / "master.log").read_text()
    assert code == 0, log[-3000:] + (tmp_path / "w1.log").read_text()[-2000:]
    run = json.loads((out / "summary.json").read_text())["run"]
    clocks = run["clocks"]
    assert len(clocks) == 2, clocks
    moved = min(clocks, key=lambda w: clocks[w]["offset_ms"])
    true = {w: (-SKEW_S * 1000 if w == moved else 0.0) for w in clocks}
    for w, c in clocks.items():  # the round trip brackets the truth (0.002: the ms rounded to 3 places)
        assert abs(c["offset_ms"] - true[w]) <= c["uncertainty_ms"] + 0.002, (w, c)
        assert c["samples"] >= 8
    assert any("worker clocks differed" in n for n in run["client"]["notes"])
    lines = [json.loads(x) for x in (out / "requests.jsonl").read_text().splitlines()]
    assert {x["worker"] for x in lines} == set(clocks) and len(lines) == RATE * 3
    # The plan, on the master's clock: arrival j at the step's start + (j + 0.5) / rate (uniform).
    start = run["steps"][0]["start"]
    # each moved time is within the estimate's uncertainty at its move (the worst of them is kept)
    unc = {w: c["used_uncertainty_ms"] / 1000 + 1e-5 for w, c in clocks.items()}
    assert all(
        c["unmeasured_uses"] == 0 and c["used_uncertainty_ms"] >= c["uncertainty_ms"] for c in clocks.values()
    )
    served = httpx.get(f"{sse_server}/llmload_test/requests", timeout=10).json()
    rid = re.sub(r"[^A-Za-z0-9._:-]", "_", run["run_id"])  # as X-Request-Id carries it (controller.py)
    mine = {k: v for k, v in served.items() if k.startswith(f"{rid}-")}
    # every request the server saw is a line, sent once (a master that sent the open-loop plan again
    # doubled every arrival, unrecorded)
    assert sorted(mine) == sorted(f"{rid}-t-{x['index']}" for x in lines)
    assert all(v["n"] == 1 for v in mine.values()), sorted(v["n"] for v in mine.values())[-3:]
    late = []
    for x in lines:
        j = x["index"] % 1_000_000
        planned = start + (j + 0.5) / RATE
        assert abs(x["intended_time"] - planned) <= unc[x["worker"]], (x, planned)
        s = served[f"{rid}-t-{x['index']}"]
        arrived = s["first_sent_wall"] - (s["first_sent"] - s["arrived"])  # the server's wall clock: true
        why = (x["worker"] == moved, arrived - planned, x["start_time"] - arrived, clocks[x["worker"]])
        assert arrived >= planned - unc[x["worker"]] - 0.001, why
        assert x["start_time"] <= arrived + unc[x["worker"]] + 0.001, why  # sent before it arrived
        late.append(arrived - planned)
    late.sort()
    print(f"arrival minus plan: median {late[len(late) // 2] * 1000:.2f} ms, max {late[-1] * 1000:.2f} ms")
