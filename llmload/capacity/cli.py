"""`llmload capacity SCENARIO`: each target's capacity within the scenario's SLOs, probe by probe.

Also what `llmload run` does with a scenario whose only phase is ``executor: capacity``. Targets are
searched at once (``load.mode: parallel``, one thread per target, each waiting on its probe runs) or
one after the other (``sequential``). A signal is passed on to the probes that are running (each
drains and writes its results as any run does); the search then stops, writes what it found with
status ``interrupted`` and exits 130 (SIGINT) or 143 (SIGTERM).

Exit codes: 0 every target has a capacity (at least ``slo.min_capacity`` when set), 1 not, 2 bad
input or a probe could not start (a target not ready), 130/143 interrupted.
"""

from __future__ import annotations

import argparse
import secrets
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from llmload.base.cores import worker_count
from llmload.base.exitcodes import EXIT_INPUT, EXIT_OK, EXIT_SIGINT, EXIT_SIGTERM, EXIT_SLO
from llmload.base.usage import ArgParser
from llmload.capacity.judge import GOODPUT_SHARE
from llmload.capacity.outcome import (
    CapacityResult,
    TargetCapacity,
    ratios,
    render_text,
)
from llmload.capacity.page import render_markdown
from llmload.capacity.page_html import render_html
from llmload.capacity.runner import Search
from llmload.capacity.search import estimate
from llmload.config.durations import parse_duration
from llmload.config.executors import Capacity
from llmload.config.scenario import Scenario, load_scenario
from llmload.config.simulated import simulated_targets
from llmload.config.yamlsrc import InputError
from llmload.report.efficiency import efficiency
from llmload.report.results import BadResults, load_run
from llmload.report.slo import fmt

OPTIONS = (
    "vary",
    "start",
    "min",
    "max",
    "factor",
    "precision",
    "requests",
    "hold_max",
    "warmup",
    "at",
    "attainment",
)


def parser() -> argparse.ArgumentParser:
    ap = ArgParser(prog="llmload capacity", description="each target's capacity within the scenario's SLOs")
    ap.add_argument("scenario")
    ap.add_argument(
        "--results", default="", help="results directory (default: output.dir/NAME-capacity-TIME)"
    )
    ap.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="override a scenario field"
    )
    ap.add_argument("--targets", default="", help="comma-separated subset of targets")
    ap.add_argument("--sim", action="store_true", help="probe every target's `sim:` stand-in (no GPU)")
    ap.add_argument(
        "--workers",
        type=worker_count,
        default=0,
        help="each probe: a master and N local workers (auto: one per core, less one)",
    )
    ap.add_argument("--quiet", action="store_true", help="no line per probe")
    ap.add_argument(
        "--no-reports", action="store_true", help="accepted as `llmload run` does; probes write none"
    )
    ap.add_argument("--vary", choices=["rate", "concurrency"], help="search arrivals per second or streams")
    for opt in ("start", "min", "max", "factor", "precision", "hold-max", "warmup"):
        kind = _duration if opt in ("hold-max", "warmup") else float  # "30s", as the scenario takes it
        ap.add_argument(f"--{opt}", type=kind, help=f"the capacity phase's `{opt.replace('-', '_')}`")
    ap.add_argument("--requests", type=int, help="measured requests per probe")
    ap.add_argument(
        "--at", choices=["slo", "goodput"], help="pass on every SLO figure, or on goodput's share"
    )
    ap.add_argument("--attainment", type=float, help="--at goodput: the share of requests that must be good")
    ap.add_argument("--no-repeat", action="store_true", help="do not probe the boundary again")
    return ap


def _duration(value: str) -> float:
    try:
        return parse_duration(value)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def settings_for(sc: Scenario, a: argparse.Namespace) -> Capacity:
    """The scenario's capacity phase (or the defaults), with the command line's options over it."""
    base: dict[str, Any] = {"executor": "capacity"}
    phases = sc.load.phases
    if len(phases) == 1 and isinstance(phases[0], Capacity):
        base = phases[0].model_dump(exclude_unset=True) | base
    for k in OPTIONS:
        if getattr(a, k) is not None:
            base[k] = getattr(a, k)
    if a.no_repeat:
        base["repeat"] = False
    try:
        return Capacity.model_validate(base)
    except ValidationError as e:
        err = e.errors()[0]
        msg = err["msg"].removeprefix("Value error, ")
        name = ".".join(str(x) for x in err["loc"])
        given = [f"--{k.replace('_', '-')}" for k in OPTIONS if getattr(a, k) is not None]
        if name in OPTIONS and getattr(a, name) is not None:
            raise InputError(f"--{name.replace('_', '-')}: {msg}") from None
        where = f"the capacity phase with {', '.join(given)}" if given else "its capacity phase"
        raise InputError(f"{a.scenario}: {where}: {name + ': ' if name else ''}{msg}") from None


