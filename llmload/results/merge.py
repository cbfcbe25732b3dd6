"""Shards of one plan, run by several masters, combined into one results directory: the figures one
master would have built from the same requests, exactly.

    summary, code = merge_results(out_dir, [shard_a, shard_b])      # llmload merge A B --out OUT

A run that ends writes aggregate.json beside summary.json (llmload/locust/conclude.py): its exact
histograms, measurement windows, read stamps, CPU samples and ending (``Aggregator.saved``,
``RunOutcome.to_json``). The shards' aggregates are added as a master adds its workers' deltas
(``Aggregator.restore``), their line files are concatenated (requests.jsonl keeps each line's
index: it pairs a request with the same request of another target), and the merged run is judged
by the same ``finalize`` as any run, so reports, compare and capacity read it like one.

Shards must be disjoint slices of one plan: the same scenario and salt (prompts pair across
targets), each target in one shard. Anything else is bad input, one line naming the directory and
what differs (exit 2). A killed shard (no aggregate.json) cannot be merged: its ITL histograms are
gone (llmload/results/rebuild.py).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llmload.config.resolved import Mode, ResolvedRun
from llmload.config.scenario import Scenario, validate_data
from llmload.config.yamlsrc import InputError
from llmload.measure.concurrency import max_open_streams
from llmload.measure.runstate import Aggregator
from llmload.report.results import BadResults, load_run_lines
from llmload.results.finish import Observed, finalize
from llmload.results.rebuild import RUN_INFO, run_info
from llmload.results.run_outcome import RunOutcome
from llmload.schema.results_model import Shard, Step, Summary
from llmload.sinks.results import ResultsWriter, read_telemetry

AGGREGATE = "aggregate.json"
FORMAT = "llmload.results.aggregate/1"
LINE_FILES = ("requests.jsonl", "timeseries.jsonl", "events.jsonl", "telemetry.jsonl")


def aggregate_data(
    agg: Aggregator, outcome: RunOutcome, cpu_samples: list[float], allow_worker_loss: bool
) -> dict[str, Any]:
    """aggregate.json's content: what ``finalize`` judged the run from, beside the line files."""
    return {
        "schema": FORMAT,
        "aggregate": agg.saved(),
        "outcome": outcome.to_json(),
        "cpu_samples": list(cpu_samples),
        "allow_worker_loss": allow_worker_loss,
    }


@dataclass(frozen=True)
class _Shard:
    dir: Path
    summary: dict[str, Any]
    saved: dict[str, Any]

    @property
    def scenario(self) -> dict[str, Any]:
        return dict(self.summary["run"]["scenario"])

    @property
    def targets(self) -> list[str]:
        return [str(t["name"]) for t in self.scenario.get("targets", [])]


def _read(d: Path) -> _Shard:
    for name in ("summary.json", AGGREGATE):
        if not (d / name).is_file():
            why = (
                " (a run killed before its end cannot be merged: its ITL histograms are gone)"
                if name == AGGREGATE
                else ""
            )
            raise InputError(f"{d / name}: missing{why}")
    try:
        summary = json.loads((d / "summary.json").read_text(encoding="utf-8"))
        saved = json.loads((d / AGGREGATE).read_text(encoding="utf-8"))
    except ValueError as e:
        raise InputError(f"{d}: not JSON: {e}") from None
    if saved.get("schema") != FORMAT:
        raise InputError(f"{d / AGGREGATE}: schema {saved.get('schema')!r}, expected {FORMAT!r}")
    return _Shard(d, summary, saved)


def _first_difference(a: Any, b: Any, path: str) -> str | None:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            found = _first_difference(a.get(k), b.get(k), f"{path}.{k}" if path else str(k))
            if found is not None:
                return found
        return None
    return None if a == b else path


def _check(shards: list[_Shard]) -> None:
    first = shards[0]
    plan = {k: v for k, v in first.scenario.items() if k != "targets"}
    owner: dict[str, Path] = {}
    for s in shards:
        other = {k: v for k, v in s.scenario.items() if k != "targets"}
        diff = _first_difference(plan, other, "")
        if diff is not None:
            advice = (
                ": each shard drew its own salt, so their prompts differ; set workload.salt (--set workload.salt=S)"
                if diff == "workload.salt"
                else ": shards must run the same plan"
            )
            raise InputError(
                f"{s.dir / 'summary.json'}: run.scenario.{diff} differs from {first.dir}'s{advice}"
            )
        for t in s.targets:
            if t in owner:
                raise InputError(
                    f"{s.dir}: target {t!r} is also in {owner[t]}: each target must run in one shard (--targets)"
                )
            owner[t] = s.dir


