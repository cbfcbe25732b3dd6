"""Per-request samples of two sides, aligned for a paired bootstrap (compare.py, decision.py).

- Samples: one value per request (a latency, or a request's (output tokens, e2e) row); requests
  without the value are left out.
- Pairing: when both sides have unique request indexes (>= 0) and the indexes they share cover at
  least ``PAIR_COVERAGE`` of each side, the samples are the shared indexes in index order (the same
  workload item on both sides); otherwise each side keeps all its samples, unpaired.
- Throughput: a side's reported figure scaled by how the resampled ``sum(tokens) / sum(e2e)``
  moves against the whole sample's, so the point estimate is the reported figure itself
  (:func:`throughput_stat`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from llmload.report.bootstrap import Stat, ratio_stat
from llmload.schema.results_model import RequestLine

PAIR_COVERAGE = 0.95

Samples = tuple[
    dict[int, Any] | None, list[Any]
]  # values keyed by request index (None: unusable), all values


@dataclass
class Pair:
    base: np.ndarray
    cand: np.ndarray
    paired: bool


def request_field(name: str) -> Callable[[RequestLine], Any]:
    return lambda r: getattr(r, name)


def by_index(reqs: list[RequestLine], value: Callable[[RequestLine], Any]) -> Samples:
    """Values per request, and the same keyed by request index (None when indexes are unusable)."""
    vals: list[Any] = []
    by: dict[int, Any] | None = {}
    for r in reqs:
        v = value(r)
        if v is None:
            continue
        vals.append(v)
        i = r.index
        if by is not None:
            if i < 0 or i in by:
                by = None
            else:
                by[i] = v
    return by, vals


def align(a: Samples, b: Samples) -> Pair:
    (ia, va), (ib, vb) = a, b
    if ia and ib:
        common = sorted(ia.keys() & ib.keys())
        if len(common) >= PAIR_COVERAGE * max(len(ia), len(ib)) and len(common) >= 2:
            return Pair(
                np.array([ia[i] for i in common], float), np.array([ib[i] for i in common], float), True
            )
    return Pair(np.asarray(va, dtype=float), np.asarray(vb, dtype=float), False)


def tokens_e2e(r: RequestLine) -> tuple[float, float] | None:
    return None if r.e2e_ms is None else (float(r.output_tokens), r.e2e_ms / 1000.0)


def throughput_pair(base: list[RequestLine], cand: list[RequestLine]) -> Pair:
    """Every request's (output tokens, e2e seconds) row of each side (failures too), aligned."""
    pair = align(by_index(base, tokens_e2e), by_index(cand, tokens_e2e))
    return Pair(pair.base.reshape(-1, 2), pair.cand.reshape(-1, 2), pair.paired)


def throughput_stat(pairs: np.ndarray, reported: float | None) -> Stat | None:
    """A throughput-like figure, resampled as reported x ratio(resample) / ratio(all).

    ratio = sum(tokens) / sum(e2e) over the requests; the point estimate on the whole sample is
    exactly the figure given (the run's output tok/s, llmload/measure/throughput.py, or that figure times a
    constant such as 3600 / cost_per_hour), so compare, the report and the terminal show one number,
    and the interval comes from how the per-request ratio varies.
    """
    if not reported or len(pairs) == 0 or pairs[:, 0].sum() <= 0 or pairs[:, 1].sum() <= 0:
        return None
    return ratio_stat(reported / (pairs[:, 0].sum() / pairs[:, 1].sum()))
