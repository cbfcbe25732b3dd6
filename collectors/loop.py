"""Scheduling: sample every source each interval, turn samples into points, report health.

A source that fails (no GPU, endpoint down) logs one line when it goes down and one when it
comes back -- never one per interval -- and is retried every interval; the other sources
keep running. Each source also yields a ``collector_health`` point (``up`` 0/1, ``scrape_ms``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Protocol

from collectors.dcgm import DcgmSource
from collectors.engine_metrics import fetch, normalise
from collectors.nvml import NvmlSource
from collectors.samples import Point

log = logging.getLogger("collectors")


class Source(Protocol):
    """One thing to sample; ``collect`` raises on failure."""

    name: str

    def collect(self, t: float) -> list[Point]: ...


class GpuPoints:
    """NVML or DCGM source -> ``gpu`` (and, for NVML, ``gpu_process``) points."""

    def __init__(self, source: NvmlSource | DcgmSource, host: str, tags: dict[str, str]) -> None:
        self.source = source
        self.name = source.name
        self.host = host
        self.tags = tags

    def collect(self, t: float) -> list[Point]:
        if isinstance(self.source, NvmlSource):
            gpus, procs = self.source.sample()
        else:
            gpus, procs = self.source.sample(), []
        points = [g.point(self.host, self.tags, t) for g in gpus]
        points += [p.point(self.host, t) for p in procs]
        return points


class EnginePoints:
    """An engine's /metrics -> one ``engine`` point per normalised metric."""

    def __init__(
        self,
        url: str,
        kind: str,
        host: str,
        tags: dict[str, str],
        *,
        timeout_s: float = 5.0,
        fetch_text: Callable[[], str] | None = None,
    ) -> None:
        self.url = url
        self.kind = kind
        self.name = f"engine {kind} {url}"
        self.host = host
        self.tags = tags
        self._fetch = fetch_text or (lambda: fetch(url, timeout_s))

    def collect(self, t: float) -> list[Point]:
        samples = normalise(self._fetch(), self.kind)
        if not samples:
            raise ValueError(f"{self.url}: no {self.kind} engine series found (wrong --engine-kind?)")
        base = {**self.tags, "host": self.host, "engine_kind": self.kind}
        return [
            ("engine", {**base, "metric": s.metric, "raw_name": s.raw_name}, {"value": s.value}, t)
            for s in samples
        ]


class Collector:
    """Runs the sources on a fixed interval and hands each round's points to ``emit``."""

    def __init__(
        self,
        sources: list[Source],
        emit: Callable[[list[Point]], None],
        *,
        host: str,
        interval_s: float = 5.0,
        health: bool = True,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.sources = sources
        self.emit = emit
        self.host = host
        self.interval_s = interval_s
        self.health = health
        self.clock = clock
        self.up: dict[str, bool] = {}
        self.rounds = 0
        self.stop_event = threading.Event()

    def run_once(self) -> list[Point]:
        t = self.clock()
        points: list[Point] = []
        for source in self.sources:
            t0 = time.perf_counter()
            try:
                got = source.collect(t)
                ok, reason = True, ""
            except Exception as exc:  # any failure of one source must not stop the others
                got, ok, reason = [], False, f"{type(exc).__name__}: {exc}"
            scrape_ms = (time.perf_counter() - t0) * 1000.0
            self._state(source.name, ok, reason)
            points.extend(got)
            if self.health:
                tags = {"host": self.host, "source": source.name}
                points.append(
                    ("collector_health", tags, {"up": 1.0 if ok else 0.0, "scrape_ms": scrape_ms}, t)
                )
        self.rounds += 1
        if points:
            self.emit(points)
        return points

    def _state(self, name: str, ok: bool, reason: str) -> None:
        before = self.up.get(name)
        self.up[name] = ok
        if before is ok:
            return
        if not ok:
            log.warning("%s unavailable: %s (retrying every %g s)", name, reason, self.interval_s)
        elif before is False:
            log.warning("%s is back", name)

    def run(self, *, once: bool = False, duration_s: float | None = None) -> None:
        end = None if duration_s is None else time.monotonic() + duration_s
        while not self.stop_event.is_set():
            started = time.monotonic()
            self.run_once()
            if once:
                return
            now = time.monotonic()
            if end is not None and now >= end:
                return
            wait = max(0.0, self.interval_s - (now - started))
            if end is not None:
                wait = min(wait, end - now)
            self.stop_event.wait(wait)

    def stop(self) -> None:
        self.stop_event.set()
