"""Seeded, vectorised bootstrap confidence intervals for differences between two samples.

Paired: one set of resampled positions is applied to both samples (they are aligned, e.g. the
same workload item sent to two targets), so what is shared between the two cancels out.
Unpaired: each sample is resampled on its own. Quantiles use the nearest-rank definition
(numpy's ``inverted_cdf``), like llmload's histograms. Intervals are bootstrap percentile intervals.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

MAX_CELLS = 2_000_000  # resamples x sample size held in memory at once


Stat = Callable[[np.ndarray], np.ndarray]  # (resamples, n) -> (k, resamples)


def quantile_stat(qs: Sequence[float]) -> Stat:
    """Nearest-rank quantiles (qs in percent) of each resample row."""
    probs = np.asarray(qs, dtype=float) / 100.0

    def stat(m: np.ndarray) -> np.ndarray:
        return np.atleast_2d(np.quantile(m, probs, axis=1, method="inverted_cdf"))

    return stat


def point(x: np.ndarray, stat: Stat) -> np.ndarray:
    """The statistic on the sample itself, shape (k,)."""
    return stat(x[np.newaxis, :])[:, 0]


def diff_ci(
    base: np.ndarray,
    cand: np.ndarray,
    stat: Stat,
    *,
    paired: bool,
    resamples: int,
    confidence: float,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """Bootstrap percentile interval of stat(cand) - stat(base); returns (low, high), each shape (k,)."""
    if paired and len(base) != len(cand):
        raise ValueError("paired samples must have the same length")
    n_b, n_c = len(base), len(cand)
    step = max(1, MAX_CELLS // max(n_b, n_c, 1))
    diffs: list[np.ndarray] = []
    done = 0
    while done < resamples:
        k = min(step, resamples - done)
        idx_b = rng.integers(0, n_b, size=(k, n_b))
        idx_c = idx_b if paired else rng.integers(0, n_c, size=(k, n_c))
        diffs.append(stat(cand[idx_c]) - stat(base[idx_b]))
        done += k
    d = np.concatenate(diffs, axis=1)
    alpha = 1.0 - confidence
    lo, hi = np.quantile(d, [alpha / 2.0, 1.0 - alpha / 2.0], axis=1)
    return lo, hi


def mean_stat(m: np.ndarray) -> np.ndarray:
    return np.atleast_2d(m.mean(axis=1))


def sum_stat(scale: float) -> Stat:
    def stat(m: np.ndarray) -> np.ndarray:
        return np.atleast_2d(m.sum(axis=1) * scale)

    return stat
