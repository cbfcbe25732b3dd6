"""Per-process measurement state, and the run-wide aggregation of it.

``Collector`` lives in every process that sends requests (the local runner, or
each worker): it folds each RequestRecord into exact histograms (per target,
per phase level, and per reporting interval), keeps the request lines, and
hands out *deltas* (``drain()``) that are reset once taken. A worker ships them
to the master in ``report_to_master``; the local runner passes them straight on.

``Aggregator`` lives where results are written (the local runner, or the
master): it merges every delta, so the final figures are exactly the sum of what
every worker measured, and builds the summary. No Locust import here.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from llmload.measure.histogram import Histogram
from llmload.measure.livewindow import LiveWindow
from llmload.measure.metrics import TargetStats
from llmload.measure.records import RequestRecord
from llmload.measure.stamps import ReadStamps
from llmload.measure.throughput import TokenWindows, Window, WindowKey, windows_from_wire

WARMUP = "warmup"


class Collector:
    def __init__(self, targets: list[str], worker: str = "local") -> None:
        self.targets = targets
        self.worker = worker
        self._lock = threading.Lock()  # records may come from the InfluxDB sink's thread too
        self._levels: dict[tuple[str, str], dict[str, TargetStats]] = {}
        self._lines: list[dict[str, Any]] = []
        self.in_flight: dict[str, int] = dict.fromkeys(targets, 0)
        self.users: dict[str, int] = dict.fromkeys(targets, 0)
        self.sent: dict[str, int] = dict.fromkeys(targets, 0)
        self.dropped: dict[str, int] = dict.fromkeys(targets, 0)
        self.delayed: dict[str, int] = dict.fromkeys(targets, 0)
        self.backoffs: dict[str, int] = dict.fromkeys(targets, 0)  # pauses after failures (closed loop)
        self.backoff_s: dict[str, float] = dict.fromkeys(targets, 0.0)
        self.streamed = TokenWindows(targets)  # tokens received, updated per read (never replaced)
        self._streamed_reported: dict[str, int] = dict.fromkeys(targets, 0)
        self.loop_lag = Histogram()
        self._first_tokens: dict[str, Histogram] = {}  # TTFT at the first token, before the request ends
        self.stamps = {t: ReadStamps() for t in targets}  # the target's transports count their reads here
        self.listeners: list[Callable[[RequestRecord], None]] = []

    def started(self, target: str) -> None:
        self.in_flight[target] += 1
        self.sent[target] += 1

    def first_token(self, target: str, ttft_s: float) -> None:
        """A stream's first token arrived ``ttft_s`` after its send: the live TTFT (livewindow.py)."""
        with self._lock:
            h = self._first_tokens.get(target)
            if h is None:
                h = self._first_tokens[target] = Histogram()
            h.record(ttft_s)

    def backoff(self, target: str, seconds: float) -> None:
        self.backoffs[target] += 1
        self.backoff_s[target] += seconds

    def record(self, rec: RequestRecord) -> None:
        t = rec.target
        self.in_flight[t] = max(0, self.in_flight[t] - 1)
        key = (rec.phase, rec.level)
        with self._lock:
            lvl = self._levels.get(key)
            if lvl is None:
                lvl = self._levels[key] = {}
            st = lvl.get(t)
            if st is None:
                st = lvl[t] = TargetStats()
            st.add(rec)
            self.stamps[t].coalesced_reads += rec.coalesced_reads
            self.stamps[t].coalesced_first_tokens += rec.first_coalesced
            self._lines.append(rec.to_json())
        for fn in self.listeners:
            fn(rec)

    def cpu_percent(self) -> float | None:
        """This process's CPU use (% of one core) since the last reading at least 1 s ago.

        Readings closer together than that repeat the previous value: over a few
        milliseconds, the kernel's 10 ms accounting ticks make any percentage noise.
        """
        t = time.monotonic()
        try:
            import os

            cpu = sum(os.times()[:2])
        except OSError:
            return None
        last = getattr(self, "_cpu_last", None)
        if last is None:
            self._cpu_last = (t, cpu)
            self._cpu_value: float | None = None
            return None
        dt = t - last[0]
        if dt >= 1.0:
            self._cpu_value = round(100.0 * (cpu - last[1]) / dt, 1)
            self._cpu_last = (t, cpu)
        return self._cpu_value

    def drain(self) -> dict[str, Any]:
        """Take everything measured since the last drain (and reset it)."""
        with self._lock:
            levels, self._levels = self._levels, {}
            lines, self._lines = self._lines, []
            lag, self.loop_lag = self.loop_lag, Histogram()
            first_tokens, self._first_tokens = self._first_tokens, {}
            stamps = {t: s.take() for t, s in self.stamps.items()}
            dropped, self.dropped = self.dropped, dict.fromkeys(self.targets, 0)
            delayed, self.delayed = self.delayed, dict.fromkeys(self.targets, 0)
            backoffs, self.backoffs = self.backoffs, dict.fromkeys(self.targets, 0)
            backoff_s, self.backoff_s = self.backoff_s, dict.fromkeys(self.targets, 0.0)
            cum = dict(self.streamed.totals)
            streamed = {t: cum.get(t, 0) - self._streamed_reported.get(t, 0) for t in self.targets}
            self._streamed_reported = cum
        return {
            "worker": self.worker,
            "levels": [[ph, lv, {t: s.to_wire() for t, s in d.items()}] for (ph, lv), d in levels.items()],
            "lines": lines,
            "in_flight": dict(self.in_flight),
            "users": dict(self.users),
            "sent": dict(self.sent),
            "dropped": dropped,
            "delayed": delayed,
            "backoffs": backoffs,
            "backoff_s": backoff_s,
            "streamed": streamed,
            "windows": self.streamed.to_wire(),
            "first_tokens": {t: h.to_wire() for t, h in first_tokens.items()},
            "loop_lag": lag.to_wire(),
            "stamps": stamps,
            "cpu": self.cpu_percent(),
            "t": time.time(),
        }


