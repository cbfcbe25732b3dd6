"""The capacity self-test (llmload/client/selftest.py): a real loopback measurement, the pure comparison
behind its warning, the scenario switch, and its place in summary.json."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from llmload.client.selftest import (
    AUTO_MIN_CHUNKS_PER_S,
    COALESCED_PERCENT,
    WARM_S,
    Level,
    expected_chunks_per_s,
    judge,
    measure,
    run_selftest,
    should_run,
)
from llmload.config.executors import ConstantArrivalRate, ConstantVUs
from llmload.config.scenario import parse_scenario
from llmload.load.plan import build_plan
from llmload.measure.client_health import client_health
from llmload.measure.histogram import Histogram
from llmload.schema.results_model import ClientHealth, SelfTest
from tests.conftest import llmload_run, two_sim_scenario


@pytest.mark.integration
def test_measure_reads_a_real_loopback_server() -> None:
    t0 = time.perf_counter()
    levels = measure(seconds=0.6, streams=4, interval_ms=5.0, steps=1)
    elapsed = time.perf_counter() - t0
    first = levels[0]
    # chunks read from the real server in the steady window (how many depends on this host's load),
    # and every body read of the level counted by the transport's stamps, as a run's are; the window
    # leaves the warm-up out (a late wake-up on a busy host may make it longer than asked, not than that)
    assert first.streams == 4 and first.chunks > 0 and first.cpu_s > 0
    assert 0 < first.seconds <= elapsed - min(WARM_S, 0.6 / 2), (first.seconds, elapsed)
    assert first.reads >= first.chunks
    if first.coalesced_percent < COALESCED_PERCENT and first.cpu_s < 0.95 * first.seconds:
        assert len(levels) == 2 and levels[1].streams > 4 and levels[1].chunks > 0  # the search went on
    st = judge("on", first.chunks, first.cpu_s, 100.0, 1, levels=levels)
    assert st.chunk_cost_us > 0 and len(st.levels) == len(levels)


def _level(streams: int, chunks: int, cpu_s: float, coalesced: int) -> Level:
    return Level(streams=streams, chunks=chunks, cpu_s=cpu_s, seconds=1.0, reads=1000, coalesced=coalesced)


def test_the_rate_where_reads_coalesce_is_the_first_level_past_the_threshold() -> None:
    levels = [_level(10, 500, 0.1, 0), _level(16, 800, 0.2, 5), _level(26, 1300, 0.4, 30)]
    st = judge("on", 500, 0.1, expected=500.0, processes=1, levels=levels)
    # 0.5% of reads at 800 chunks/s is under COALESCED_PERCENT; 3% at 1,300 is past it
    assert [lv.coalesced_percent for lv in st.levels] == [0.0, 0.5, 3.0]
    assert st.coalescing_from_chunks_per_s == 1300.0 and st.warning is None  # 500 is under both limits
    past = judge("on", 500, 0.1, expected=2 * 1300.0, processes=2, levels=levels)
    assert past.load_percent == 26.0 and past.warning is not None  # under 80% of a core, past the onset
    assert "past 1,300 chunks/s, where reads coalesced here" in past.warning and "\n" not in past.warning
    none = judge("on", 500, 0.1, expected=500.0, processes=1, levels=levels[:2])
    assert none.coalescing_from_chunks_per_s is None


def test_warning_when_the_share_per_process_passes_the_limit() -> None:
    # 1 ms of CPU per chunk: one core reads 1,000 chunks/s; 80% of it is 800
    over = judge("on", chunks=1000, cpu_s=1.0, expected=1800.0, processes=2)
    assert over.capacity_chunks_per_s == 1000.0
    assert over.expected_per_process == 900.0 and over.load_percent == 90.0
    assert over.warning is not None
    assert "900 chunks/s per process (1,800 over 2 processes)" in over.warning
    assert "90%" in over.warning and "1,000 chunks/s" in over.warning and "\n" not in over.warning
    under = judge("on", chunks=1000, cpu_s=1.0, expected=1600.0, processes=2)
    assert under.load_percent == 80.0 and under.warning is None


def test_expected_rate_from_the_plan() -> None:
    closed = build_plan([ConstantVUs(executor="constant-vus", vus=10, duration=5)], ["a", "b"], "parallel")
    assert expected_chunks_per_s(closed, output_tokens=200, stream_tokens_per_s=50) == 10 * 2 * 50
    seq = build_plan([ConstantVUs(executor="constant-vus", vus=10, duration=5)], ["a", "b"], "sequential")
    assert expected_chunks_per_s(seq, output_tokens=200, stream_tokens_per_s=50) == 10 * 50
    open_loop = build_plan(
        [ConstantArrivalRate(executor="constant-arrival-rate", rate=4, duration=5, max_vus=100)],
        ["a"],
        "parallel",
    )
    assert expected_chunks_per_s(open_loop, output_tokens=200, stream_tokens_per_s=50) == 4 * 200
    capped = build_plan(
        [ConstantArrivalRate(executor="constant-arrival-rate", rate=4, duration=5, max_vus=2)],
        ["a"],
        "parallel",
    )
    assert expected_chunks_per_s(capped, output_tokens=200, stream_tokens_per_s=50) == 2 * 50
    trace = build_plan([], ["a"], "parallel")
    assert expected_chunks_per_s(trace, output_tokens=200, stream_tokens_per_s=50) == 0


def test_off_skips_and_auto_needs_a_busy_scenario() -> None:
    assert not should_run("off", 1e9)
    assert should_run("on", 0.0)
    assert not should_run("auto", AUTO_MIN_CHUNKS_PER_S - 1)
    assert should_run("auto", AUTO_MIN_CHUNKS_PER_S)
    plan = build_plan([ConstantVUs(executor="constant-vus", vus=1000, duration=5)], ["a"], "parallel")
    assert run_selftest("off", plan, 100.0, 50.0, 1) is None  # returns at once: nothing measured


def test_scenario_switch_reads_yaml_on_off() -> None:
    base = "name: s\ntargets: [{name: a, kind: openai, base_url: 'http://127.0.0.1:1'}]\n"
    assert parse_scenario(base).client.selftest == "auto"
    assert parse_scenario(base + "client: {selftest: off}\n").client.selftest == "off"
    assert parse_scenario(base + "client: {selftest: on}\n").client.selftest == "on"


def test_selftest_round_trips_through_the_model() -> None:
    st = judge("auto", chunks=500, cpu_s=1.0, expected=3000.0, processes=1)
    health = client_health(
        parse_scenario("name: s\ntargets: [{name: a, kind: openai, base_url: 'http://x:1'}]\n").client,
        Histogram(),
        [],
        {},
        st,
    )
    dumped = health.model_dump(mode="json", exclude_unset=True)
    assert dumped["selftest"]["warning"] == st.warning and st.warning in dumped["notes"]
    assert ClientHealth.model_validate(dumped).selftest == st
    assert SelfTest.model_validate(st.model_dump()) == st
    plain = client_health(
        parse_scenario("name: s\ntargets: [{name: a, kind: openai, base_url: 'http://x:1'}]\n").client,
        Histogram(),
        [],
        {},
    )
    assert "selftest" not in plain.model_dump(exclude_unset=True)


@pytest.mark.integration
def test_a_run_warns_in_one_line_and_records_it(tmp_path: Path) -> None:
    """A real run whose expected rate (a huge stream speed) passes what this machine measured."""
    sc = tmp_path / "s.yaml"
    sc.write_text(two_sim_scenario(duration="2s", warmup="0s", users=2))
    out, summary = llmload_run(
        sc,
        tmp_path / "r",
        "--quiet",
        "--set",
        "client.selftest=on",
        "--set",
        "client.stream_tokens_per_s=1e7",
    )
    assert out.returncode == 0, out.stderr
    lines = [ln for ln in out.stderr.splitlines() if "self-test:" in ln]
    assert len(lines) == 1 and lines[0].startswith("llmload: warning: self-test: the scenario's 40,000,000")
    st = SelfTest.model_validate(summary["run"]["client"]["selftest"])
    assert st.mode == "on" and st.chunks > 0 and st.warning is not None
    events = (tmp_path / "r" / "events.jsonl").read_text()
    assert '"kind":"selftest"' in events


@pytest.mark.integration
def test_off_runs_no_selftest(tmp_path: Path) -> None:
    sc = tmp_path / "s.yaml"
    sc.write_text(two_sim_scenario(duration="1s", warmup="0s", users=2))
    out, summary = llmload_run(sc, tmp_path / "r", "--quiet", "--set", "client.selftest=off")
    assert out.returncode == 0, out.stderr
    assert "selftest" not in summary["run"]["client"]
    assert '"kind":"selftest"' not in (tmp_path / "r" / "events.jsonl").read_text()
