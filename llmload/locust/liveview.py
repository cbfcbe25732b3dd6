"""The LLM tab's figures: live per-target rows from llmload's exact measurements, and their CSV.

``LiveView`` listens to a Conductor's Aggregator (request lines merged from every worker) and its
interval rows; once the test stops it shows the final ``summary.json`` figures. Output tok/s, TTFT
and ITL are the live sliding window's (llmload/measure/livewindow.py: streamed tokens, TTFT at each first
token; the same figures as the progress line); req/s and TPOT come from the request lines that ended in the last WINDOW_S
seconds. Its charts' series are livecharts.py's. No Flask here: llmload/locust/webui.py serves them.
"""

from __future__ import annotations

import csv
import io
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from llmload.locust.livecharts import ChartSeries
from llmload.measure.histogram import percentile
from llmload.measure.livewindow import WINDOW_S
from llmload.measure.metrics import TargetStats
from llmload.measure.records import FAILURE_CLASSES
from llmload.measure.runstate import Aggregator
from llmload.schema.results_model import Summary, TargetBlock, latency

# req/s and TPOT: the requests that ended in the last WINDOW_S seconds (as the live window's)
CUT: Final = "aborted"  # a stream llmload cut itself (Stop, a signal, stop_grace): the "Cut by Stop" column
SHOWN_FAILURES = tuple(c for c in FAILURE_CLASSES if c != CUT)  # the Failures column's classes
KEEP_S = 60.0  # request lines kept per target (older ones are dropped)

# (key, title): the table's columns, in order; the CSV uses the same keys.
COLUMNS: list[tuple[str, str]] = [
    ("target", "Target"),
    ("engine", "Engine"),  # the target's kind, or "simulated engine (profile X)" (locust/webui_hooks.py)
    ("users", "Users"),
    ("in_flight", "Streams in flight"),
    ("requests", "Requests"),
    ("req_s", "Req/s"),
    ("output_tok_s", "Output tok/s"),
    ("ttft_p50_ms", "TTFT p50 (ms)"),
    ("ttft_p99_ms", "TTFT p99 (ms)"),
    ("itl_p50_ms", "ITL p50 (ms)"),
    ("itl_p99_ms", "ITL p99 (ms)"),
    ("tpot_p50_ms", "TPOT p50 (ms)"),
    ("failures", "Failures"),
    ("failures_by_class", "Failures by class"),
    ("cut", "Cut by Stop"),  # streams llmload cut when the test stopped (status aborted): no failure
    ("loop_lag_p99_ms", "Loop lag p99 (ms)"),
]


