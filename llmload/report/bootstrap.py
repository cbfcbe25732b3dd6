"""Seeded, vectorised bootstrap confidence intervals for differences between two samples.

Paired: one set of resampled positions is applied to both samples (they are aligned, e.g. the
same workload item sent to two targets), so what is shared between the two cancels out.
Unpaired: each sample is resampled on its own. Quantiles use the nearest-rank definition
(numpy's ``inverted_cdf``, computed with ``np.partition``), like llmload's histograms. Intervals are bootstrap percentile intervals.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from llmload.measure.histogram import rank

MAX_CELLS = 2_000_000  # resamples x sample size held in memory at once


Stat = Callable[[np.ndarray], np.ndarray]  # (resamples, n) -> (k, resamples)


def quantile_stat(qs: Sequence[float]) -> Stat:
    """Nearest-rank quantiles (qs in percent) of each resample row (np.partition: O(n) per row)."""

    def stat(m: np.ndarray) -> np.ndarray:
        n = m.shape[1]
        ks = [min(n, rank(q, n)) - 1 for q in qs]
        return np.partition(m, ks, axis=1)[:, ks].T

    return stat


def point(x: np.ndarray, stat: Stat) -> np.ndarray:
    """The statistic on the sample itself, shape (k,)."""
    return stat(x[np.newaxis, :])[:, 0]


def diff_ci(
    base: np.ndarray,
    cand: np.ndarray,
    stat: Stat,
    cand_stat: Stat | None = None,
    *,
    paired: bool,
    resamples: int,
    confidence: float,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """Bootstrap percentile interval of cand_stat(cand) - stat(base); returns (low, high), each shape (k,).

    Samples are 1-D, or 2-D with one row per observation (resampling picks whole rows).
    ``cand_stat`` defaults to ``stat``.
    """
    cand_stat = cand_stat or stat
    if paired and len(base) != len(cand):
        raise ValueError("paired samples must have the same length")
    n_b, n_c = len(base), len(cand)
    width = 1 if base.ndim == 1 else base.shape[1]
    step = max(1, MAX_CELLS // (max(n_b, n_c, 1) * width))
    diffs: list[np.ndarray] = []
    done = 0
    while done < resamples:
        k = min(step, resamples - done)
        idx_b = rng.integers(0, n_b, size=(k, n_b), dtype=np.int32)
        idx_c = idx_b if paired else rng.integers(0, n_c, size=(k, n_c), dtype=np.int32)
        diffs.append(cand_stat(cand[idx_c]) - stat(base[idx_b]))
        done += k
    d = np.concatenate(diffs, axis=1)
    alpha = 1.0 - confidence
    lo, hi = np.quantile(d, [alpha / 2.0, 1.0 - alpha / 2.0], axis=1)
    return lo, hi


def ratio_stat(scale: float) -> Stat:
    """scale x sum(column 0) / sum(column 1) of each resample of (n, 2) rows."""

    def stat(m: np.ndarray) -> np.ndarray:
        return np.atleast_2d(scale * m[..., 0].sum(axis=-1) / m[..., 1].sum(axis=-1))

    return stat
