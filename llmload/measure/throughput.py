"""Throughput: the one definition of output tokens/s and requests/s (docs/metrics.md).

Tokens are counted as they stream, on every socket read that brought some, into the measurement
window that is open for the target at that moment (one window per target and plan level; none
during warm-up). At the end of each request the streamed count is reconciled with the request's
own count (usage, else a tokenizer, else token-bearing chunks), so a server that merged several
tokens into one chunk is counted right.

A window's span runs from its first activity (a request sent, or a token received from a stream
already in flight) to its last (a token received or a request ended) while it was open: never to
the once-a-second tick that closed it. Requests/s counts each successful request by the share of
its tokens that arrived inside the window, so a request cut by the window's edge counts partly,
and with every request the same length, req/s x tokens per request = tok/s exactly.

Both figures come from here for the summary, its levels, the terminal, the report, compare, the
web UI and InfluxDB. No Locust import.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from llmload.measure.records import RequestRecord
from llmload.schema.results_model import Throughput

WindowKey = tuple[str, str, str]  # (target, phase, level)


@dataclass
class Window:
    """One target's measurement window over one plan level, in one process or merged."""

    opened: float
    closed: float | None = None
    first: float | None = None  # first activity at or after ``opened``
    last: float | None = None  # last activity before ``closed``
    tokens: int = 0
    ok_share: float = 0.0  # successful requests, each by the share of its tokens inside the window
    ok: int = 0  # successful requests that brought at least one token into the window

    def touch(self, now: float) -> bool:
        """Note activity at ``now``; False when the window is not open then."""
        if now < self.opened or (self.closed is not None and now >= self.closed):
            return False
        if self.first is None:
            self.first = now
        if self.last is None or now > self.last:
            self.last = now
        return True

    @property
    def span_s(self) -> float:
        if self.first is None or self.last is None:
            return 0.0
        return max(0.0, self.last - self.first)

    def merge(self, other: Window) -> None:
        """Add another process's window over the same level (workers run it side by side)."""
        self.opened = min(self.opened, other.opened)
        if other.closed is not None:
            self.closed = other.closed if self.closed is None else max(self.closed, other.closed)
        for name, pick in (("first", min), ("last", max)):
            a, b = getattr(self, name), getattr(other, name)
            setattr(self, name, b if a is None else (a if b is None else pick(a, b)))
        self.tokens += other.tokens
        self.ok_share += other.ok_share
        self.ok += other.ok

    def to_wire(self) -> list[Any]:
        return [self.opened, self.closed, self.first, self.last, self.tokens, self.ok_share, self.ok]

    @classmethod
    def from_wire(cls, w: list[Any]) -> Window:
        return cls(w[0], w[1], w[2], w[3], int(w[4]), float(w[5]), int(w[6]))


def throughput_block(windows: list[Window]) -> Throughput:
    """summary.json's ``throughput`` for one target: one window, or several levels time-weighted."""
    span = sum(w.span_s for w in windows)
    tokens = sum(w.tokens for w in windows)
    share = sum(w.ok_share for w in windows)
    return Throughput(
        output_tok_s=round(tokens / span, 3) if span > 0 else 0.0,
        req_s=round(share / span, 4) if span > 0 else 0.0,
        window_s=round(span, 3),
        window_tokens=tokens,
        window_requests=round(share, 3),
        levels=len(windows),
    )


@dataclass
class RequestTokens:
    """One request's tokens as they stream: what was counted so far, and into which windows."""

    target: str
    seen: int = 0
    shares: dict[WindowKey, int] = field(default_factory=dict)


class TokenWindows:
    """Tokens received per target, cumulative and per open window (one per process)."""

    def __init__(self, targets: list[str], clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self.totals: dict[str, int] = dict.fromkeys(targets, 0)
        self.windows: dict[WindowKey, Window] = {}
        self.current: dict[str, WindowKey | None] = dict.fromkeys(targets, None)

    # --- the plan opens and closes windows --------------------------------------------------
    def open(self, target: str, phase: str, level: str, at: float) -> None:
        key = (target, phase, level)
        w = self.windows.get(key)
        if w is None:
            self.windows[key] = Window(opened=at)
        else:
            w.closed = None  # the same level again (sequential mode comes back to a target)
        self.current[target] = key

    def close(self, target: str, at: float) -> None:
        key = self.current.get(target)
        if key is not None:
            w = self.windows[key]
            if w.closed is None:
                w.closed = max(at, w.opened)
        self.current[target] = None

    # --- requests report what they bring -------------------------------------------------------
    def request(self, target: str) -> RequestTokens:
        """A request is being sent: its first activity in the open window."""
        self._touch(target, self.clock())
        return RequestTokens(target)

    def add(self, req: RequestTokens, n: int) -> None:
        """``n`` more tokens of ``req`` arrived (called on every read that brought some)."""
        req.seen += n
        self.totals[req.target] = self.totals.get(req.target, 0) + n
        key = self._touch(req.target, self.clock())
        if key is not None:
            self.windows[key].tokens += n
            req.shares[key] = req.shares.get(key, 0) + n

    def done(self, req: RequestTokens, rec: RequestRecord) -> None:
        """The request ended: reconcile the streamed count with its own, then share it out."""
        if rec.output_tokens != req.seen:
            self.add(req, rec.output_tokens - req.seen)
        else:
            self._touch(req.target, self.clock())
        if not rec.ok or rec.output_tokens <= 0:
            return
        for key, n in req.shares.items():
            w = self.windows[key]
            w.ok_share += n / rec.output_tokens
            w.ok += 1

    def _touch(self, target: str, now: float) -> WindowKey | None:
        key = self.current.get(target)
        if key is None or not self.windows[key].touch(now):
            return None
        return key

    def to_wire(self) -> list[list[Any]]:
        return [[*key, *w.to_wire()] for key, w in self.windows.items()]


def windows_from_wire(rows: list[list[Any]]) -> dict[WindowKey, Window]:
    return {(r[0], r[1], r[2]): Window.from_wire(r[3:]) for r in rows}
