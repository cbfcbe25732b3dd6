"""What the words and columns of capacity.html and capacity.md mean, written once for both pages
(docs/capacity.md says the same).

Measured before (issue 29): "marginal pass" was printed and never defined, and a probe asked at
41.5 req/s showed "sent/s 47.74" with no word on why (see ``sent/s``: the short probe's chance, and a
0.1 s miscount since fixed in llmload/results/summary.py).
"""

from __future__ import annotations

DEFINITIONS: tuple[tuple[str, str], ...] = (
    (
        "capacity",
        "the highest load that passed every time it was probed, below the lowest load that ever failed.",
    ),
    (
        "interval",
        "from the highest load that passed clearly (and never failed) to the lowest that failed clearly "
        "(and never passed): the search's step and each probe's sampling error are inside it; "
        "'open' where no probe closed that side.",
    ),
    (
        "breaks",
        "the shaded band of each chart: from the capacity to the lowest load above it that failed, "
        "where the search saw the engine go from meeting its SLOs to missing one.",
    ),
    (
        "pass",
        "the probe met every SLO, and each figure's one-sided 95% bound is inside its SLO too "
        "(order statistics for a percentile, Wilson bounds for the error rate).",
    ),
    (
        "marginal pass",
        "the probe met every SLO on its measured figures, but some figure's 95% bound crosses its SLO: "
        "the probe had too few requests to be sure (a p99 needs at least 299 measured requests before "
        "it can pass clearly) or its figure sits too close to the line. It counts as a pass for the "
        "capacity, but cannot close the interval.",
    ),
    (
        "fail",
        "some figure missed its SLO, and its 95% bound is beyond the SLO too; a marginal fail missed "
        "on the measured figure only. Both count as failed.",
    ),
    (
        "ended early",
        "load.stop_on_slo_miss ended the probe once its requests could no longer meet an SLO, "
        "whatever the rest did: a probe that ended early never passed.",
    ),
    ("requests", "requests the probe sent, its warm-up included."),
    (
        "sent/s",
        "the probe's measured requests (after its warm-up) over the time from the warm-up's end to "
        "the end of its arrival schedule, or to its early end. Arrivals are random (a Poisson process "
        "with the probe's total count fixed), so the share that falls after the warm-up varies by "
        "chance: over a full probe sent/s is within a few % of the asked rate, while a probe that "
        "ended early after a few seconds can read 5-15% off it (at 41.5 asked: 44 requests in 1.0 s "
        "read 43.8, 139 in 3.0 s read 46.3). Before issue 29, sent/s also counted the requests of the 0.1 s between the run's "
        "start and its first step in the level but not in its time, and that probe read 48.7.",
    ),
    ("output tok/s", "output tokens per second over the probe's measurement window."),
    ("TPOT p50 ms", "the median request's time per output token after its first."),
    (
        "results",
        "the probe's own results directory (summary.json, requests.jsonl, events.jsonl) and its "
        "console log; the links are relative, so they work wherever the capacity directory is moved.",
    ),
)
