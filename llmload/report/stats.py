"""Small statistics helpers shared by the report layer.

Percentiles use the nearest-rank definition (the smallest value with at least p% of the
samples at or below it), the same one llmload's exact histograms use, so a percentile
computed here from requests.jsonl matches the one in summary.json for the same samples.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from llmload.measure.histogram import nearest_rank, rank
from llmload.schema.results_model import HistogramSnapshot

CDF_POINTS = 400  # evenly spaced ranks kept when a CDF is thinned for a chart
CDF_TAIL_POINTS = 100  # extra ranks kept in the top 1%, where tails live


def summarise(values: Iterable[float]) -> dict[str, Any]:
    """count, mean, p50, p90, p95, p99, max: the summary.json latency block shape."""
    vals = sorted(values)
    out: dict[str, Any] = {"count": len(vals)}
    out["mean"] = round(sum(vals) / len(vals), 3) if vals else None
    for p in (50, 90, 95, 99):
        out[f"p{p}"] = nearest_rank(vals, p)
    out["max"] = vals[-1] if vals else None
    return out


def _thin_ranks(n: int) -> list[int]:
    """Indexes (0-based ranks) to keep when drawing a CDF of n sorted samples."""
    if n <= CDF_POINTS + CDF_TAIL_POINTS:
        return list(range(n))
    keep = {round(i * (n - 1) / CDF_POINTS) for i in range(CDF_POINTS + 1)}
    tail_start = int(n * 0.99)
    span = n - 1 - tail_start
    keep.update(tail_start + round(i * span / CDF_TAIL_POINTS) for i in range(CDF_TAIL_POINTS + 1))
    return sorted(keep)


def ecdf(values: Iterable[float]) -> tuple[list[float], list[float]]:
    """Empirical CDF (x sorted, y = fraction at or below x), thinned for plotting."""
    vals = sorted(values)
    n = len(vals)
    idx = _thin_ranks(n)
    return [vals[i] for i in idx], [(i + 1) / n for i in idx]


def histogram_cdf(snapshot: HistogramSnapshot) -> tuple[list[float], list[float]]:
    """CDF from a summary.json histogram snapshot ({"unit": "us", "keys": [...], "counts": [...]}).

    Returns x in milliseconds. Thinned like :func:`ecdf` (by rank, so the tail keeps its detail).
    """
    keys, counts = snapshot.keys, snapshot.counts
    if len(keys) != len(counts):
        raise ValueError("histogram keys and counts differ in length")
    scale = _unit_to_ms(snapshot.unit)
    total = sum(counts)
    if total == 0:
        return [], []
    cum: list[int] = []
    seen = 0
    for c in counts:
        seen += c
        cum.append(seen)
    if len(keys) <= CDF_POINTS + CDF_TAIL_POINTS:
        return [k * scale for k in keys], [c / total for c in cum]
    # thin by rank: for each wanted rank, the first key whose cumulative count reaches it
    xs: list[float] = []
    ys: list[float] = []
    j = 0
    for r in _thin_ranks(total):
        while cum[j] < r + 1:
            j += 1
        if xs and xs[-1] == keys[j] * scale:
            ys[-1] = cum[j] / total
            continue
        xs.append(keys[j] * scale)
        ys.append(cum[j] / total)
    return xs, ys


def histogram_percentile(snapshot: HistogramSnapshot, p: float) -> float | None:
    """Nearest-rank percentile (ms) of a histogram snapshot."""
    keys, counts = snapshot.keys, snapshot.counts
    total = sum(counts)
    if total == 0:
        return None
    want = rank(p, total)
    seen = 0
    scale = _unit_to_ms(snapshot.unit)
    for k, c in zip(keys, counts, strict=False):
        seen += c
        if seen >= want:
            return k * scale
    return keys[-1] * scale


def _unit_to_ms(unit: str) -> float:
    factors = {"us": 1e-3, "ms": 1.0, "s": 1e3, "ns": 1e-6}
    if unit not in factors:
        raise ValueError(f"unknown histogram unit {unit!r}")
    return factors[unit]