class Aggregator:
    """Merges collector deltas from one or many processes."""

    def __init__(self, targets: list[str], clock: Callable[[], float] = time.time) -> None:
        self.targets = targets
        self.clock = clock  # when a delta is received (never a worker's own clock)
        self.level_order: list[tuple[str, str]] = []
        self.levels: dict[tuple[str, str], dict[str, TargetStats]] = {}
        self.interval: dict[str, TargetStats] = {t: TargetStats() for t in targets}
        self.in_flight: dict[str, dict[str, int]] = {}  # worker -> target -> n
        self.users: dict[str, dict[str, int]] = {}
        self.sent: dict[str, dict[str, int]] = {}
        self.dropped: dict[str, int] = dict.fromkeys(targets, 0)
        self.delayed: dict[str, int] = dict.fromkeys(targets, 0)
        self.backoffs: dict[str, int] = dict.fromkeys(targets, 0)
        self.backoff_s: dict[str, float] = dict.fromkeys(targets, 0.0)
        self.loop_lag = Histogram()
        self.stamps = {t: ReadStamps() for t in targets}
        self.interval_lag = Histogram()
        self.interval_streamed: dict[str, int] = dict.fromkeys(targets, 0)
        self.streamed_total: dict[str, int] = dict.fromkeys(targets, 0)  # every token, windows or not
        self.windows: dict[str, dict[WindowKey, Window]] = {}  # worker -> its cumulative windows
        self.last_seen: dict[str, float] = {}
        self.line_sinks: list[Callable[[list[dict[str, Any]]], None]] = []
        self.lines_total = 0
        self.completed_by_worker: dict[str, dict[str, int]] = {}
        self.lost_unaccounted = 0  # requests lost workers sent but never reported
        self.cpu: dict[str, float] = {}
        self.clocks: dict[str, dict[str, Any]] = {}  # worker -> its clock (clock_offset.py)
        self.live = LiveWindow()  # the live rate and percentiles (progress line, LLM tab, timeseries)

    def merge(self, delta: dict[str, Any]) -> None:
        w = delta["worker"]
        now = self.last_seen[w] = self.clock()
        interval = self._add_levels(delta["levels"])
        for t, st in interval.items():
            self.interval.setdefault(t, TargetStats()).merge(st)
        first = {t: Histogram.from_wire(x) for t, x in delta.get("first_tokens", {}).items()}
        self.live.report(w, now, delta.get("streamed", {}), interval, first)
        self.in_flight[w] = delta["in_flight"]
        self.users[w] = delta["users"]
        self.sent[w] = delta["sent"]
        for t, n in delta.get("dropped", {}).items():
            self.dropped[t] = self.dropped.get(t, 0) + n
        for t, n in delta.get("delayed", {}).items():
            self.delayed[t] = self.delayed.get(t, 0) + n
        for t, n in delta.get("backoffs", {}).items():
            self.backoffs[t] = self.backoffs.get(t, 0) + n
        for t, x in delta.get("backoff_s", {}).items():
            self.backoff_s[t] = self.backoff_s.get(t, 0.0) + x
        for t, n in delta.get("streamed", {}).items():
            self.interval_streamed[t] = self.interval_streamed.get(t, 0) + n
            self.streamed_total[t] = self.streamed_total.get(t, 0) + n
        if "windows" in delta:
            self.windows[w] = windows_from_wire(delta["windows"])
        lag = Histogram.from_wire(delta["loop_lag"])
        self.loop_lag.merge(lag)
        self.interval_lag.merge(lag)
        for t, wire in delta.get("stamps", {}).items():
            self.stamps.setdefault(t, ReadStamps()).merge_wire(wire)
        if delta.get("cpu") is not None:
            self.cpu[w] = float(delta["cpu"])
        if delta.get("clock"):
            self.clocks[w] = delta["clock"]
        lines = delta["lines"]
        if lines:
            self.lines_total += len(lines)
            done = self.completed_by_worker.setdefault(w, {})
            for line in lines:
                done[line["target"]] = done.get(line["target"], 0) + 1
            for sink in self.line_sinks:
                sink(lines)

    def _add_levels(self, levels: list[Any]) -> dict[str, TargetStats]:
        """[phase, level, {target: stats wire}] rows added to each level's figures (in first-seen order).
        Returns what they added per target: the interval's figures, sent once (bench/bench_fleet.py:
        sent again beside the levels, decoding histograms was most of a master's cost per report)."""
        added: dict[str, TargetStats] = {}
        for ph, lv, d in levels:
            if (ph, lv) not in self.levels:
                self.levels[(ph, lv)] = {}
                self.level_order.append((ph, lv))
            for t, wire in d.items():
                st = TargetStats.from_wire(wire)
                self.levels[(ph, lv)].setdefault(t, TargetStats()).merge(st)
                if t in added:  # two levels' rows: a step changed within the interval
                    added[t].merge(st)
                else:
                    added[t] = st
        return added

    def saved(self) -> dict[str, Any]:
        """Everything the run's figures are built from, as JSON data (aggregate.json): each shard of a
        sharded run saves it, and ``restore`` adds shards together exactly as ``merge`` adds workers."""
        return {
            "targets": list(self.targets),
            "levels": [
                [ph, lv, {t: s.to_wire() for t, s in self.levels[(ph, lv)].items()}]
                for ph, lv in self.level_order
            ],
            "dropped": self.dropped,
            "delayed": self.delayed,
            "backoffs": self.backoffs,
            "backoff_s": self.backoff_s,
            "streamed_total": self.streamed_total,
            "windows": {w: [[*k, *x.to_wire()] for k, x in ws.items()] for w, ws in self.windows.items()},
            "loop_lag": self.loop_lag.to_wire(),
            "stamps": {t: s.to_wire() for t, s in self.stamps.items()},
            "last_seen": self.last_seen,
            "lost_unaccounted": self.lost_unaccounted,
            "cpu": self.cpu,
            "clocks": self.clocks,
        }

    def restore(self, saved: dict[str, Any]) -> None:
        """Add a shard's ``saved()``; workers of two shards that share a name ("local") add windows."""
        self._add_levels(saved["levels"])
        for mine, theirs in (
            (self.dropped, saved["dropped"]),
            (self.delayed, saved["delayed"]),
            (self.backoffs, saved["backoffs"]),
            (self.backoff_s, saved["backoff_s"]),
            (self.streamed_total, saved["streamed_total"]),
        ):
            for t, n in theirs.items():
                mine[t] = mine.get(t, 0) + n
        for w, rows in saved["windows"].items():
            ws = self.windows.setdefault(w, {})
            for wkey, x in windows_from_wire(rows).items():
                if wkey in ws:
                    ws[wkey].merge(x)
                else:
                    ws[wkey] = x
        self.loop_lag.merge(Histogram.from_wire(saved["loop_lag"]))
        for t, wire in saved["stamps"].items():
            self.stamps.setdefault(t, ReadStamps()).merge_wire(wire)
        for w, seen in saved["last_seen"].items():
            self.last_seen[w] = max(seen, self.last_seen.get(w, seen))
        self.lost_unaccounted += int(saved["lost_unaccounted"])
        self.cpu.update(saved["cpu"])
        self.clocks.update(saved.get("clocks", {}))

    def forget_worker(self, worker: str) -> None:
        """A lost worker's streams are no longer in flight, nor waited for."""
        self.in_flight.pop(worker, None)
        self.live.forget(worker)
        self.users.pop(worker, None)
        self.cpu.pop(worker, None)
        sent = self.sent.pop(worker, None) or {}
        done = self.completed_by_worker.get(worker, {})
        self.lost_unaccounted += sum(max(0, n - done.get(t, 0)) for t, n in sent.items())

    def target_windows(self, target: str, level: tuple[str, str] | None = None) -> list[Window]:
        """The target's measurement windows merged over every worker (one level, or all of them)."""
        merged: dict[WindowKey, Window] = {}
        for ws in self.windows.values():
            for key, w in ws.items():
                if key[0] != target or (level is not None and key[1:] != level):
                    continue
                if key in merged:
                    merged[key].merge(w)
                else:
                    merged[key] = Window.from_wire(w.to_wire())
        return list(merged.values())

    def completed_by(self, worker: str, target: str) -> int:
        return self.completed_by_worker.get(worker, {}).get(target, 0)

    def worker_cpu(self) -> list[float]:
        return list(self.cpu.values())

    def take_interval(self) -> tuple[dict[str, TargetStats], Histogram, dict[str, int]]:
        iv, self.interval = self.interval, {t: TargetStats() for t in self.targets}
        lag, self.interval_lag = self.interval_lag, Histogram()
        streamed, self.interval_streamed = self.interval_streamed, dict.fromkeys(self.targets, 0)
        return iv, lag, streamed

    def total_in_flight(self, target: str) -> int:
        return sum(d.get(target, 0) for d in self.in_flight.values())

    def total_users(self, target: str) -> int:
        return sum(d.get(target, 0) for d in self.users.values())

    def total_sent(self, target: str) -> int:
        """Requests sent by the workers still reporting (a lost worker's are no longer awaited)."""
        return sum(d.get(target, 0) for d in self.sent.values())

    def completed_live(self, target: str) -> int:
        return sum(d.get(target, 0) for w, d in self.completed_by_worker.items() if w in self.sent)

    def window(self, exclude_warmup: bool = True) -> dict[str, TargetStats]:
        out = {t: TargetStats() for t in self.targets}
        for (_, lv), d in self.levels.items():
            if exclude_warmup and lv == WARMUP:
                continue
            for t, st in d.items():
                out.setdefault(t, TargetStats()).merge(st)
        return out

    def completed(self, target: str) -> int:
        return sum(d[target].requests for d in self.levels.values() if target in d)

    def failed(self) -> int:
        return sum(st.failures for d in self.levels.values() for st in d.values())
