"""Build summary.json (schema llmload.summary/1, docs/results.md) from merged figures."""

from __future__ import annotations

import platform
import sys
from datetime import datetime, timezone
from importlib import metadata
from typing import Any

from llmload import __version__
from llmload.metrics import TargetStats
from llmload.runstate import WARMUP, Aggregator

SCHEMA = "llmload.summary/1"


def iso(t: float | None) -> str | None:
    if t is None:
        return None
    return (
        datetime.fromtimestamp(t, tz=timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    )


def target_block(st: TargetStats, *, histograms: bool) -> dict[str, Any]:
    by_class = dict(st.by_class)
    window_s = None
    if st.first_start is not None and st.last_end is not None:
        window_s = max(1e-9, st.last_end - st.first_start)
    out: dict[str, Any] = {
        "requests": {"sent": st.requests, "ok": st.ok, "failed": st.failures, "by_class": by_class},
        "tokens": {
            "prompt": st.prompt_tokens,
            "output": st.output_tokens,
            "output_approx": st.output_tokens_approx,
        },
        "latency_ms": st.latency_block(),
        "throughput": {
            "output_tok_s": round(st.output_tokens / window_s, 3) if window_s else 0.0,
            "req_s": round(st.ok / window_s, 4) if window_s else 0.0,
            "window_s": round(window_s, 3) if window_s else 0.0,
        },
    }
    if histograms:
        out["histograms"] = {m: h.to_dict() for m, h in st.histograms.items() if h.count}
    return out


def build_summary(
    *,
    scenario: Any,
    agg: Aggregator,
    run_id: str,
    started_at: float,
    ended_at: float,
    measure_start: float,
    measure_end: float,
    mode: str,
    workers: list[str],
    status: str,
    reasons: list[str],
    client: dict[str, Any],
    extra_run: dict[str, Any] | None = None,
) -> dict[str, Any]:
    window = agg.window(exclude_warmup=True)
    everything = agg.window(exclude_warmup=False)
    targets: dict[str, Any] = {}
    for t in scenario.targets:
        st = window.get(t.name) or TargetStats()
        block = target_block(st, histograms=True)
        all_st = everything.get(t.name) or TargetStats()
        # requests.sent counts every request line (warm-up included); by_class too.
        block["requests"]["sent"] = all_st.requests
        block["requests"]["ok"] = all_st.ok
        block["requests"]["failed"] = all_st.failures
        block["requests"]["by_class"] = dict(all_st.by_class)
        block["requests"]["in_window"] = st.requests
        block["requests"]["warmup"] = all_st.requests - st.requests
        block["requests"]["dropped"] = agg.dropped.get(t.name, 0)
        block["requests"]["delayed"] = agg.delayed.get(t.name, 0)
        block["tokens"]["prompt"] = st.prompt_tokens
        steady = agg.steady_throughput(t.name)
        if steady is not None:
            # Tokens received while the target's window was open (after warm-up, until the load
            # stopped), over that window: exact to one socket read, immune to requests ending in bursts.
            block["throughput"]["output_tok_s"] = round(steady[0], 3)
            block["throughput"]["window_s"] = round(steady[1], 3)
            block["throughput"]["req_s"] = round(st.ok / steady[1], 4)
            block["throughput"]["basis"] = "streamed"
        else:
            block["throughput"]["basis"] = "requests"
        targets[t.name] = {
            "kind": t.kind,
            "model": t.model,
            "base_url": t.base_url,
            "labels": dict(t.labels),
            "cost_per_hour": t.cost_per_hour,
            **block,
        }
    levels = []
    steps = (extra_run or {}).get("steps") or []
    for ph, lv in agg.level_order:
        if lv == WARMUP:
            continue
        d = agg.levels[(ph, lv)]
        blocks = {t: target_block(s, histograms=False) for t, s in d.items()}
        for t, b in blocks.items():
            meta = next(
                (m for m in steps if m["phase"] == ph and m["level"] == lv and t in m["targets"]), None
            )
            if meta is not None and meta.get("end") is not None:
                dur = max(1e-9, meta["end"] - meta["start"])
                b["rate"] = {
                    "target": meta.get("target_rate"),
                    "achieved": round(b["requests"]["sent"] / dur, 4),
                    "level_duration_s": round(dur, 3),
                }
                b["users"] = meta.get("users")
        levels.append({"phase": ph, "level": lv, "value": _level_value(lv), "targets": blocks})
    run: dict[str, Any] = {
        "run_id": run_id,
        "scenario_name": scenario.name,
        "scenario_file": scenario.source,
        "scenario": scenario.public_dict(),
        "started_at": iso(started_at),
        "ended_at": iso(ended_at),
        "duration_s": round(ended_at - started_at, 3),
        "measure_start": measure_start,
        "measure_end": measure_end,
        "versions": {
            "llmload": __version__,
            "locust": _version("locust"),
            "python": platform.python_version(),
        },
        "argv": [a for a in sys.argv[1:] if "token" not in a.lower() and "key" not in a.lower()],
        "mode": mode,
        "workers": workers,
        "status": status,
        "reasons": reasons,
        "client": client,
        "slo": scenario.slo,
    }
    if extra_run:
        run.update(extra_run)
    out: dict[str, Any] = {"schema": SCHEMA, "run": run, "targets": targets}
    out["levels"] = levels
    return out


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _level_value(level: str) -> float | None:
    if "=" in level:
        try:
            return float(level.split("=", 1)[1])
        except ValueError:
            return None
    return None