class LiveView:
    """The live figures of one run, fed by the Conductor's aggregator and its interval loop.

    It is a line sink (``Aggregator.line_sinks``: every request line merged, from any worker) and
    an interval sink (``Conductor.sinks``: the per-target row of each reporting interval).
    """

    def __init__(
        self, targets: list[str], delivery_delay_s: float, clock: Callable[[], float] = time.time
    ) -> None:
        self.targets = list(targets)
        self.clock = clock  # wall clock (request lines carry epoch times)
        self.delay_s = delivery_delay_s  # how late request lines reach the aggregator
        self._recent: dict[str, deque[tuple[float, dict[str, Any]]]] = {  # (end time, line)
            t: deque() for t in self.targets
        }
        self.last_interval: dict[str, dict[str, Any]] = {}
        self.first_start: float | None = None  # earliest request start seen (rates before W seconds)
        self.final: list[dict[str, Any]] | None = None  # set when the run's summary is written
        self.charts: ChartSeries | None = None  # the tab's charts (set by Conductor.live_view)

    @classmethod
    def attached(cls, agg: Aggregator, distributed: bool, results_dir: Path) -> tuple[LiveView, ChartSeries]:
        """A view fed by ``agg``'s request lines, and its charts: both to be fed each interval and event."""
        # Workers report every 3 s (Locust's WORKER_REPORT_INTERVAL); the local runner pulls every 1 s.
        view = cls(list(agg.targets), 4.0 if distributed else 1.5)
        view.charts = ChartSeries(agg, view.targets, results_dir / "telemetry.jsonl")
        agg.line_sinks.append(view.lines)
        return view, view.charts

    def finish(self, summary: Summary) -> None:
        """From now on the table shows the run's final figures (summary.json, warm-up excluded)."""
        self.final = rows_from_summary(summary, self.targets)

    # --- sinks ------------------------------------------------------------------------
    def lines(self, lines: list[dict[str, Any]]) -> None:
        now = self.clock()
        for line in lines:
            q = self._recent.get(line["target"])
            if q is None:
                continue
            start = float(line.get("start_time") or now)
            if self.first_start is None or start < self.first_start:
                self.first_start = start
            end = start + float(line.get("e2e_ms") or 0.0) / 1000.0
            q.append((end, line))
        self._prune(now)

    def interval(self, row: dict[str, Any]) -> None:
        self.last_interval[row["target"]] = row

    def event(self, kind: str, text: str) -> None:
        pass

    def _prune(self, now: float) -> None:
        for q in self._recent.values():
            while q and q[0][0] < now - KEEP_S:  # arrival order: roughly end order
                q.popleft()

    # --- rows -------------------------------------------------------------------------------
    def window_stats(self, target: str, now: float) -> dict[str, Any]:
        """Req/s and TPOT over the requests that ended in [now-delay-W, now-delay]."""
        hi = now - self.delay_s
        lo = hi - WINDOW_S
        span = max(1.0, hi - max(lo, self.first_start or lo))  # the first seconds of a run
        done = [ln for end, ln in self._recent.get(target, ()) if lo < end <= hi]
        ok = [ln for ln in done if ln.get("status") == "ok"]
        tpot = [ln["tpot_ms"] for ln in ok if ln.get("tpot_ms") is not None]
        return {"req_s": len(done) / span, "tpot_p50_ms": percentile(tpot, 50)}

    def rows(self, agg: Aggregator, now: float | None = None) -> list[dict[str, Any]]:
        if self.final is not None:
            return self.final
        now = self.clock() if now is None else now
        self._prune(now)
        by_class: dict[str, dict[str, int]] = {t: {} for t in self.targets}
        for d in agg.levels.values():
            for t, st in d.items():
                if t in by_class:
                    for c, n in st.by_class.items():
                        if n and c in FAILURE_CLASSES:
                            by_class[t][c] = by_class[t].get(c, 0) + n
        cut = {t: fails.pop(CUT, 0) for t, fails in by_class.items()}
        window = agg.window(exclude_warmup=False)
        out = []
        for t in self.targets:
            last = self.last_interval.get(t, {})
            win = self.window_stats(t, now)
            rate = agg.live.rate(t)
            lat = agg.live.latency(t)
            fails = by_class[t]
            out.append(
                {
                    "target": t,
                    "users": agg.total_users(t),
                    "in_flight": agg.total_in_flight(t),
                    "requests": agg.completed(t),
                    "req_s": round(win["req_s"], 3),
                    "output_tok_s": None if rate is None else round(rate, 1),
                    "ttft_p50_ms": lat["ttft_p50_ms"],
                    "ttft_p99_ms": lat["ttft_p99_ms"],
                    "itl_p50_ms": lat["itl_p50_ms"],
                    "itl_p99_ms": lat["itl_p99_ms"],
                    "tpot_p50_ms": win["tpot_p50_ms"],
                    "failures": sum(fails.values()),
                    "failures_by_class": dict(sorted(fails.items())),
                    "cut": cut[t],
                    "loop_lag_p99_ms": last.get("loop_lag_p99_ms"),
                    **_reasoning_live(window.get(t)),
                    **_answers_live(window.get(t)),
                }
            )
        return out


def _reasoning_live(st: TargetStats | None) -> dict[str, Any]:
    """A target's reasoning figures so far (warm-up included), only when it streamed reasoning."""
    if st is None or not st.has_reasoning:
        return {}
    ttfo = st.histograms["ttfo"].summary_ms()
    return {
        "ttfo_p50_ms": ttfo["p50"],
        "ttfo_p99_ms": ttfo["p99"],
        "reasoning_tokens": st.reasoning_tokens,
        "answer_tokens": st.answer_tokens,
        "no_answer": st.by_class.get("no_answer", 0),
    }


def reasoning_line(rows: list[dict[str, Any]]) -> str:
    """The LLM tab's reasoning line (docs/webui.md), '' when no target streamed reasoning."""
    parts = []
    for r in rows:
        if "reasoning_tokens" not in r:
            continue
        ttfo = "-" if r["ttfo_p50_ms"] is None else f"{r['ttfo_p50_ms']:,.0f}"
        parts.append(
            f"{r['target']}: TTFO p50 {ttfo} ms, reasoning {r['reasoning_tokens']:,} / "
            f"answer {r['answer_tokens']:,} tok, no answer {r['no_answer']}"
        )
    return ("reasoning: " + "; ".join(parts)) if parts else ""


