"""How many streams were open at once, per plan level and target: from requests.jsonl, at the end.

A sweep level asks for N concurrent streams (or a rate); whether it got them is a figure of its own:
with 60 requests per level, a level of 256 users never had more than 60 streams open. Counted from
the request lines (each open from its send to its end), so it is exact whatever the number of
workers, and nothing per request is kept in memory while the run goes on.
"""

from __future__ import annotations

from pathlib import Path

import orjson

LevelKey = tuple[str, str, str]  # phase, level, target


def max_open_streams(requests_jsonl: Path) -> dict[LevelKey, int]:
    """The most requests in flight at one moment, per (phase, level, target); warm-up excluded."""
    spans: dict[LevelKey, list[tuple[float, int]]] = {}
    try:
        with open(requests_jsonl, "rb") as f:
            for raw in f:
                try:
                    line = orjson.loads(raw)
                except orjson.JSONDecodeError:
                    continue  # a torn last line (the process was killed): not a request
                start, e2e = line.get("start_time"), line.get("e2e_ms")
                if not isinstance(start, (int, float)):
                    continue
                end = start + (e2e or 0.0) / 1000.0
                events = spans.setdefault((line["phase"], line["level"], line["target"]), [])
                events += [(start, 1), (end, -1)]
    except OSError:
        return {}
    out: dict[LevelKey, int] = {}
    for key, events in spans.items():
        events.sort()  # at equal times an end (-1) sorts first: back-to-back requests do not overlap
        open_now = peak = 0
        for _, step in events:
            open_now += step
            peak = max(peak, open_now)
        out[key] = peak
    return out
