"""A run that died before writing summary.json (SIGKILL, the OOM killer, a lost host): rebuilt.

    summary = rebuild_summary(results_dir)     # what ``llmload report DIR`` does without summary.json

Every request line is flushed at each reporting interval, so a killed run keeps what it measured up
to its last interval; run.json (written when the load starts) says what the run was. From them the
summary is built again through the same path as at a normal end (records -> metrics -> summary),
with status ``incomplete`` and its reasons. Two things requests.jsonl does not hold are approximated
and said so: inter-token gaps (a line keeps their mean and max, not each gap: no ITL percentiles),
and the token-stream windows (throughput runs from the first request's start to the last one's end
per level, each successful request counted whole).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from llmload.config.scenario import Scenario, validate_data
from llmload.config.yamlsrc import InputError
from llmload.measure.records import RequestRecord
from llmload.measure.runstate import Aggregator, Collector
from llmload.measure.throughput import Window
from llmload.results.summary import build_summary
from llmload.schema.results_model import ClientHealth, CpuPercent, LoopLag, RequestLine, Summary
from llmload.sinks.orphan_spool import ORPHANS, fold_in
from llmload.sinks.results import read_telemetry

RUN_INFO = "run.json"
INCOMPLETE = "incomplete"


def run_info(scenario: Scenario, run_id: str, mode: str, started_at: float) -> dict[str, Any]:
    """run.json: what a run is, written when its load starts (secrets removed)."""
    return {
        "run_id": run_id,
        "started_at": started_at,
        "mode": mode,
        "scenario_file": scenario.source,
        "scenario": scenario.public_dict(),  # every field, nulls included: a null is a choice
    }


def _lines(path: Path) -> list[RequestLine]:
    out = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            try:
                data = json.loads(line)
            except ValueError:
                continue  # the last line, torn by the kill
            try:
                out.append(RequestLine.model_validate(data))
            except ValidationError as e:
                err = e.errors()[0]
                field = ".".join(str(x) for x in err["loc"])
                raise InputError(f"{path}:{n}: {field}: {err['msg']}") from None
    return out


def _record(x: RequestLine) -> RequestRecord:
    def s(ms: float | None) -> float | None:
        return None if ms is None else ms / 1000.0

    return RequestRecord(
        target=x.target,
        index=x.index,
        worker=x.worker,
        phase=x.phase,
        level=x.level,
        status=x.status,
        http_status=x.http_status,
        start_time=x.start_time,
        intended_time=x.intended_time,
        ttft_s=s(x.ttft_ms),
        e2e_s=s(x.e2e_ms),
        prompt_tokens=x.prompt_tokens,
        prompt_tokens_client=x.prompt_tokens_client,
        output_tokens=x.output_tokens,
        output_tokens_approx=x.output_tokens_approx,
        output_tokens_source=x.output_tokens_source,
        chunks=x.chunks,
        empty_chunks=x.empty_chunks,
        finish_reason=x.finish_reason,
        error=x.error,
        retry_after_s=x.retry_after_s,
    )


def _windows(recs: list[RequestRecord]) -> dict[tuple[str, str, str], Window]:
    """Per target and level: first start to last end, every successful request's tokens whole."""
    out: dict[tuple[str, str, str], Window] = {}
    for r in recs:
        if r.level == "warmup":
            continue
        key = (r.target, r.phase, r.level)
        end = r.start_time + (r.e2e_s or 0.0)
        w = out.get(key)
        if w is None:
            w = out[key] = Window(opened=r.start_time, first=r.start_time, last=end)
        w.opened = min(w.opened, r.start_time)
        w.first = min(w.first or r.start_time, r.start_time)
        w.last = max(w.last or end, end)
        if r.ok:
            w.tokens += r.output_tokens
            w.ok_share += 1.0
            w.ok += 1
    return out


def _run_info(path: Path) -> dict[str, Any]:
    """run.json as written (``run_info``), or InputError naming what is wrong with it."""
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise InputError(f"{path}: unreadable ({e}): the summary cannot be rebuilt") from None
    if not isinstance(info, dict) or not isinstance(info.get("scenario"), dict):
        raise InputError(f"{path}: holds no run's scenario: the summary cannot be rebuilt")
    if not isinstance(info.get("started_at"), (int, float)) or isinstance(info.get("started_at"), bool):
        raise InputError(f"{path}: holds no started_at time: the summary cannot be rebuilt")
    if not info.get("run_id"):
        raise InputError(f"{path}: holds no run_id: the summary cannot be rebuilt")
    return info


def rebuild_summary(results_dir: Path) -> Summary:
    """summary.json's content for a run that wrote none. InputError when run.json is missing."""
    d = Path(results_dir)
    info_path = d / RUN_INFO
    if not info_path.exists() or not (d / "requests.jsonl").exists():
        raise InputError(
            f"{d / 'summary.json'}: missing (and no {RUN_INFO} with requests.jsonl to rebuild it from)"
        )
    info = _run_info(info_path)
    sc = validate_data(info["scenario"], {}, info.get("scenario_file") or str(info_path))
    targets = [t.name for t in sc.targets]
    lines, spooled = fold_in(d, _lines(d / "requests.jsonl"), _lines)  # orphaned workers' spools
    recs = [_record(x) for x in lines if x.target in targets]
    collector = Collector(targets, worker="rebuilt")
    for r in recs:
        collector.started(r.target)
        collector.record(r)
    agg = Aggregator(targets)
    agg.merge(collector.drain())
    agg.windows = {"rebuilt": _windows(recs)}
    started = float(info["started_at"])
    ended = max((r.start_time + (r.e2e_s or 0.0) for r in recs), default=started)
    reasons = [
        "the run ended without writing summary.json (killed?): rebuilt from requests.jsonl, "
        f"{len(recs)} request lines up to the last reporting interval",
        *([f"{spooled} request lines from orphaned workers' spools ({ORPHANS}/)"] if spooled else []),
        "not in requests.jsonl, so approximated: no ITL percentiles (each line keeps its mean and "
        "max gap); throughput from first start to last end per level, each request counted whole",
    ]
    return build_summary(
        scenario=sc,
        agg=agg,
        run_id=str(info["run_id"]),
        started_at=started,
        ended_at=ended,
        measure_start=started + sc.load.warmup,
        measure_end=ended,
        mode=str(info.get("mode", "local")),
        workers=sorted({r.worker for r in recs}) or ["local"],
        status=INCOMPLETE,
        reasons=reasons,
        client=ClientHealth(  # not measured: the process that could say is gone
            loop_lag_ms=LoopLag(count=None, p50=None, p99=None, max=None),
            cpu_percent=CpuPercent(mean=None, max=None),
            unreliable=False,
            unreliable_reasons=[],
        ),
        extra_run={
            "telemetry": {"scrape_interval_s": sc.client.scrape_interval, "scrapes": None},
            "lost_workers": [],
            "stop_reason": "the process ended before writing its results",
            "results_dir": str(d),
            "influx": None,
            "steps": [],
            "verdict": f"{INCOMPLETE} (exit 3): rebuilt from requests.jsonl",
            "exit_code": 3,
        },
        telemetry=read_telemetry(d / "telemetry.jsonl"),
    )
