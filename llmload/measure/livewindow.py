"""Live figures over a sliding window: output tok/s from streamed tokens, and TTFT/ITL percentiles.

The terminal's progress line, the web UI's LLM tab (table and charts) and timeseries.jsonl's
``output_tok_s`` all read these, locally and merged from workers, so no two of them disagree.

Why a window over *streamed* tokens, ending at the last *complete* report:

- Closed-loop requests of one length finish in waves. Counting a request's tokens when it ends
  gave a rate that jumped between multiples of (tokens per request / window): the quickstart's
  vLLM read 3,072 then 2,048 tok/s around a true 2,210. Tokens are counted here when their chunks
  arrive (``TokenWindows.add`` on every read), so a wave of endings is no step.
- Each source (the local collector, or one worker) reports its cumulative streamed count at its
  own pace: the local runner is pulled every second, a worker reports every 3 s. A per-interval
  count divided by a 2 s interval read 0 when no report came in it and 1.5x when one did. Here
  each source's count is a curve through its reports (linear between two), and the window ends
  where every live source has reported (the earliest of their last reports), so the count inside
  it is complete: no 0 between reports, no double counting when two arrive together.
- Report times are the receiving process's clock, never a worker's (hosts' clocks differ).

TTFT and ITL came from the requests that ended in the interval, so they came in waves too: a 2 s
interval holding no ending showed ``TTFT p50 -``. Here a stream's TTFT is taken when its first token
arrives (``Collector.first_token``), so it shows from the first token on, long before a 256-token
request ends; ITL is known only when a request ends. Each is over every sample in the window that
ends at the latest report that brought one: in steady load the last ``WINDOW_S`` seconds; when
requests run longer than the window, or between waves, the figures keep their last values instead
of blanking. Histograms merge exactly (histogram.py).
No Locust import.
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field

from llmload.measure.histogram import Histogram
from llmload.measure.metrics import TargetStats

WINDOW_S = 10.0  # the sliding window of the live rate and the live percentiles
BUCKET_S = 1.0  # the live percentiles' samples, merged per this long as they come (_Samples)


@dataclass
class _Counts:
    """One source's cumulative streamed tokens for one target, at its report times."""

    times: list[float] = field(default_factory=list)
    totals: list[int] = field(default_factory=list)

    def add(self, at: float, total: int) -> None:
        if self.times and at <= self.times[-1]:  # two reports at once: the later count stands
            self.totals[-1] = total
            return
        self.times.append(at)
        self.totals.append(total)

    def at(self, t: float) -> float:
        """Tokens received by ``t``: linear between reports, flat before the first and after the last.

        Tokens a source had before its first report are its baseline, never counted in a window.
        """
        ts = self.times
        if t <= ts[0]:
            return float(self.totals[0])
        if t >= ts[-1]:
            return float(self.totals[-1])
        i = bisect.bisect_right(ts, t)
        t0, t1, n0, n1 = ts[i - 1], ts[i], self.totals[i - 1], self.totals[i]
        return n0 + (n1 - n0) * (t - t0) / (t1 - t0)

    def prune(self, before: float) -> None:
        """Drop reports older than ``before``, keeping the last one at or before it."""
        k = bisect.bisect_right(self.times, before) - 1
        if k > 0:
            del self.times[:k], self.totals[:k]


