"""Line protocol formatting and the sink's point shapes (no server needed)."""

from __future__ import annotations

import math
import re
from pathlib import Path

from llmload.config.influx_config import InfluxConfig
from llmload.measure.records import RequestRecord
from llmload.sinks.influx import InfluxSink
from llmload.sinks.influx_points import PointFormatter
from llmload.sinks.lineproto import (
    escape_string_field,
    escape_tag,
    format_fields,
    format_point,
    series_prefix,
)


def test_escaping_of_tags_measurement_and_strings() -> None:
    assert escape_tag("a b,c=d") == "a\\ b\\,c\\=d"
    assert series_prefix("m m", [("b", "x y"), ("a", "1"), ("empty", "")]) == "m\\ m,a=1,b=x\\ y"
    assert escape_string_field('say "hi" \\ now\nend') == '"say \\"hi\\" \\\\ now end"'


def test_fields_are_floats_and_unwritable_values_are_left_out() -> None:
    text = format_fields(
        {"i": 3, "f": 2.5, "b": True, "none": None, "nan": math.nan, "inf": math.inf, "s": "x"}
    )
    assert text == 'i=3.0,f=2.5,b=1.0,s="x"'
    assert format_point("m", {"t": "v"}, {"x": None}, 1) is None
    assert format_point("m", {"t": "v"}, {"x": 1}, 7) == "m,t=v x=1.0 7"


def _sink(tmp_path: Path) -> PointFormatter:
    """The point formatter of a sink for run "run 1" in process "w1" (what InfluxSink formats with)."""
    sink = InfluxSink(
        InfluxConfig(url="http://127.0.0.1:9", database="d"), run_id="run 1", spool_dir=tmp_path, worker="w1"
    )
    return sink._fmt


def _parts(line: str) -> list[str]:
    """Series, fields, timestamp (split on unescaped spaces; no string fields here)."""
    return re.split(r"(?<!\\) ", line)


def _fields(line: str) -> dict[str, str]:
    return dict(kv.split("=", 1) for kv in _parts(line)[1].split(","))


def test_request_point_fields_tags_and_unique_timestamps(tmp_path: Path) -> None:
    sink = _sink(tmp_path)
    tags = {"target": "vllm", "kind": "vllm", "model": "llama 3"}
    ok = RequestRecord(
        target="vllm",
        index=7,
        phase="ramp",
        start_time=1764676805.123456,
        intended_time=1764676805.1,
        ttft_s=0.08,
        e2e_s=1.08,
        itl_s=[0.01, 0.03],
        prompt_tokens=100,
        output_tokens=11,
    )
    failed = RequestRecord(target="vllm", status="http_5xx", index=8, start_time=1764676805.123456)
    lines = [sink.request(r, tags) for r in (ok, ok, failed)]
    assert all(line is not None for line in lines)
    first, second, third = (str(line) for line in lines)
    assert first.startswith("llm_request,kind=vllm,model=llama\\ 3,phase=ramp,run_id=run\\ 1,status=ok,")
    assert "worker=w1" in _parts(first)[0]
    f = _fields(first)
    assert float(f["ttft_ms"]) == 80.0 and float(f["e2e_ms"]) == 1080.0
    assert float(f["tpot_ms"]) == 100.0  # (1080 - 80) / (11 - 1)
    assert float(f["itl_mean_ms"]) == 20.0 and float(f["itl_max_ms"]) == 30.0
    assert float(f["schedule_lag_ms"]) == round((ok.start_time - 1764676805.1) * 1000.0, 3)
    assert f["index"] == "7.0" and f["output_tokens"] == "11.0" and f["prompt_tokens"] == "100.0"
    # Same series and start time: the second point gets the next nanosecond, not the same one.
    ts1, ts2 = int(first.rsplit(" ", 1)[1]), int(second.rsplit(" ", 1)[1])
    assert ts2 == ts1 + 1 and ts1 == 1764676805123456000
    # A failure has no latency fields (None is left out, never written as 0) and its own status tag.
    f3 = _fields(third)
    assert "status=http_5xx" in _parts(third)[0]
    assert set(f3) == {"index", "output_tokens"}
    assert int(third.rsplit(" ", 1)[1]) == ts1  # another series: no bump needed


def test_interval_and_event_points(tmp_path: Path) -> None:
    sink = _sink(tmp_path)
    row = {
        "t": 1764676805.0,
        "target": "a",
        "interval_s": 2.0,
        "requests": 4,
        "ttft_p50_ms": None,
        "users": 8,
    }
    line = sink.interval(row, {"kind": "sim", "model": "m"})
    assert (
        line
        == "llm_interval,kind=sim,model=m,run_id=run\\ 1,target=a,worker=w1 requests=4.0,users=8.0 1764676805000000000"
    )
    ev = sink.event("warning", 'loop lag "high"', None, 1764676805.5)
    assert ev == (
        'llm_event,kind=warning,run_id=run\\ 1,worker=w1 title="warning",text="loop lag \\"high\\"" 1764676805500000000'
    )
