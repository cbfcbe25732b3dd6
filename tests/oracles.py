"""Reference figures the tests compute on their own, written from the definitions in docs/metrics.md.

The product has one percentile implementation (llmload.measure.histogram.rank); a test that used it to check
itself would prove nothing, so the tests share this one, written independently with exact fractions.
"""

from __future__ import annotations

import math
from fractions import Fraction


def nearest_rank(values: list[float], p: float) -> float:
    """The smallest value with at least p% of the values at or below it."""
    xs = sorted(values)
    k = max(1, math.ceil(Fraction(str(p)) / 100 * len(xs)))
    return xs[k - 1]
