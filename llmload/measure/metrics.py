"""Per-target statistics: what llmload measures for one target over one window.

Latency histograms (llmload/measure/histogram.py) per metric, requests by status class, token counts and
the window's first start and last end; mergeable, and shipped between processes as wire dicts.

No Locust import here: this module is shared by the client, the workers, the master and the
report layer.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from llmload.measure.histogram import Histogram
from llmload.measure.records import FAILURE_CLASSES, STATUS_CLASSES, RequestRecord

LATENCY_METRICS: tuple[str, ...] = (
    "ttft",
    "itl",
    "itl_per_token",
    "tpot",
    "e2e",
    "ttft_from_intended",
    "e2e_from_intended",
    "schedule_lag",
    "ttfo",
    "itl_reasoning",
    "itl_answer",
    "tpot_reasoning",
    "tpot_answer",
)
# Reasoning models' figures (docs/metrics.md): in a block only when the window had reasoning tokens.
# TTFO is recorded for every successful request (without reasoning it is the TTFT).
REASONING_METRICS: tuple[str, ...] = ("ttfo", "itl_reasoning", "itl_answer", "tpot_reasoning", "tpot_answer")
_OPEN_LOOP = frozenset(("ttft_from_intended", "e2e_from_intended", "schedule_lag"))


@dataclass
class TargetStats:
    """Everything llmload measures for one target over one window (interval, level or run)."""

    histograms: dict[str, Histogram] = field(
        default_factory=lambda: {m: Histogram() for m in LATENCY_METRICS}
    )
    by_class: dict[str, int] = field(default_factory=lambda: dict.fromkeys(STATUS_CLASSES, 0))
    prompt_tokens: int = 0  # from the server's usage
    prompt_tokens_client: int = 0  # llmload's own count of the prompt text it sent
    output_tokens: int = 0
    output_tokens_approx: bool = False
    reasoning_tokens: int = 0  # of output_tokens
    answer_tokens: int = 0  # of output_tokens, requests with reasoning only
    reasoning_tokens_approx: bool = False  # some came from chunk kinds, not the server's usage
    reasoning_requests: int = 0  # requests that streamed reasoning
    answers_checked: int = 0  # answers judged against an asked-for shape (JSON, tool call)
    answers_valid: int = 0  # of which usable (llmload/config/answer_check.py)
    tool_calls: int = 0  # tool calls streamed
    turns: int = 0  # agent turns (llmload/locust/sessions.py); sessions are its turns 0
    sessions: int = 0
    session_ends: dict[str, int] = field(default_factory=dict)  # answered | rounds | failed
    tool_wait_s: float = 0.0  # time in the tool between turns (not in any latency)
    first_start: float | None = None  # epoch of the earliest request start seen
    last_end: float | None = None  # epoch of the latest request end seen

    def add(self, rec: RequestRecord) -> None:
        h = self.histograms
        self.by_class[rec.status] = self.by_class.get(rec.status, 0) + 1
        if rec.prompt_tokens:
            self.prompt_tokens += rec.prompt_tokens
        self.prompt_tokens_client += rec.prompt_tokens_client
        self.output_tokens += rec.output_tokens
        if rec.output_tokens_approx:
            self.output_tokens_approx = True
        if self.first_start is None or rec.start_time < self.first_start:
            self.first_start = rec.start_time
        end = rec.start_time + (rec.e2e_s or 0.0)
        if self.last_end is None or end > self.last_end:
            self.last_end = end
        lag = rec.schedule_lag_s
        if lag is not None:
            h["schedule_lag"].record(lag)
        if rec.has_reasoning:
            self._add_reasoning(rec)
        if rec.answer_check is not None:
            self.answers_checked += 1
            self.answers_valid += rec.answer_valid is True
        self.tool_calls += rec.tool_calls
        if rec.turn is not None:
            self._add_turn(rec)
        if not rec.ok:
            return
        if rec.ttfo_s is not None:
            h["ttfo"].record(rec.ttfo_s)
        if rec.ttft_s is not None:
            h["ttft"].record(rec.ttft_s)
            if lag is not None:
                h["ttft_from_intended"].record(rec.ttft_s + lag)
        if rec.e2e_s is not None:
            h["e2e"].record(rec.e2e_s)
            if lag is not None:
                h["e2e_from_intended"].record(rec.e2e_s + lag)
        tpot = rec.tpot_s
        if tpot is not None:
            h["tpot"].record(tpot)
        h["itl"].record_all(rec.itl_s)
        if rec.itl_tokens:
            itl_pt = h["itl_per_token"]
            for gap, k in zip(rec.itl_s, rec.itl_tokens, strict=False):
                if k > 0:
                    itl_pt.record(gap / k)

    def _add_reasoning(self, rec: RequestRecord) -> None:
        self.reasoning_requests += 1
        self.reasoning_tokens += rec.reasoning_tokens
        self.answer_tokens += rec.answer_tokens
        if rec.reasoning_tokens_source != "usage":
            self.reasoning_tokens_approx = True
        if not rec.ok:
            return
        h = self.histograms
        for name, x in (("tpot_reasoning", rec.reasoning_tpot_s), ("tpot_answer", rec.answer_tpot_s)):
            if x is not None:
                h[name].record(x)
        reasoning_gaps, answer_gaps = rec.phase_gaps()
        for name, gaps in (("itl_reasoning", reasoning_gaps), ("itl_answer", answer_gaps)):
            h[name].record_all(gaps)

    def _add_turn(self, rec: RequestRecord) -> None:
        self.turns += 1
        self.sessions += rec.turn == 0
        self.tool_wait_s += rec.tool_wait_s
        if rec.session_end is not None:
            self.session_ends[rec.session_end] = self.session_ends.get(rec.session_end, 0) + 1

    @property
    def has_reasoning(self) -> bool:
        return self.reasoning_requests > 0

    @property
    def requests(self) -> int:
        return sum(self.by_class.values())

    @property
    def ok(self) -> int:
        return self.by_class.get("ok", 0)

    @property
    def failures(self) -> int:
        return sum(self.by_class.get(c, 0) for c in FAILURE_CLASSES)

    def merge(self, other: TargetStats) -> None:
        for m, hist in other.histograms.items():
            self.histograms.setdefault(m, Histogram()).merge(hist)
        for c, n in other.by_class.items():
            self.by_class[c] = self.by_class.get(c, 0) + n
        self.prompt_tokens += other.prompt_tokens
        self.prompt_tokens_client += other.prompt_tokens_client
        self.output_tokens += other.output_tokens
        self.output_tokens_approx = self.output_tokens_approx or other.output_tokens_approx
        self.reasoning_tokens += other.reasoning_tokens
        self.answer_tokens += other.answer_tokens
        self.reasoning_tokens_approx = self.reasoning_tokens_approx or other.reasoning_tokens_approx
        self.reasoning_requests += other.reasoning_requests
        self.answers_checked += other.answers_checked
        self.answers_valid += other.answers_valid
        self.tool_calls += other.tool_calls
        self.turns += other.turns
        self.sessions += other.sessions
        self.tool_wait_s += other.tool_wait_s
        for k, n in other.session_ends.items():
            self.session_ends[k] = self.session_ends.get(k, 0) + n
        if other.first_start is not None and (
            self.first_start is None or other.first_start < self.first_start
        ):
            self.first_start = other.first_start
        if other.last_end is not None and (self.last_end is None or other.last_end > self.last_end):
            self.last_end = other.last_end

    def to_wire(self) -> dict[str, Any]:
        out = {
            "h": {m: hist.to_wire() for m, hist in self.histograms.items() if hist.count},
            "c": {c: n for c, n in self.by_class.items() if n},
            "pt": self.prompt_tokens,
            "pc": self.prompt_tokens_client,
            "ot": self.output_tokens,
            "oa": self.output_tokens_approx,
            "fs": self.first_start,
            "le": self.last_end,
        }
        if self.reasoning_requests:
            out["r"] = [self.reasoning_requests, self.reasoning_tokens, self.answer_tokens]
            out["ra"] = self.reasoning_tokens_approx
        if self.answers_checked or self.tool_calls:
            out["a"] = [self.answers_checked, self.answers_valid, self.tool_calls]
        if self.turns:
            out["s"] = [self.turns, self.sessions, self.tool_wait_s, self.session_ends]
        return out

    @classmethod
    def from_wire(cls, d: dict[str, Any]) -> TargetStats:
        ts = cls()
        for m, data in d.get("h", {}).items():
            ts.histograms[m] = Histogram.from_wire(data)
        for c, n in d.get("c", {}).items():
            ts.by_class[c] = ts.by_class.get(c, 0) + n
        ts.prompt_tokens = d.get("pt", 0)
        ts.prompt_tokens_client = d.get("pc", 0)
        ts.output_tokens = d.get("ot", 0)
        ts.output_tokens_approx = bool(d.get("oa", False))
        if "r" in d:
            ts.reasoning_requests, ts.reasoning_tokens, ts.answer_tokens = d["r"]
            ts.reasoning_tokens_approx = bool(d.get("ra", False))
        if "a" in d:
            ts.answers_checked, ts.answers_valid, ts.tool_calls = d["a"]
        if "s" in d:
            ts.turns, ts.sessions, ts.tool_wait_s, ends = d["s"]
            ts.session_ends = dict(ends)
        ts.first_start = d.get("fs")
        ts.last_end = d.get("le")
        return ts

    def latency_block(self) -> dict[str, Any]:
        """The summary.json latency_ms block (open-loop metrics only when present)."""
        out: dict[str, Any] = {}
        for m in LATENCY_METRICS:
            hist = self.histograms.get(m) or Histogram()
            if m in REASONING_METRICS and not self.has_reasoning:
                continue  # a run without reasoning shows what it always showed
            if m in _OPEN_LOOP and hist.count == 0:
                continue
            out[m] = hist.summary_ms()
        return out


def merge_wire(snapshots: Iterable[dict[str, dict[str, Any]]]) -> dict[str, TargetStats]:
    """Merge several {target: TargetStats wire} snapshots into one {target: TargetStats}."""
    out: dict[str, TargetStats] = {}
    for snap in snapshots:
        for target, wire in snap.items():
            out.setdefault(target, TargetStats()).merge(TargetStats.from_wire(wire))
    return out
