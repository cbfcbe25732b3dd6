"""Which judged figures rest on a measurement the run flagged, and what to do about it.

The run flags a target's measurement (summary.json ``run.client.flags``, llmload/measure/client_health.py)
when its read stamps cannot fully correct it: ``ttft`` (first tokens stamped late while the client
read late) or ``itl`` (reads that brought several chunks at once: the gaps between them are lost).
A figure computed from that measurement is not known, except where its error has one direction:

===============  ===============  =====  ==========================================================
figure           rests on         reads  why
===============  ===============  =====  ==========================================================
ttft_p99_ms      ttft             high   a flagged first token is stamped late (read late, or at a
                                         later token's arrival), never early
itl_p99_ms       itl              ?      coalesced gaps read 0 and the gap before them takes their time
tpot_p50_ms      ttft             low    (E2E - TTFT) / (output tokens - 1): a late first token shortens it
ttfo_p99_ms      ttft (+ itl)     high   its TTFT without reasoning; with reasoning the first answer
                                         token comes mid-stream, in a read that may be coalesced: late too
min_capacity     every SLO above  ?      a sweep's capacity is the highest level that met them all
decision: TTFT   ttft                    TTFT p50, TTFT p99
decision: ITL    itl                     ITL p99 (per-request mean gap)
===============  ===============  =====  ==========================================================

e2e, error_rate and output tok/s rest on neither (the end of a stream and the counts are exact).
An SLO on a flagged figure is inconclusive (exit 3) unless the scenario sets
``slo: {flagged_figures: judge}`` (llmload/report/judge.py), or its error can only have pushed it
away from the result it gave (``stands``): a TTFT that reads high and still met its bound met it; a
TPOT that reads low and still missed missed it. A decision row on a flagged figure names no winner
(llmload/report/decision.py): a comparison has two sides. The verdict names the figures and says
what to do (``ADVICE``).
"""

from __future__ import annotations

from collections.abc import Iterable

from llmload.config.slo_spec import SloSpec
from llmload.schema.results_model import FigureFlag

SLO_RESTS_ON: dict[str, tuple[str, ...]] = {
    "ttft_p99_ms": ("ttft",),
    "itl_p99_ms": ("itl",),
    "tpot_p50_ms": ("ttft",),
    "ttfo_p99_ms": ("ttft",),  # a block with reasoning: ("ttft", "itl"), see measures_of
}
# which way a flagged measurement can push an SLO's figure (the table above); absent: either way
READS: dict[str, str] = {"ttft_p99_ms": "high", "tpot_p50_ms": "low", "ttfo_p99_ms": "high"}
# the decision summary's figures (decision.COMPARED) and the measurement each rests on
DECISION_RESTS_ON: dict[str, str] = {"ttft_p50": "ttft", "ttft_p99": "ttft", "itl_mean_p99": "itl"}
# compare's figures by metric (report/diffs.py): ttft_p50, itl_mean_p99, ttfo_p99, ...
COMPARE_RESTS_ON: dict[str, tuple[str, ...]] = {
    "ttft": ("ttft",),
    "itl_mean": ("itl",),
    "ttfo": ("ttft", "itl"),
}
ADVICE = "rerun with more load processes (--workers N) or on a quieter host"
FLAGGED_NOTE = (
    "An SLO on a flagged figure (Client health: the read stamps could not fully correct it) is "
    "INCONCLUSIVE, exit 3, unless the scenario sets slo.flagged_figures: judge; " + ADVICE + "."
)
DECISION_FLAGGED_NOTE = (
    "A flagged row rests on a figure the run flagged for one of its targets (Client health): its "
    "values are shown, no winner is named; " + ADVICE + "."
)


def measures_of(key: str, slo: SloSpec, reasoning: bool = False) -> set[str]:
    """The measurements (ttft, itl) an SLO key's figure rests on."""
    if key == "min_capacity":
        return {m for k in slo.figures() for m in measures_of(k, slo, reasoning)}
    if key == "ttfo_p99_ms" and reasoning:
        return {"ttft", "itl"}
    return set(SLO_RESTS_ON.get(key, ()))


def stands(key: str, passed: bool) -> bool:
    """Whether an SLO's result holds whatever its flagged figure's error (every key here is an upper
    bound): met though it reads high, or missed though it reads low."""
    reads = READS.get(key)
    return (reads == "high" and passed) or (reads == "low" and not passed)


def flags_on(flags: Iterable[FigureFlag], target: str, measures: Iterable[str]) -> list[FigureFlag]:
    """The flags of one target among some measurements."""
    wanted = set(measures)
    return [f for f in flags if f.target == target and f.metric in wanted]


def label(flag: FigureFlag) -> str:
    """e.g. ``vllm ITL``."""
    return f"{flag.target} {flag.metric.upper()}"
