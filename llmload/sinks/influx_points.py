"""Line-protocol points for the InfluxDB sink: llm_request, llm_interval, llm_event and any other.

``PointFormatter`` turns the sink's buffered items into line-protocol lines; the sink
(llmload/sinks/influx.py) decides when they are formatted, written or spooled.

Timestamps: a request's point is stamped with its start time at microsecond precision; the
nanosecond digits number points that share a series and microsecond, so no point overwrites
another (InfluxDB keeps one point per series and timestamp).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from llmload.measure.records import RequestRecord
from llmload.sinks.lineproto import FieldValue, format_fields, series_prefix

INTERVAL_FIELDS: tuple[str, ...] = (
    "ttft_p50_ms",
    "ttft_p99_ms",
    "itl_p50_ms",
    "itl_p99_ms",
    "output_tok_s",
    "req_s",
    "in_flight",
    "failures",
    "requests",
    "output_tokens",
    "loop_lag_p99_ms",
    "cpu_percent",
    "users",
)
EVENT_KINDS: tuple[str, ...] = (
    "start",
    "stop",
    "phase",
    "stage",
    "worker_lost",
    "warning",
    "preflight",
    "selftest",
)

# The kinds of buffered items (the sink appends tuples that start with one of these).
REQUEST, INTERVAL, EVENT, POINT = 0, 1, 2, 3
_GENERATION = 200_000  # (series, microsecond) keys remembered per generation for unique timestamps


MAX_SERIES_KEYS = 10_000  # request series kept by tags identity; more means tags dicts are not reused


class _Series:
    """One series (measurement + tag set): its line prefix and the timestamps it used.

    Points are stamped at microsecond precision; the nanosecond digits count the points of
    this series that share a microsecond, so none overwrites another. The memory of used
    microseconds is kept in two generations of ``_GENERATION`` entries each: a duplicate is
    caught when it arrives within that many points of the first (requests arrive at most a
    generation's length out of start-time order).
    """

    __slots__ = ("prefix", "cur", "prev")

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.cur: dict[int, int] = {}
        self.prev: dict[int, int] = {}

    def ts(self, t: float) -> int:
        us = int(t * 1_000_000.0 + 0.5)
        cur = self.cur
        n = cur.get(us)
        if n is None:
            n = self.prev.get(us, 0) if self.prev else 0
            if len(cur) >= _GENERATION:
                self.prev = cur
                cur = self.cur = {}
        cur[us] = n + 1
        return us * 1000 + (n if n < 1000 else 999)


_REQ_FMT = (  # after the series prefix; then schedule_lag_ms when scheduled, and the timestamp
    " index=%d.0,output_tokens=%d.0,prompt_tokens=%d.0,ttft_ms=%.3f,e2e_ms=%.3f,tpot_ms=%.3f,"
    "itl_mean_ms=%.3f,itl_max_ms=%.3f"
)


def _ms(v: float | None) -> float | None:
    """Seconds -> milliseconds rounded to the microsecond (format_fields drops nan/inf)."""
    return None if v is None else round(v * 1000.0, 3)


def _request_generic(rec: RequestRecord, prefix: str, ts: int) -> str:
    """A request the fast path does not take (failed, unstreamed, non-finite): every field by name."""
    ttft, e2e, itl = rec.ttft_s, rec.e2e_s, rec.itl_s
    fields = format_fields(
        {
            "index": rec.index,
            "output_tokens": rec.output_tokens,
            "prompt_tokens": rec.prompt_tokens,
            "ttft_ms": None if ttft is None else round(ttft * 1000.0, 3),
            "e2e_ms": None if e2e is None else round(e2e * 1000.0, 3),
            "tpot_ms": _ms(rec.tpot_s),
            "itl_mean_ms": _ms(sum(itl) / len(itl)) if itl else None,
            "itl_max_ms": _ms(max(itl)) if itl else None,
            "schedule_lag_ms": _ms(rec.schedule_lag_s),
            **_reasoning_fields(rec),
        }
    )
    return f"{prefix} {fields} {ts}"


def _reasoning_fields(rec: RequestRecord) -> dict[str, float | int | None]:
    """A reasoning request's own fields (docs/metrics.md); none for a request without reasoning."""
    if not rec.has_reasoning:
        return {}
    return {
        "ttfo_ms": _ms(rec.ttfo_s),
        "reasoning_tokens": rec.reasoning_tokens,
        "answer_tokens": rec.answer_tokens,
        "tpot_reasoning_ms": _ms(rec.reasoning_tpot_s),
        "tpot_answer_ms": _ms(rec.answer_tpot_s),
    }


class PointFormatter:
    """Formats buffered items for one run and process; remembers each series' timestamps."""

    def __init__(self, run_id: str, worker: str) -> None:
        self.run_id = run_id
        self.worker = worker
        # (id(tags), status, worker, phase) -> (series, its request formats without and with the
        # schedule lag, the tags kept alive)
        self._by_key: dict[tuple[Any, ...], tuple[_Series, str, str, dict[str, str]]] = {}
        self._by_prefix: dict[str, _Series] = {}

    def series(self, prefix: str) -> _Series:
        series = self._by_prefix.get(prefix)
        if series is None:
            if len(self._by_prefix) > 20_000:  # bound memory when tags churn; never in a normal run
                self._by_prefix.clear()
                self._by_key.clear()
            series = self._by_prefix[prefix] = _Series(prefix)
        return series

    def item(self, item: tuple[Any, ...]) -> str | None:
        kind = item[0]
        if kind == REQUEST:
            return self.request(item[1], item[2])
        if kind == INTERVAL:
            return self.interval(item[1], item[2])
        if kind == EVENT:
            return self.event(item[1], item[2], item[3], item[4])
        return self.point(item[1], item[2], item[3], item[4])

    def request(self, rec: RequestRecord, tags: dict[str, str]) -> str | None:
        worker = rec.worker if rec.worker and rec.worker != "local" else self.worker
        # The tags dict is the sink's per-target one, the same object for every request: keyed by
        # its id (the entry keeps it alive, so the id is not reused) instead of a tuple of its
        # items built per point (profiled: a fifth of this method's time).
        key = (id(tags), rec.status, worker, rec.phase)
        entry = self._by_key.get(key)
        if entry is None:
            entry = self._request_entry(key, rec, tags, worker)
        series = entry[0]
        ts = series.ts(rec.start_time)
        ttft, e2e, itl, n_out, n_in = rec.ttft_s, rec.e2e_s, rec.itl_s, rec.output_tokens, rec.prompt_tokens
        if rec.reasoning_chunks or rec.reasoning_tokens:  # reasoning fields too: every field by name
            return _request_generic(rec, series.prefix, ts)
        if ttft is not None and e2e is not None and itl and n_in is not None and n_out >= 2:
            # The common case (a successful streamed request) in one %-format, the series prefix
            # already in it: float repr of arbitrary values costs ~1 us each, %.3f a quarter of
            # that. Milliseconds keep microsecond resolution, like requests.jsonl.
            tpot = (e2e - ttft) / (n_out - 1)
            itl_mean = sum(itl) / len(itl)
            itl_max = max(itl)
            intended = rec.intended_time
            lag = 0.0 if intended is None else rec.start_time - intended
            if lag < 0.0:
                lag = 0.0
            check = ttft + e2e + tpot + itl_mean + itl_max + lag
            if check - check == 0.0:  # all finite (nan/inf would make the batch invalid)
                if intended is None:
                    return entry[1] % (
                        rec.index,
                        n_out,
                        n_in,
                        ttft * 1000.0,
                        e2e * 1000.0,
                        tpot * 1000.0,
                        itl_mean * 1000.0,
                        itl_max * 1000.0,
                        ts,
                    )
                return entry[2] % (
                    rec.index,
                    n_out,
                    n_in,
                    ttft * 1000.0,
                    e2e * 1000.0,
                    tpot * 1000.0,
                    itl_mean * 1000.0,
                    itl_max * 1000.0,
                    lag * 1000.0,
                    ts,
                )
        return _request_generic(rec, series.prefix, ts)

    def _request_entry(
        self, key: tuple[Any, ...], rec: RequestRecord, tags: dict[str, str], worker: str
    ) -> tuple[_Series, str, str, dict[str, str]]:
        """The first request of a key: its series and its request formats, remembered under key."""
        if len(self._by_key) >= MAX_SERIES_KEYS:  # a caller passing a new tags dict each time
            self._by_key.clear()
        full = dict(tags)
        full.update(run_id=self.run_id, status=rec.status, worker=worker, phase=rec.phase)
        series = self.series(series_prefix("llm_request", full.items()))
        head = series.prefix.replace("%", "%%") + _REQ_FMT  # a tag value may hold a %
        entry = self._by_key[key] = (series, head + " %d", head + ",schedule_lag_ms=%.3f %d", tags)
        return entry

    def interval(self, row: dict[str, Any], tags: dict[str, str]) -> str | None:
        full = dict(tags)
        if row.get("target"):
            full["target"] = str(row["target"])
        full.update(run_id=self.run_id, worker=str(row.get("worker") or self.worker))
        prefix = series_prefix("llm_interval", full.items())
        field_text = format_fields({name: row.get(name) for name in INTERVAL_FIELDS})
        if not field_text:
            return None
        return f"{prefix} {field_text} {self.series(prefix).ts(float(row.get('t') or time.time()))}"

    def event(self, kind: str, text: str, tags: dict[str, str] | None, t: float) -> str | None:
        full = dict(tags or {})
        full.update(run_id=self.run_id, kind=kind, worker=full.get("worker") or self.worker)
        prefix = series_prefix("llm_event", full.items())
        field_text = format_fields({"title": kind, "text": text})
        return f"{prefix} {field_text} {self.series(prefix).ts(t)}"

    def point(
        self, measurement: str, tags: Mapping[str, str], fields: Mapping[str, FieldValue], t: float
    ) -> str | None:
        prefix = series_prefix(measurement, tags.items())
        field_text = format_fields(fields)
        if not field_text:
            return None
        return f"{prefix} {field_text} {self.series(prefix).ts(t)}"
