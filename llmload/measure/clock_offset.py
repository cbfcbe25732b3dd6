"""A worker's wall clock against its master's, measured NTP-style, and its reports put on the master's.

    est = ClockOffset()
    est.sample(t0, t1, t3)       # worker sent at t0 (its clock), master stamped t1 (its clock), reply at t3
    est.offset_s                 # master - worker, from the round trip with the least delay
    master_t = local_t + est.offset_s

A round trip cannot tell where in it the master read its clock, only that it was between the send
and the reply: the offset is ``t1 - (t0 + t3) / 2`` within ``(t3 - t0) / 2`` (the uncertainty), for
any split of the delay between the two ways. Of the last samples the one with the least round trip
is kept (NTP's clock filter): a busy host lengthens some round trips, and those are the ones it
drops. A worker converts the master's step times to its own clock (its arrival schedule lands on
the master's timeline) and its records' wall times to the master's (``shifted``), so the master
merges one timeline whatever the hosts' clocks say. docs/distributed.md "Clocks".
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

KEEP = 16  # round trips the filter chooses from (a periodic probe ages the oldest out)
BOUND_MS = 1.0  # workers whose corrected clocks may differ by more than this are said to in the summary


@dataclass
class ClockOffset:
    samples: deque[tuple[float, float]] = field(default_factory=lambda: deque(maxlen=KEEP))  # (rtt, offset)
    taken: int = 0  # every round trip, kept or aged out
    worst_used: float = 0.0  # the largest uncertainty of the estimate when a time was moved with it
    blind_uses: int = 0  # times moved before the first round trip came back (offset 0, bound unknown)

    def sample(self, t0: float, t1: float, t3: float) -> None:
        if t3 < t0:  # the worker's clock stepped back during the round trip: nothing can be said
            return
        self.samples.append((t3 - t0, t1 - (t0 + t3) / 2))
        self.taken += 1

    @property
    def offset_s(self) -> float:
        """Master minus worker, seconds (0 before the first round trip)."""
        return min(self.samples)[1] if self.samples else 0.0

    @property
    def uncertainty_s(self) -> float | None:
        return min(self.samples)[0] / 2 if self.samples else None

    def use(self) -> float:
        """The offset, to move a time with now: what the figures carry is the worst such use's bound
        (an early estimate from a round trip the start of the load slowed may later be bettered)."""
        unc = self.uncertainty_s
        if unc is None:
            self.blind_uses += 1
        else:
            self.worst_used = max(self.worst_used, unc)
        return self.offset_s

    def to_wire(self) -> dict[str, Any] | None:
        if not self.samples:
            return None
        return {
            "offset_ms": round(self.offset_s * 1000, 3),
            "uncertainty_ms": round((self.uncertainty_s or 0.0) * 1000, 3),
            "used_uncertainty_ms": round(self.worst_used * 1000, 3),
            "unmeasured_uses": self.blind_uses,
            "samples": self.taken,
        }


def shifted(delta: dict[str, Any], offset_s: float) -> dict[str, Any]:
    """A collector delta (runstate.Collector.drain) with every wall time moved onto the master's
    clock: request lines' start and intended times, the measurement windows' edges, the drain's time."""
    if not offset_s:
        return delta
    for line in delta["lines"]:
        line["start_time"] = round(line["start_time"] + offset_s, 6)
        if line.get("intended_time") is not None:
            line["intended_time"] = round(line["intended_time"] + offset_s, 6)
    for row in delta["windows"]:  # [target, phase, level, opened, closed, first, last, ...]
        for i in (3, 4, 5, 6):
            if row[i] is not None:
                row[i] += offset_s
    delta["t"] += offset_s
    return delta


def disagreement(clocks: dict[str, dict[str, Any]]) -> str | None:
    """The summary's note when the workers' clocks, as corrected, may differ by more than BOUND_MS:
    the spread of their raw offsets, and the largest uncertainty any moved time carried."""
    if not clocks:
        return None
    offsets = [c["offset_ms"] for c in clocks.values()]
    worst = max(clocks, key=lambda w: clocks[w].get("used_uncertainty_ms", clocks[w]["uncertainty_ms"]))
    unc = clocks[worst].get("used_uncertainty_ms", clocks[worst]["uncertainty_ms"])
    blind = sorted(w for w, c in clocks.items() if c.get("unmeasured_uses"))
    spread = max(offsets) - min(offsets)
    said = f"worker clocks differed from the master's by {min(offsets):+.3f} to {max(offsets):+.3f} ms"
    if blind:
        return (
            f"{said}; {', '.join(worker_name(w) for w in blind)} placed times before its first round trip "
            "to the master came back: those are on its own clock"
        )
    if unc <= BOUND_MS and spread <= BOUND_MS:
        return None
    if unc <= BOUND_MS:
        return f"{said}: corrected (schedules and times on the master's clock, each within {unc:.3f} ms)"
    return (
        f"{said}; {worker_name(worst)}'s was known within {unc:.3f} ms only (bound {BOUND_MS:g} ms): "
        "arrival times across workers are that uncertain (a slow or busy link to the master)"
    )


def worker_name(w: str) -> str:
    return w if len(w) <= 40 else w[:37] + "..."
