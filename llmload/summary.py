"""Build summary.json (schema llmload.summary/1, docs/results.md) from merged figures."""

from __future__ import annotations

import platform
import sys
from datetime import datetime, timezone
from importlib import metadata
from typing import Any

from llmload import __version__
from llmload.agreement import server_agreement
from llmload.metrics import TargetStats
from llmload.runstate import WARMUP, Aggregator
from llmload.throughput import Window, throughput_block

SCHEMA = "llmload.summary/1"


def iso(t: float | None) -> str | None:
    if t is None:
        return None
    return (
        datetime.fromtimestamp(t, tz=timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    )


def target_block(st: TargetStats, windows: list[Window], *, histograms: bool) -> dict[str, Any]:
    """One target's figures over a level or the run; throughput from its windows (llmload.throughput)."""
    by_class = dict(st.by_class)
    out: dict[str, Any] = {
        "requests": {"sent": st.requests, "ok": st.ok, "failed": st.failures, "by_class": by_class},
        "tokens": {
            "prompt": st.prompt_tokens,
            "prompt_client": st.prompt_tokens_client,
            "output": st.output_tokens,
            "output_approx": st.output_tokens_approx,
        },
        "latency_ms": st.latency_block(),
        "throughput": throughput_block(windows),
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
    telemetry: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    window = agg.window(exclude_warmup=True)
    everything = agg.window(exclude_warmup=False)
    targets: dict[str, Any] = {}
    for t in scenario.targets:
        st = window.get(t.name) or TargetStats()
        block = target_block(st, agg.target_windows(t.name), histograms=True)
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
        block["requests"]["backoffs"] = agg.backoffs.get(t.name, 0)
        block["requests"]["backoff_s"] = round(agg.backoff_s.get(t.name, 0.0), 3)
        if t.metrics_url and telemetry:
            block["server_agreement"] = _agreement(t.name, all_st, agg, telemetry)
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
        blocks = {t: target_block(s, agg.target_windows(t, (ph, lv)), histograms=False) for t, s in d.items()}
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
        "slo": scenario.slo.model_dump(exclude_none=True) if scenario.slo is not None else None,
    }
    if extra_run:
        run.update(extra_run)
    out: dict[str, Any] = {"schema": SCHEMA, "run": run, "targets": targets}
    out["levels"] = levels
    return out


def _agreement(
    target: str, all_st: TargetStats, agg: Aggregator, telemetry: list[dict[str, Any]]
) -> dict[str, Any] | None:
    """The run's figures (warm-up included, as the server counts them) beside its /metrics deltas."""
    windows = agg.target_windows(target)
    tp = throughput_block(windows)
    firsts = [w.first for w in windows if w.first is not None]
    lasts = [w.last for w in windows if w.last is not None]
    window = (min(firsts) if firsts else None, max(lasts) if lasts else None, float(tp["window_s"]))
    return server_agreement(
        target,
        telemetry,
        sent=all_st.requests,
        prompt_tokens=all_st.prompt_tokens,
        output_tokens=all_st.output_tokens,
        ttft_mean_ms=all_st.histograms["ttft"].summary_ms()["mean"],
        e2e_mean_ms=all_st.histograms["e2e"].summary_ms()["mean"],
        output_tok_s=float(tp["output_tok_s"]),
        window=window,
        streamed_all_in_window=agg.streamed_total.get(target, 0) == tp["window_tokens"],
    )


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