def target_capacity(search: Search, name: str) -> TargetCapacity:
    est = estimate(search.outcomes.get(name, []), search.settings)
    mine = [r for r in search.rows if r.target == name]
    at = [r for r in mine if est.value is not None and r.value == est.value]
    tok = [r.output_tok_s for r in at if r.output_tok_s is not None]
    out_tok_s = sum(tok) / len(tok) if tok else None
    eff = None
    if at:
        try:
            eff = next(e for e in efficiency(load_run(search.results / at[0].dir, with_requests=False)))
        except (BadResults, StopIteration):
            eff = None
    gpus = eff.gpus if eff is not None else None
    cost = eff.cost_per_hour if eff is not None else None
    return TargetCapacity(
        target=name,
        capacity=est.value,
        low=est.low,
        high=est.high,
        bound=est.bound,
        unit="req/s" if search.settings.vary == "rate" else "streams",
        probes=len(mine),
        output_tok_s=out_tok_s,
        gpus=gpus,
        capacity_per_gpu=est.value / gpus if est.value is not None and gpus else None,
        output_tok_s_per_gpu=out_tok_s / gpus if out_tok_s is not None and gpus else None,
        cost_per_hour=cost,
        tokens_per_dollar=out_tok_s * 3600.0 / cost if out_tok_s is not None and cost else None,
        tokens_per_joule=eff.tokens_per_joule if eff is not None else None,
        simulated=_simulated_label(search, name),
    )


def _simulated_label(search: Search, name: str) -> str | None:
    """The target's "simulated engine (profile X)" when it ran on llmload's simulator (config/simulated.py)."""
    sim = simulated_targets(t.model_dump(mode="json") for t in search.sc.targets).get(name)
    return sim.label if sim is not None else None


def capacity_main(argv: list[str]) -> int:
    a = parser().parse_args(argv)
    try:
        sets = (["simulate=true"] if a.sim else []) + a.set
        sc = load_scenario(a.scenario, sets)
        names = [t.name for t in sc.targets]
        wanted = [w.strip() for w in a.targets.split(",") if w.strip()] or names
        unknown = [w for w in wanted if w not in names]
        if unknown:
            raise InputError(
                f"--targets: unknown target(s) {', '.join(unknown)} (the scenario has {', '.join(names)})"
            )
        if sc.slo is None or not sc.slo.figures():
            raise InputError(
                f"{a.scenario}: a capacity search needs `slo:` figures to hold (e.g. ttft_p99_ms)"
            )
        settings = settings_for(sc, a)
        if settings.at == "goodput" and not sc.slo.has_per_request():
            raise InputError(
                f"--at goodput: {a.scenario} sets no per-request SLO (ttft_p99_ms, ttfo_p99_ms, tpot_p50_ms, "
                "e2e_p99_ms or itl_p99_ms): goodput counts the requests that meet them"
            )
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        results = Path(a.results) if a.results else Path(sc.output.dir) / f"{sc.name}-capacity-{stamp}"
        try:
            results.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise InputError(f"--results {results}: cannot create it: {e.strerror}") from None
    except InputError as e:
        print(f"llmload: {e}", file=sys.stderr)
        return EXIT_INPUT
    salt = sc.workload.salt if isinstance(sc.workload.salt, str) else None
    if sc.workload.salt is True:
        salt = "cap" + secrets.token_hex(4)
    # Probes of targets searched at once share this host's cores: --workers is split between them.
    parallel = len(wanted) if sc.load.mode == "parallel" else 1
    search = Search(a, sc, settings, results, salt, workers=a.workers // parallel)
    old = {s: signal.signal(s, lambda n, _f: search.forward(n)) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        if sc.load.mode == "sequential":
            for name in wanted:
                search.target(name)
        else:
            threads = [threading.Thread(target=search.target, args=(n,), daemon=True) for n in wanted]
            for th in threads:
                th.start()
            for th in threads:
                while th.is_alive():
                    th.join(0.2)  # short joins: the main thread stays free for signals
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    return finish(search, wanted)


def finish(search: Search, wanted: list[str]) -> int:
    sc, slo = search.sc, search.sc.slo
    assert slo is not None
    targets = [target_capacity(search, n) for n in wanted]
    reasons = []
    if search.failed:
        status, code = "failed", search.failed_code
        reasons.append(search.failed)
    elif search.signalled:
        status, code = "interrupted", EXIT_SIGINT if search.signalled == "SIGINT" else EXIT_SIGTERM
        reasons.append(f"{search.signalled} received: the search stopped; its last probes were drained")
    else:
        status, code = "done", EXIT_OK
        floor = slo.min_capacity
        short = [
            t.target for t in targets if t.capacity is None or (floor is not None and t.capacity < floor)
        ]
        if short:
            code = EXIT_SLO
            need = f"at least {fmt(floor)}" if floor is not None else "some load that met every SLO"
            reasons.append(f"capacity short of {need}: {', '.join(short)}")
    res = CapacityResult(
        scenario=sc.name,
        status=status,
        exit_code=code,
        vary=search.settings.vary,
        slo=slo.active()
        | ({GOODPUT_SHARE: search.settings.attainment} if search.settings.at == "goodput" else {}),
        settings=search.settings.model_dump(mode="json"),
        targets=targets,
        ratios=ratios(targets),
        probes=sorted(search.rows, key=lambda r: r.number),
        reasons=reasons,
    )
    (search.results / "capacity.json").write_text(res.model_dump_json(indent=2) + "\n")
    (search.results / "capacity.md").write_text(render_markdown(res, sc.cost))
    (search.results / "capacity.html").write_text(render_html(res, sc.cost))
    print(render_text(res))
    verdict = {EXIT_OK: "ok", EXIT_SLO: "capacity short"}.get(code, status)
    print(f"llmload capacity: {verdict} (exit {code}); results in {search.results}", flush=True)
    return code
