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
what differs (exit 2). So is a damaged shard: each file is checked where it is read (its shape, each
line, the message naming the file and line) before the merged directory is made, and a merge that
fails after that removes what it made. A killed shard (no aggregate.json) cannot be merged: its ITL
histograms are gone (llmload/results/rebuild.py).
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

from llmload.config.resolved import Mode, ResolvedRun
from llmload.config.scenario import Scenario, validate_data
from llmload.config.yamlsrc import InputError
from llmload.measure.concurrency import max_open_streams
from llmload.measure.runstate import Aggregator
from llmload.results.finish import Observed, finalize
from llmload.results.rebuild import RUN_INFO, run_info
from llmload.results.run_outcome import RunOutcome
from llmload.results.shard import AGGREGATE, FORMAT, LINE_FILES, ShardDir, read_shard
from llmload.schema.results_model import Shard, Step, Summary
from llmload.sinks.results import ResultsWriter, read_telemetry


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


def _first_difference(a: Any, b: Any, path: str) -> str | None:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            found = _first_difference(a.get(k), b.get(k), f"{path}.{k}" if path else str(k))
            if found is not None:
                return found
        return None
    return None if a == b else path


def _check(shards: list[ShardDir]) -> None:
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


def _restore(shards: list[ShardDir], targets: list[str]) -> tuple[Aggregator, RunOutcome]:
    """The shards' aggregates added, and their endings as one; a saved aggregate that does not fit
    (a damaged or foreign aggregate.json) is bad input naming its file."""
    agg = Aggregator(targets)
    outs: list[RunOutcome] = []
    for s in shards:
        try:
            agg.restore(s.saved.aggregate)
            outs.append(RunOutcome.from_json(s.saved.outcome))
        except (KeyError, IndexError, TypeError, ValueError, AttributeError) as e:  # ValidationError too
            why = " ".join(f"{type(e).__name__}: {e}".split())  # one line
            raise InputError(f"{s.dir / AGGREGATE}: not an aggregate this llmload can add ({why})") from None
    return agg, _outcome(outs)


def _outcome(outs: list[RunOutcome]) -> RunOutcome:
    """The shards' endings as one: the earliest start, the latest end, any signal, every lost worker."""

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


def _concat(out: Path, shards: list[ShardDir]) -> None:
    """Each line file concatenated in time order (requests.jsonl in shard order, each line whole)."""
    for name in LINE_FILES:
        rows = [row for s in shards for row in s.lines[name]]
        if name != "requests.jsonl":
            rows.sort(key=lambda row: row[0])  # stable: lines of one time keep their shard order
        (out / name).write_bytes(b"".join(line + b"\n" for _, line in rows))


def _check_out(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise InputError(f"{out}: not a directory (merge writes a new results directory)")
    try:
        full = out.is_dir() and any(out.iterdir())
    except OSError as e:
        raise InputError(f"{out}: cannot read ({e.strerror or e})") from None
    if full:
        raise InputError(f"{out}: exists and is not empty (merge writes a new results directory)")


def _make(out: Path) -> Path | None:
    """Make ``out``: the outermost directory this made, to remove if the merge fails (None: the
    user's own empty ``out``, kept)."""
    if out.is_dir():
        return None
    top = out
    while top.parent != top and not top.parent.exists():
        top = top.parent
    try:
        out.mkdir(parents=True)
    except OSError as e:
        raise InputError(f"{out}: cannot make the directory ({e.strerror or e})") from None
    return top


def _unmake(out: Path, made: Path | None) -> None:
    """What a failed merge wrote, removed: the directories it made, or what it put in the user's."""
    if made is not None:
        shutil.rmtree(made, ignore_errors=True)
        return
    for p in out.iterdir():
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)


def merge_results(out: Path, dirs: list[Path]) -> tuple[Summary, int]:
    """Merge the shards' results directories into ``out`` (summary.json, aggregate.json, run.json and
    the line files; the caller writes the reports). InputError on anything that is not one plan, or
    is damaged: every input is checked before ``out`` is made, and a failed merge leaves no ``out``."""
    if len(dirs) < 2:
        raise InputError(f"give at least two results directories to merge (got {len(dirs)})")
    shards = [read_shard(Path(d)) for d in dirs]
    _check(shards)
    _check_out(out)
    scenario_data = shards[0].scenario
    scenario_data["targets"] = [t for s in shards for t in s.scenario["targets"]]
    source = shards[0].summary.run.scenario_file or str(shards[0].dir / "summary.json")
    scenario: Scenario = validate_data(scenario_data, {}, source)
    agg, outcome = _restore(shards, [t.name for t in scenario.targets])
    made = _make(out)
    try:
        return _write(out, shards, scenario, agg, outcome)
    except OSError as e:
        _unmake(out, made)
        raise InputError(f"{e.filename or out}: cannot write ({e.strerror or e})") from None
    except BaseException:
        _unmake(out, made)
        raise


def _write(
    out: Path, shards: list[ShardDir], scenario: Scenario, agg: Aggregator, outcome: RunOutcome
) -> tuple[Summary, int]:
    writer = ResultsWriter(out)  # any run's directory: its JSON files written whole, atomically
    writer.close()  # its line files are the shards' (below)
    _concat(out, shards)
    run_id = f"{scenario.name}-merged-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
    mode: Mode = "distributed" if any(s.summary.run.mode == "distributed" for s in shards) else "local"
    run = ResolvedRun(scenario=scenario, run_id=run_id, results_dir=out, mode=mode)
    per_request = scenario.slo is not None and scenario.slo.has_per_request()
    cpu_samples = [x for s in shards for x in s.saved.cpu_samples]
    observed = Observed(
        cpu_samples=cpu_samples,
        telemetry=read_telemetry(out / "telemetry.jsonl"),
        open_streams=max_open_streams(out / "requests.jsonl"),
        requests=[ln for s in shards for ln in s.requests] if per_request else [],  # requests.jsonl's
    )
    allow = all(s.saved.allow_worker_loss for s in shards)
    summary, code = finalize(run, outcome, agg, observed, allow_worker_loss=allow)
    summary.run.shards = [
        Shard(
            results_dir=str(s.dir),
            run_id=s.summary.run.run_id,
            targets=s.targets,
            workers=list(s.summary.run.workers),
            exit_code=s.summary.run.exit_code,
        )
        for s in shards
    ]
    writer.summary(summary)
    writer.write_json(AGGREGATE, aggregate_data(agg, outcome, cpu_samples, allow))
    writer.write_json(RUN_INFO, run_info(scenario, run_id, mode, outcome.started_at))
    return summary, code