def _answers_live(st: TargetStats | None) -> dict[str, Any]:
    """Answers judged so far (warm-up included), only when some were (JSON, tool calls)."""
    if st is None or not (st.answers_checked or st.tool_calls):
        return {}
    return {
        "answers_checked": st.answers_checked,
        "answers_valid": st.answers_valid,
        "tool_calls": st.tool_calls,
    }


def answers_line(rows: list[dict[str, Any]]) -> str:
    """The LLM tab's answers and goodput line (docs/webui.md), '' when neither is in the rows."""
    parts = []
    for r in rows:
        bits = []
        if "answers_checked" in r:
            bits.append(
                f"{r['answers_valid']:,}/{r['answers_checked']:,} answers valid, {r['tool_calls']:,} tool calls"
            )
        if r.get("goodput_req_s") is not None:
            bits.append(f"goodput {r['goodput_req_s']:,.2f} req/s")
        if bits:
            parts.append(f"{r['target']}: {', '.join(bits)}")
    return ("answers: " + "; ".join(parts)) if parts else ""


def rows_from_summary(summary: Summary, targets: list[str]) -> list[dict[str, Any]]:
    """The table's rows for a finished run: summary.json's figures (docs/results.md)."""
    out = []
    for t in targets:
        s = summary.targets.get(t)
        if s is None:
            continue
        lat, thr = s.latency_ms, s.throughput
        fails = {c: n for c, n in s.requests.by_class.items() if n and c in SHOWN_FAILURES}
        out.append(
            {
                "target": t,
                "users": 0,
                "in_flight": 0,
                "requests": s.requests.sent,
                "req_s": thr.req_s,
                "output_tok_s": thr.output_tok_s,
                "ttft_p50_ms": lat["ttft"].p50,
                "ttft_p99_ms": lat["ttft"].p99,
                "itl_p50_ms": lat["itl"].p50,
                "itl_p99_ms": lat["itl"].p99,
                "tpot_p50_ms": lat["tpot"].p50,
                "failures": sum(fails.values()),
                "failures_by_class": dict(sorted(fails.items())),
                "cut": s.requests.by_class.get(CUT, 0),
                "loop_lag_p99_ms": summary.run.client.loop_lag_ms.p99,
                **_reasoning_final(s),
                **_answers_final(s),
            }
        )
    return out


def _reasoning_final(s: TargetBlock) -> dict[str, Any]:
    r = s.tokens.reasoning
    if r is None:
        return {}
    ttfo = latency(s, "ttfo")
    return {
        "ttfo_p50_ms": ttfo.p50,
        "ttfo_p99_ms": ttfo.p99,
        "reasoning_tokens": r.reasoning,
        "answer_tokens": r.answer,
        "no_answer": s.requests.by_class.get("no_answer", 0),
    }


def _answers_final(s: TargetBlock) -> dict[str, Any]:
    a = s.requests.answers
    out: dict[str, Any] = {}
    if a is not None:
        out = {"answers_checked": a.checked, "answers_valid": a.valid, "tool_calls": a.tool_calls}
    if s.goodput_req_s is not None:
        out["goodput_req_s"] = s.goodput_req_s
    return out


# --- presentation ----------------------------------------------------------------------------
def _cell(key: str, value: Any) -> Any:
    if value is None:
        return ""
    if key == "failures_by_class":
        return ", ".join(f"{c} {n}" for c, n in value.items())
    if isinstance(value, float):
        return round(value, 1) if abs(value) >= 10 else round(value, 2)
    return value


def display_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows for Locust's table: rounded numbers, '' for no data, failures as 'class n, ...'."""
    out = []
    for r in rows:
        d = {k: _cell(k, r.get(k)) for k, _ in COLUMNS}
        d["name"] = r["target"]  # Locust's table keys its rows on "name"
        out.append(d)
    return out


def to_csv(rows: list[dict[str, Any]]) -> str:
    """The LLM table as CSV: full precision, failures by class as one column per class."""
    keys = [k for k, _ in COLUMNS if k != "failures_by_class"]
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(keys + [f"failures_{c}" for c in SHOWN_FAILURES])
    for r in rows:
        fails = r.get("failures_by_class") or {}
        w.writerow(
            ["" if r.get(k) is None else r.get(k) for k in keys] + [fails.get(c, 0) for c in SHOWN_FAILURES]
        )
    return buf.getvalue()


# Added to the index page: a caption and a CSV link above the LLM table (Locust's extended tabs
# render a bare table). Plain DOM, re-applied when React re-renders the tab.