class _Samples:
    """One latency metric of one target: each report's samples, merged by the second it came in,
    over the window that ends at the latest report that brought some (so the figure holds rather
    than blanks). By the second, not by report: merging every report in the window again at each
    tick cost a master of 300 workers a fifth of its CPU (bench/bench_fleet.py, 2026-12-06); the
    window now moves in whole seconds (``BUCKET_S``)."""

    def __init__(self, window_s: float) -> None:
        self.window_s = window_s
        self.buckets: deque[tuple[float, Histogram]] = deque()  # (its second, its reports merged)
        self.taken = 0  # reports taken so far: the merged histogram is rebuilt once per new one
        self._merged: tuple[int, Histogram] | None = None

    def add(self, at: float, h: Histogram) -> None:
        if h.count == 0:
            return
        second = math.floor(at / BUCKET_S) * BUCKET_S
        if not self.buckets or self.buckets[-1][0] != second:
            self.buckets.append((second, Histogram()))
        self.buckets[-1][1].merge(h)
        self.taken += 1
        while self.buckets[0][0] < second - 3 * self.window_s:
            self.buckets.popleft()

    def percentiles_ms(self) -> dict[str, float | None]:
        if self._merged is None or self._merged[0] != self.taken:
            merged, last = Histogram(), self.buckets[-1][0] if self.buckets else 0.0
            for second, h in self.buckets:
                if second > last - self.window_s:
                    merged.merge(h)
            self._merged = (self.taken, merged)
        return self._merged[1].percentiles_ms([50.0, 99.0])


class LiveWindow:
    """Sliding-window live figures of one run, fed with every report merged (``Aggregator.merge``)."""

    def __init__(self, window_s: float = WINDOW_S) -> None:
        self.window_s = window_s
        self._counts: dict[str, dict[str, _Counts]] = {}  # source -> target -> counts
        self._totals: dict[str, dict[str, int]] = {}  # source -> target -> cumulative tokens
        self._last: dict[str, float] = {}  # source -> its last report time
        self._gone: set[str] = set()  # sources that no longer report (lost workers)
        self._ttft: dict[str, _Samples] = {}
        self._itl: dict[str, _Samples] = {}

    def report(
        self,
        source: str,
        at: float,
        streamed: Mapping[str, int],
        stats: Mapping[str, TargetStats] | None = None,
        first_tokens: Mapping[str, Histogram] | None = None,
    ) -> None:
        """A source's report received at ``at``: tokens streamed since its last one, the TTFT of
        each stream whose first token came since, and the ITL of the requests that ended since
        (its interval stats)."""
        self._gone.discard(source)
        self._last[source] = at
        totals = self._totals.setdefault(source, {})
        counts = self._counts.setdefault(source, {})
        for target in set(streamed) | set(totals):
            totals[target] = totals.get(target, 0) + int(streamed.get(target, 0))
            c = counts.setdefault(target, _Counts())
            c.add(at, totals[target])
            c.prune(at - 3 * self.window_s)
        for target, h in (first_tokens or {}).items():
            self._ttft.setdefault(target, _Samples(self.window_s)).add(at, h)
        for target, st in (stats or {}).items():
            self._itl.setdefault(target, _Samples(self.window_s)).add(at, st.histograms["itl"])

    def forget(self, source: str) -> None:
        """A source stopped reporting: what it counted stays, it no longer holds the window back."""
        self._gone.add(source)

    def end(self) -> float | None:
        """Where the window ends: the earliest last report of the sources still reporting."""
        live = [t for s, t in self._last.items() if s not in self._gone]
        if live:
            return min(live)
        return max(self._last.values()) if self._last else None

    def rate(self, target: str) -> float | None:
        """Output tokens/s streamed over the window (shorter in the run's first seconds); None
        before two reports."""
        end = self.end()
        curves = [c[target] for c in self._counts.values() if target in c]
        if end is None or not curves:
            return None
        lo = max(end - self.window_s, min(c.times[0] for c in curves))
        if end - lo <= 0:
            return None
        tokens = sum(c.at(end) - c.at(lo) for c in curves)
        return max(0.0, tokens) / (end - lo)

    def latency(self, target: str) -> dict[str, float | None]:
        """TTFT and ITL p50/p99 (ms), each over the window ending at the latest report with samples."""
        out: dict[str, float | None] = {}
        for name, by_target in (("ttft", self._ttft), ("itl", self._itl)):
            samples = by_target.get(target)
            ps = samples.percentiles_ms() if samples is not None else {"p50": None, "p99": None}
            out[f"{name}_p50_ms"], out[f"{name}_p99_ms"] = ps["p50"], ps["p99"]
        return out
