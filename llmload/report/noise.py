"""The run-to-run noise floor of a regression gate: what identical runs of the baseline show.

A comparison's confidence interval covers the sampling within each run. Two runs of the same code on
the same host also differ from run to run (the host's state, the timing of the first requests, a
p99 set by a handful of requests): the A/A test of issue 29 measured ttft_p99 +7.0% with a paired
interval that excluded zero. Given more runs of the baseline (``llmload compare --baseline DIR``),
each is compared with the baseline as a candidate would be, and the largest change any of them shows
for a figure, times ``NOISE_MULTIPLE``, is that figure's floor: a change must exceed it (and the
threshold, and its interval must exclude zero) to count. With one baseline run there is no floor.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from llmload.report.diffs import compare_pair
from llmload.report.results import BadResults, RunData

# The largest of a few A/A changes understates the spread of the next one; twice it held the false
# alarms of 20 A/A pairs on the simulator to the 1 in 20 (bench/bench_gate.py measures it).
NOISE_MULTIPLE = 2.0
NOISE_RESAMPLES = 100  # the floor reads only point estimates: the fewest resamples compare allows


def noise_floor(
    base: RunData, repeats: list[RunData], targets: list[str], seed: int
) -> dict[tuple[str, str], float]:
    """(baseline target, metric) -> the floor in percent, from the baseline and its repeats."""
    opts: dict[str, Any] = {"threshold_pct": 0.0, "confidence": 0.95, "resamples": NOISE_RESAMPLES}
    floor: dict[tuple[str, str], float] = {}
    for k, other in enumerate(repeats):
        for i, t in enumerate(targets):
            if t not in other.targets:
                raise BadResults(
                    f"{other.path / 'summary.json'}: no target {t!r} (--baseline runs repeat the baseline: "
                    f"it has {', '.join(other.targets)})"
                )
            for d in compare_pair(base, t, other, t, opts, np.random.default_rng([seed, 1000 + k, i])):
                if d.diff_pct is not None:
                    key = (t, d.metric)
                    floor[key] = max(floor.get(key, 0.0), NOISE_MULTIPLE * abs(d.diff_pct))
    return floor
