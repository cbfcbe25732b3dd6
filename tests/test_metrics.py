"""Exact, mergeable histograms: percentiles equal those of the raw values (1 us resolution)."""

from __future__ import annotations

import json
import random
import tracemalloc
from collections import Counter

from llmload.measure.histogram import Histogram
from llmload.measure.metrics import TargetStats, merge_wire
from llmload.measure.records import RequestRecord
from tests.oracles import nearest_rank


def nearest_rank_us(values_s: list[float], p: float) -> int:
    return int(nearest_rank([int(v * 1e6 + 0.5) for v in values_s], p))


def test_percentiles_are_exact_over_a_wide_range() -> None:
    rng = random.Random(1)
    vals = [rng.lognormvariate(-3, 2) for _ in range(20000)] + [599.999]  # 10 us .. 10 minutes
    h = Histogram()
    for v in vals:
        h.record(v)
    for p in (50, 90, 95, 99, 99.9):
        assert h.percentile_us(p) == nearest_rank_us(vals, p)
    got = h.percentiles_ms([50, 99])
    assert got["p50"] == nearest_rank_us(vals, 50) / 1000 and got["p99"] == nearest_rank_us(vals, 99) / 1000
    assert h.summary_ms()["max"] == 599999.0


def test_merge_of_parts_equals_the_whole_and_wire_roundtrip() -> None:
    rng = random.Random(2)
    vals = [rng.uniform(0.001, 2.0) for _ in range(5000)]
    whole = Histogram()
    parts = [Histogram() for _ in range(3)]
    for i, v in enumerate(vals):
        whole.record(v)
        parts[i % 3].record(v)
    merged = Histogram()
    for part in parts:
        merged.merge(Histogram.from_wire(json.loads(json.dumps(part.to_wire()))))
    assert merged.summary_ms() == whole.summary_ms()
    assert Histogram.from_dict(whole.to_dict()).summary_ms() == whole.summary_ms()
    wire = json.dumps(whole.to_wire())
    assert len(wire) < len(json.dumps(vals))  # compact: delta keys, no raw list


def test_dense_pages_stay_exact_and_bound_memory() -> None:
    """Values packed tight enough to turn pages dense (ITL-like: 20 ms +- a few ms, and a sparse
    tail): every figure and both serialised forms equal the raw values', through merges and round
    trips; and once the range is full, recording as many again costs no memory."""
    rng = random.Random(3)

    def draw(n: int) -> list[float]:
        return [
            abs(rng.gauss(0.020, 0.004)) if rng.random() < 0.99 else rng.uniform(0.1, 30.0) for _ in range(n)
        ]

    vals = draw(30_000)
    whole, parts = Histogram(), [Histogram() for _ in range(3)]
    for i, v in enumerate(vals):
        whole.record(v)
        parts[i % 3].record(v)
    assert whole._pages, "no page turned dense: the test does not reach the dense path"
    us = sorted(int(v * 1e6 + 0.5) for v in vals)
    tally = Counter(us)
    assert list(whole.items()) == sorted(tally.items())
    for p in (0.1, 50, 90, 99, 99.9):
        assert whole.percentile_us(p) == nearest_rank(us, p)
    assert whole.count_over_ms(25.0) == sum(1 for u in us if u / 1000 > 25.0)
    assert whole.summary_ms()["mean"] == round(sum(us) / len(us) / 1000, 3)
    merged = Histogram()
    for part in parts:
        merged.merge(Histogram.from_wire(json.loads(json.dumps(part.to_wire()))))
    assert merged.to_dict() == whole.to_dict() == Histogram.from_dict(whole.to_dict()).to_dict()
    assert (merged.count, merged.total_us, merged.min_us, merged.max_us) == (len(us), sum(us), us[0], us[-1])

    dense = Histogram()
    for v in draw(100_000):
        dense.record(min(v, 0.05))  # one 50 ms range, filled
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for v in draw(100_000):
            dense.record(min(v, 0.05))
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert dense.count == 200_000
    assert grown < 50_000, f"a full histogram grew by {grown} bytes"


def test_a_dense_page_widens_its_counts_past_32_bits() -> None:
    h = Histogram()
    for us in range(1000, 1300):  # 300 distinct values in one 2 ms page: dense
        h.record(us / 1e6)
    assert h._pages
    h.record(0.0012, n=2**32 - 1)
    h.record(0.0012, n=5)
    assert dict(h.items())[1200] == 2**32 + 5 and h.count == 300 + 2**32 + 4
    assert Histogram.from_wire(h.to_wire()).to_dict() == h.to_dict()
    # a count past 32 bits already held when its page turns dense
    h = Histogram()
    h.record(0.001, n=2**32)
    for us in range(1001, 1200):
        h.record(us / 1e6)
    assert h._pages and dict(h.items())[1000] == 2**32
    assert Histogram.from_wire(h.to_wire()).to_dict() == h.to_dict()


def test_empty_histogram_reports_nulls() -> None:
    s = Histogram().summary_ms()
    assert s["count"] == 0 and s["p99"] is None and s["mean"] is None


def rec(target: str, status: str = "ok", ttft: float = 0.1, gaps: tuple = (0.02, 0.03), tokens: int = 3):
    return RequestRecord(
        target=target,
        status=status,
        ttft_s=ttft,
        e2e_s=ttft + sum(gaps),
        itl_s=list(gaps),
        itl_tokens=[1] * len(gaps),
        output_tokens=tokens,
        prompt_tokens=5,
        start_time=100.0,
    )


def test_target_stats_count_failures_and_merge_over_the_wire() -> None:
    a, b = TargetStats(), TargetStats()
    a.add(rec("x"))
    a.add(rec("x", status="http_5xx"))
    b.add(rec("x", ttft=0.2))
    merged = merge_wire([{"x": a.to_wire()}, {"x": b.to_wire()}])["x"]
    assert merged.requests == 3 and merged.ok == 2 and merged.failures == 1
    assert merged.histograms["ttft"].count == 2  # failed requests do not enter latency figures
    assert merged.histograms["itl"].count == 4
    assert merged.output_tokens == 9
    tpot = merged.histograms["tpot"].percentile_us(50)
    assert tpot == 25000  # (e2e - ttft) / (tokens - 1) = 0.05 / 2


def test_record_all_equals_recording_each_value() -> None:
    """A request's gaps in one call hold what recording them one by one holds: sparse and dense
    pages, a negative gap clamped to 0, a dense count widened past 32 bits, min, max and mean."""
    rng = random.Random(7)
    gaps = [abs(rng.gauss(0.020, 0.003)) for _ in range(3000)] + [rng.uniform(0.1, 9.0) for _ in range(50)]
    gaps += [-0.000004, 0.0, 1e-7]
    one, many = Histogram(), Histogram()
    for g in gaps:
        one.record(g)
    for i in range(0, len(gaps), 200):  # requests of 200 gaps, into a histogram already holding some
        many.record_all(gaps[i : i + 200])
    many.record_all([])
    assert many._pages and many.to_dict() == one.to_dict()
    assert many.summary_ms() == one.summary_ms() and many.min_us == one.min_us == 0
    for h in (one, many):
        h.record(0.0200, n=2**32 - 1)
    one.record(0.0200)
    many.record_all([0.0200])
    assert many.to_dict() == one.to_dict() and dict(many.items())[20000] > 2**32 - 1
