"""The terminal's run line: each client figure with the limit it is judged against, and advice when one
passes it (in process, on a synthetic results directory)."""

from __future__ import annotations

import json
from pathlib import Path

from llmload.measure.client_health import LATE_READ_MS
from llmload.schema.results_model import ClientDelay, ReadTimestamps, Summary
from llmload.sinks.terminal import render_table
from tests.synth import SynthTarget, write_results_dir


def _summary(tmp_path: Path, *, lag: float, cpu: float, delay: float | None) -> Summary:
    d = write_results_dir(tmp_path / "run", [SynthTarget("a")], requests_per_target=20)
    s = Summary.model_validate(json.loads((d / "summary.json").read_text()))
    s.run.scenario["client"] = {"loop_lag_threshold_ms": 20.0, "cpu_threshold_percent": 80.0}
    s.run.client.loop_lag_ms.p99, s.run.client.cpu_percent.max = lag, cpu
    s.run.client.timestamps = {}
    if delay is not None:
        s.run.client.timestamps["a"] = ReadTimestamps(
            source="kernel",
            kernel_reads=100,
            user_reads=0,
            coalesced_reads=0,
            client_delay_ms=ClientDelay(count=100, p50=delay / 2, p99=delay, max=delay),
        )
    return s


def _run_lines(s: Summary) -> list[str]:
    lines = render_table(s).splitlines()
    i = next(i for i, x in enumerate(lines) if x.startswith("run "))
    return [*lines[i : i + 2], ""][:2]


def test_every_client_figure_states_its_limit_and_a_quiet_client_gets_no_advice(tmp_path: Path) -> None:
    run, after = _run_lines(_summary(tmp_path, lag=3.0, cpu=20.0, delay=0.5))
    assert "client loop lag p99 3.00 ms (limit 20 ms)" in run
    assert "CPU max 20% (limit 80%)" in run
    assert f"client delay p99 0.50 ms (kernel stamps, limit {LATE_READ_MS:g} ms)" in run
    assert "busy" not in after


def test_a_figure_above_its_limit_is_named_with_what_to_do(tmp_path: Path) -> None:
    run, after = _run_lines(_summary(tmp_path, lag=19.0, cpu=20.0, delay=12.0))
    assert after.startswith("  ! the client was busy (client delay p99 12.00 ms > 1 ms)")
    assert "--workers N" in after and "quieter host" in after
    _, after = _run_lines(_summary(tmp_path / "2", lag=33.0, cpu=95.0, delay=None))
    assert "loop lag p99 33.00 ms > 20 ms; CPU 95% > 80%" in after and "client delay" not in after
