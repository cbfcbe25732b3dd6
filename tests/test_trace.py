"""Trace replay: timestamped request logs (BurstGPT-like CSV, Mooncake-like JSONL) sent open loop."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from llmload.config.scenario import load_scenario, parse_scenario
from llmload.config.yamlsrc import InputError
from llmload.load.trace import load_trace
from llmload.load.workload import WorkloadSource
from tests.conftest import ROOT, TOLERANT_CLIENT, llmload_run

CSV = """Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type
5.0,ChatGPT,40,7,47,Conversation log
5.2,ChatGPT,12,3,15,Conversation log
5.2,GPT-4,30,5,35,API log
5.5,ChatGPT,8,2,10,Conversation log
5.9,GPT-4,16,4,20,API log
6.0,ChatGPT,20,6,26,Conversation log
"""


def test_both_layouts_load_in_time_order_windowed_and_scaled(tmp_path: Path) -> None:
    csv_path = tmp_path / "t.csv"
    csv_path.write_text(CSV)
    rows = load_trace(csv_path, speedup=2.0)
    assert [r.offset_s for r in rows] == pytest.approx([0.0, 0.1, 0.1, 0.25, 0.45, 0.5])
    assert [(r.input_tokens, r.output_tokens) for r in rows][:2] == [(40, 7), (12, 3)]
    window = load_trace(csv_path, start_s=0.2, duration_s=0.5)  # trace seconds 5.2 .. 5.7
    assert [r.offset_s for r in window] == pytest.approx([0.0, 0.0, 0.3])
    jl = tmp_path / "t.jsonl"
    jl.write_text(
        '{"timestamp": 2000, "input_length": 600, "output_length": 9, "hash_ids": [0, 7]}\n'
        '{"timestamp": 1000, "input_length": 300, "output_length": 4, "hash_ids": [0]}\n'
    )
    notes: list[str] = []
    rows = load_trace(jl, notes=notes)  # milliseconds, as Mooncake gives them; sorted by time, said once
    assert [(r.offset_s, r.input_tokens, r.hash_ids) for r in rows] == [(0.0, 300, (0,)), (1.0, 600, (0, 7))]
    assert notes == [f"{jl}: not in time order (1 of 2 requests earlier than the one before): sorted"]
    in_order: list[str] = []
    load_trace(csv_path, notes=in_order)
    assert in_order == []


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("a.csv", "Model,Request tokens,Response tokens\nx,1,2\n", "a.csv:2: no Timestamp"),
        (
            "b.csv",
            "Timestamp,Request tokens,Response tokens\nsoon,1,2\n",
            "b.csv:2: Timestamp must be a number",
        ),
        (
            "c.jsonl",
            '{"timestamp": 1, "input_length": 2, "output_length": 1.5}\n',
            "c.jsonl:1: output_length must be a whole number",
        ),
        ("d.jsonl", '{"timestamp": 1}\nnot json\n', "d.jsonl:1: no request tokens"),
        ("e.jsonl", "\n", "e.jsonl: the trace holds no request"),
    ],
)
def test_a_bad_trace_names_the_file_and_line(tmp_path: Path, name: str, text: str, message: str) -> None:
    (tmp_path / name).write_text(text)
    with pytest.raises(InputError, match=message.replace(".", r"\.")):
        load_trace(tmp_path / name)


def test_requests_take_the_rows_lengths_and_shared_blocks_share_their_text(tmp_path: Path) -> None:
    jl = tmp_path / "t.jsonl"
    jl.write_text(
        '{"timestamp": 0, "input_length": 700, "output_length": 9, "hash_ids": [5, 6]}\n'
        '{"timestamp": 10, "input_length": 600, "output_length": 4, "hash_ids": [5, 8]}\n'
        '{"timestamp": 20, "input_length": 50, "output_length": 3}\n'
    )
    sc = parse_scenario(
        "targets: [{name: a, kind: openai, base_url: 'http://127.0.0.1:9', model: m}]\n"
        f"workload: {{kind: trace, path: '{jl}', salt: false}}\n"
    )
    assert [p.executor for p in sc.load.phases] == ["trace"]  # a trace with no load of its own is replayed
    src = WorkloadSource(sc.workload)
    specs = [src.get(i) for i in (1_000_000, 1_000_001, 1_000_002)]  # the first step's arrivals 0, 1, 2
    assert [s.max_tokens for s in specs] == [9, 4, 3]
    assert [s.prompt_tokens_est for s in specs] == [700, 600, 50]
    a, b = (s.messages[0]["content"].split() for s in specs[:2])
    assert a[:512] == b[:512] and a[512:600] != b[512:600]  # block 5 shared, then 6 against 8
    assert src.trace_offsets() == [0.0, 0.01, 0.02]


def test_a_trace_phase_needs_a_trace_workload(tmp_path: Path) -> None:
    scn = tmp_path / "s.yaml"
    scn.write_text(
        "targets: [{name: a, kind: openai, base_url: 'http://127.0.0.1:9', model: m}]\n"
        "load: {phases: [{executor: trace}]}\n"
    )
    with pytest.raises(InputError, match="a trace phase replays"):
        load_scenario(scn)


def test_a_replay_sends_each_request_at_its_scaled_time_in_order_to_every_target(
    tmp_path: Path, sse_server: str
) -> None:
    (tmp_path / "t.csv").write_text(CSV)
    timed = "{llmload_test: {mode: timed, n: 3, first_ms: 5, interval_ms: 5}}"
    scenario = tmp_path / "replay.yaml"
    scenario.write_text(
        f"{TOLERANT_CLIENT}\n"
        "targets:\n"
        f"  - {{name: a, kind: openai, base_url: '{sse_server}', model: test-model, extra_body: {timed}}}\n"
        f"  - {{name: b, kind: openai, base_url: '{sse_server}', model: test-model, extra_body: {timed}}}\n"
        "workload: {kind: trace, path: t.csv, speedup: 2}\n"
    )
    out, summary = llmload_run(scenario, tmp_path / "r")
    assert out.returncode == 0, out.stderr[-3000:]
    lines = [json.loads(x) for x in (tmp_path / "r" / "requests.jsonl").read_text().splitlines()]
    wanted = [0.0, 0.1, 0.1, 0.25, 0.45, 0.5]  # the trace's offsets, halved
    t0 = min(x["intended_time"] for x in lines)
    for target in ("a", "b"):
        mine = sorted((x for x in lines if x["target"] == target), key=lambda x: x["index"])
        assert len(mine) == 6 and all(x["status"] == "ok" for x in mine)
        # every request scheduled at its trace time, from one start for both targets (paired)
        assert [round(x["intended_time"] - t0, 5) for x in mine] == pytest.approx(wanted, abs=2e-5)
        # and never sent before its time (schedule lag: measured, not judged). Not asserted: that the
        # sends keep the trace's order. A late first request can pass later ones: on a busy host
        # (make test, 2026-12-07) requests 0-2 were sent within 0.2 ms in reverse, request 0 about
        # 100 ms after its time, each at its kernel send; their schedule was in order (above)
        assert all(x["schedule_lag_ms"] >= 0 for x in mine)
    assert summary["targets"]["a"]["requests"]["sent"] == 6


@pytest.mark.integration
def test_the_shipped_example_trace_is_what_its_generator_writes(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "scripts/example_trace.py", str(tmp_path / "t.jsonl")],
        check=True,
        cwd=ROOT,
        timeout=60,
    )
    assert (tmp_path / "t.jsonl").read_text() == (
        ROOT / "scenarios" / "traces" / "example-mooncake.jsonl"
    ).read_text()
    sc = load_scenario(ROOT / "scenarios" / "trace-replay.yaml")
    assert len(WorkloadSource(sc.workload, base_dir=ROOT / "scenarios").trace_offsets()) == 80