def _outcome(shards: list[_Shard]) -> RunOutcome:
    """The shards' endings as one: the earliest start, the latest end, any signal, every lost worker."""
    outs = [RunOutcome.from_json(s.saved["outcome"]) for s in shards]

    def joined(values: list[str | None]) -> str | None:
        seen = list(dict.fromkeys(v for v in values if v))
        return "; ".join(seen) if seen else None

    starts = [o.run_t0 for o in outs if o.run_t0 is not None]
    ends = [o.ended_at for o in outs if o.ended_at is not None]
    tests = [o.selftest for o in outs if o.selftest is not None]
    return RunOutcome(
        started_at=min(o.started_at for o in outs),
        run_t0=min(starts) if starts else None,
        ended_at=max(ends) if ends else None,
        stop_reason=joined([o.stop_reason for o in outs]),
        interrupted=next((o.interrupted for o in outs if o.interrupted), None),  # a signal's name
        plan_complete=all(o.plan_complete for o in outs),
        late_signal=next((o.late_signal for o in outs if o.late_signal), None),
        cut_why=joined([o.cut_why for o in outs]) or "",
        quit_early=any(o.quit_early for o in outs),
        results_error=joined([o.results_error for o in outs]),
        not_ready=joined([o.not_ready for o in outs]),
        reasons=list(dict.fromkeys(r for o in outs for r in o.reasons)),
        lost_workers=[w for o in outs for w in o.lost_workers],
        steps=_steps([st for o in outs for st in o.steps]),
        selftest=next((t for t in tests if t.warning), tests[0] if tests else None),
    )


def _steps(steps: list[Step]) -> list[Step]:
    """One step per (phase, level), over every shard's targets: the earliest start, the latest end."""
    out: dict[tuple[str, str], Step] = {}
    for st in sorted(steps, key=lambda x: x.start):
        key = (st.phase, st.level)
        have = out.get(key)
        if have is None:
            out[key] = st.model_copy(update={"targets": list(st.targets)})
            continue
        have.targets = list(dict.fromkeys([*have.targets, *st.targets]))
        if have.end is not None and st.end is not None:
            have.end = max(have.end, st.end)
    return list(out.values())


def _concat(out: Path, shards: list[_Shard]) -> None:
    """Each line file concatenated in time order (requests.jsonl in shard order, each line whole)."""
    for name in LINE_FILES:
        lines: list[bytes] = []
        for s in shards:
            p = s.dir / name
            if p.is_file():
                lines.extend(ln for ln in p.read_bytes().splitlines(keepends=True) if ln.strip())
        if name != "requests.jsonl":
            lines.sort(key=lambda ln: float(json.loads(ln).get("t", 0.0)))
        (out / name).write_bytes(b"".join(ln if ln.endswith(b"\n") else ln + b"\n" for ln in lines))


def merge_results(out: Path, dirs: list[Path]) -> tuple[Summary, int]:
    """Merge the shards' results directories into ``out`` (summary.json, aggregate.json, run.json and
    the line files; the caller writes the reports). InputError on anything that is not one plan."""
    if len(dirs) < 2:
        raise InputError("llmload merge: give at least two results directories")
    shards = [_read(Path(d)) for d in dirs]
    _check(shards)
    if out.exists() and any(out.iterdir()):
        raise InputError(f"{out}: exists and is not empty (merge writes a new results directory)")
    scenario_data = shards[0].scenario
    scenario_data["targets"] = [t for s in shards for t in s.scenario["targets"]]
    source = shards[0].summary["run"].get("scenario_file") or str(shards[0].dir / "summary.json")
    scenario: Scenario = validate_data(scenario_data, {}, source)
    targets = [t.name for t in scenario.targets]
    agg = Aggregator(targets)
    for s in shards:
        agg.restore(s.saved["aggregate"])
    outcome = _outcome(shards)
    writer = ResultsWriter(out)  # any run's directory: its JSON files written whole, atomically
    writer.close()  # its line files are the shards' (below)
    _concat(out, shards)
    run_id = f"{scenario.name}-merged-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
    mode: Mode = "distributed" if any(s.summary["run"]["mode"] == "distributed" for s in shards) else "local"
    run = ResolvedRun(scenario=scenario, run_id=run_id, results_dir=out, mode=mode)
    try:
        lines = (
            load_run_lines(out / "requests.jsonl") if scenario.slo and scenario.slo.has_per_request() else []
        )
    except BadResults as e:
        raise InputError(str(e)) from None
    observed = Observed(
        cpu_samples=[float(x) for s in shards for x in s.saved["cpu_samples"]],
        telemetry=read_telemetry(out / "telemetry.jsonl"),
        open_streams=max_open_streams(out / "requests.jsonl"),
        requests=lines,
    )
    allow = all(bool(s.saved.get("allow_worker_loss")) for s in shards)
    summary, code = finalize(run, outcome, agg, observed, allow_worker_loss=allow)
    summary.run.shards = [
        Shard(
            results_dir=str(s.dir),
            run_id=str(s.summary["run"]["run_id"]),
            targets=s.targets,
            workers=list(s.summary["run"].get("workers", [])),
            exit_code=s.summary["run"].get("exit_code"),
        )
        for s in shards
    ]
    writer.summary(summary)
    writer.write_json(AGGREGATE, aggregate_data(agg, outcome, observed.cpu_samples, allow))
    writer.write_json(RUN_INFO, run_info(scenario, run_id, mode, outcome.started_at))
    return summary, code
