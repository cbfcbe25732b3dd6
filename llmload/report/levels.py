"""Sweeps judged level by level, and the run judged on its capacity (docs/reports.md "Sweeps").

A sweep's top levels are there to break the SLOs, so whole-run figures would make every sweep
"SLO missed". Each level is judged on its own figures instead, and a sweep run's SLO verdict is
its capacity: per target, the highest level value that met every SLO *and reached its load*. With
``slo.min_capacity`` that value must be at least ``min_capacity``; without it, some level must have
met every SLO.

A level that did not reach its load cannot certify it ("short"):

- closed loop: fewer streams ever open at once than its users (``max_open``), e.g. a level of 256
  users given 60 requests (measured: the h100 sweep's suggested shortcut did exactly that);
- open loop: an achieved rate below ``REACHED`` of its target rate (``max_vus``, drops, a client
  that fell behind).

A run is a sweep when at least two of its levels carry a value (``c=8``, ``rate=4``).
"""

from __future__ import annotations

from dataclasses import dataclass

from llmload.config.slo_spec import SloSpec
from llmload.report.slo import SloResult, evaluate_block, fmt, slo_from_summary
from llmload.schema.results_model import Summary

REACHED = 0.9  # share of a level's target load it must reach to count


@dataclass(frozen=True)
class LevelRow:
    """One target at one level: the load asked and got, and each SLO on the level's own figures."""

    level: str
    value: float | None
    target: str
    closed_loop: bool
    wanted: float | None  # users, or arrivals per second
    max_open: int | None  # the most streams open at one moment
    achieved_rate: float | None  # requests sent per second over the level
    schedule_lag_p99_ms: float | None  # open loop: how late arrivals were sent
    requests: int
    results: tuple[SloResult, ...]
    short: str | None  # why the level did not reach its load, when it did not

    @property
    def met(self) -> bool:
        return all(r.passed for r in self.results)

    @property
    def counts(self) -> bool:
        """Met every SLO at the load it asked for: it can stand for the target's capacity."""
        return self.met and self.short is None


@dataclass(frozen=True)
class LevelVerdict:
    """Per target: the highest level that counts (its capacity), and the levels that did not."""

    target: str
    best_level: str | None
    best_value: float | None
    passed_levels: tuple[str, ...]
    failed_levels: tuple[str, ...]
    short_levels: tuple[str, ...]


def is_sweep(summary: Summary) -> bool:
    return sum(1 for lv in summary.levels if lv.value is not None) >= 2


def level_rows(summary: Summary, slo: SloSpec | None) -> list[LevelRow]:
    """Every (level, target) of a sweep, in run order; [] for a run that is not one."""
    if not is_sweep(summary):
        return []
    rows = []
    for lv in summary.levels:
        for target, block in lv.targets.items():
            closed = block.users is not None
            wanted: float | None = float(block.users) if block.users is not None else None
            if not closed and block.rate is not None:
                wanted = block.rate.target
            achieved = block.rate.achieved if block.rate is not None else None
            short = None
            if closed and wanted and (block.max_open or 0) < REACHED * wanted:
                short = f"at most {block.max_open or 0} of {wanted:g} streams open"
            elif not closed and wanted and achieved is not None and achieved < REACHED * wanted:
                short = f"{fmt(achieved)} of {wanted:g} requests/s sent"
            lag = block.latency_ms.get("schedule_lag")
            rows.append(
                LevelRow(
                    level=lv.level,
                    value=lv.value,
                    target=target,
                    closed_loop=closed,
                    wanted=wanted,
                    max_open=block.max_open,
                    achieved_rate=achieved,
                    schedule_lag_p99_ms=lag.p99 if lag is not None else None,
                    requests=block.requests.sent,
                    results=tuple(evaluate_block(target, block, slo, lv.level)) if slo is not None else (),
                    short=short,
                )
            )
    return rows


def verdicts(rows: list[LevelRow]) -> dict[str, LevelVerdict]:
    """Per target, the highest level value (else the last in run order) that counts."""
    out: dict[str, LevelVerdict] = {}
    for target in dict.fromkeys(r.target for r in rows):
        mine = [r for r in rows if r.target == target]
        counting = [(r.value if r.value is not None else float(i), r) for i, r in enumerate(mine) if r.counts]
        best = max(counting, key=lambda p: p[0])[1] if counting else None
        out[target] = LevelVerdict(
            target,
            best.level if best else None,
            best.value if best else None,
            tuple(r.level for r in mine if r.counts),
            tuple(r.level for r in mine if not r.met),
            tuple(r.level for r in mine if r.met and r.short is not None),
        )
    return out


def capacity_results(rows: list[LevelRow], slo: SloSpec | None) -> list[SloResult]:
    """A sweep's SLO verdict, one result per target: its capacity against ``min_capacity`` (or, when
    none is set, against its lowest level: some level met every SLO)."""
    if slo is None or not rows:
        return []
    out = []
    for target, v in verdicts(rows).items():
        values = [r.value for r in rows if r.target == target and r.value is not None]
        floor = slo.min_capacity if slo.min_capacity is not None else min(values, default=0.0)
        passed = v.best_value is not None and v.best_value >= floor
        out.append(SloResult(target, "min_capacity", v.best_value, floor, passed, v.best_level))
    return out


HEADERS = ["level", "target", "load", "streams open (max)", "sent/s", "lag p99 ms", "requests"]


def table_rows(rows: list[LevelRow], slo: SloSpec | None) -> tuple[list[str], list[list[str]]]:
    """The per-level table (terminal, report.md, report.html): headers and cells."""
    keys = list(slo.figures()) if slo is not None else []
    headers = [*HEADERS, *keys, "judged"]
    cells = []
    for r in rows:
        by_key = {x.slo: x for x in r.results}
        load = f"{r.wanted:g} streams" if r.closed_loop and r.wanted is not None else f"{fmt(r.wanted)}/s"
        judged = "short: " + r.short if r.short else ("met" if r.met else "missed")
        cells.append(
            [
                r.level,
                r.target,
                load,
                "-" if r.max_open is None else str(r.max_open),
                "-" if r.closed_loop else fmt(r.achieved_rate),  # closed loop: the streams are the load
                fmt(r.schedule_lag_p99_ms),
                str(r.requests),
                *[
                    ("PASS " if by_key[k].passed else "FAIL ") + fmt(by_key[k].measured)
                    if k in by_key
                    else "-"
                    for k in keys
                ],
                judged,
            ]
        )
    return headers, cells


def render_text(rows: list[LevelRow], slo: SloSpec | None) -> str:
    """The per-level table and each target's capacity, for the terminal."""
    if not rows:
        return ""
    headers, cells = table_rows(rows, slo)
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(cell, widths, strict=True)).rstrip() for cell in cells]
    for v in verdicts(rows).values():
        short = f" (short: {', '.join(v.short_levels)})" if v.short_levels else ""
        lines.append(f"capacity {v.target}: {v.best_level or 'no level met every SLO'}{short}")
    return "\n".join(lines)


def summary_text(summary: Summary) -> str:
    """The terminal's per-level table of a sweep run ("" for other runs)."""
    try:
        slo = slo_from_summary(summary)
    except ValueError:  # a bad run.slo is the report's to say (exit 2 there)
        slo = None
    return render_text(level_rows(summary, slo), slo)
