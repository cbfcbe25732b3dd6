"""A capacity search's report: capacity.md here, capacity.html in page_html.py (its charts:
load_svg.py and report/pareto_svg.py).

Both show the capacity table (llmload/capacity/outcome.py), the ratio between engines, a decision
summary (the winner per figure at capacity: the capacity itself with its interval, output tok/s,
tokens per dollar and per joule; llmload/report/decision.py), self-hosting against the API when
``cost.api_price_per_mtok`` is set (llmload/report/breakeven.py, at each target's capacity), the
Pareto frontier of the probes (llmload/report/pareto.py: output tok/s per user against per GPU, a
filled point for a probe that met every SLO), every probe with a link to its results directory, and
what the words mean (words.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import quote

from llmload.capacity.outcome import (
    CapacityResult,
    ProbeRow,
    ratio_sentence,
    simulated_lines,
    slo_words,
    table,
)
from llmload.capacity.words import DEFINITIONS
from llmload.config.cost_spec import CostSpec
from llmload.report.breakeven import BreakEven
from llmload.report.decision import DecisionRow, render_rows, row_from_values
from llmload.report.pareto import ParetoPoint
from llmload.report.slo import fmt

SIMULATED = (
    "Simulated: these figures (GPU telemetry included) come from llmload's simulator, not a real engine:"
)


def decision(res: CapacityResult) -> list[DecisionRow]:
    """The winner per figure at each target's capacity (no interval where none is measured)."""
    per_gpu = all(t.gpus for t in res.targets)
    unit = ("req/s" if res.vary == "rate" else "streams") + (" per GPU" if per_gpu else "")
    k = {t.target: (1.0 / t.gpus if per_gpu and t.gpus else 1.0) for t in res.targets}
    caps = {t.target: None if t.capacity is None else t.capacity * k[t.target] for t in res.targets}
    ends = {
        t.target: (t.low * k[t.target], t.high * k[t.target])
        for t in res.targets
        if t.low is not None and t.high is not None
    }
    rows = [
        row_from_values(
            "capacity at SLO",
            unit,
            caps,
            lower_is_better=False,
            intervals=ends if len(ends) == len(caps) else None,
            note="interval: highest clear pass to lowest clear miss",
        ),
    ]
    # measured once, by the probe at each target's capacity: no interval
    unmeasured: list[tuple[str, str, dict[str, float | None]]] = [
        (
            "output tok/s at capacity" + (" per GPU" if per_gpu else ""),
            "tok/s",
            {t.target: t.output_tok_s_per_gpu if per_gpu else t.output_tok_s for t in res.targets},
        ),
        ("tokens per $ at capacity", "tok/$", {t.target: t.tokens_per_dollar for t in res.targets}),
        ("tokens per J at capacity", "tok/J", {t.target: t.tokens_per_joule for t in res.targets}),
    ]
    for figure, fig_unit, values in unmeasured:
        rows.append(row_from_values(figure, fig_unit, values, lower_is_better=False, note="no interval"))
    return [r for r in rows if r is not None]


def break_even(res: CapacityResult, cost: CostSpec | None) -> list[BreakEven]:
    if cost is None or cost.api_price_per_mtok is None:
        return []
    unit = "req/s" if res.vary == "rate" else "streams"
    return [
        BreakEven(
            t.target,
            t.cost_per_hour,
            cost.api_price_per_mtok,
            t.output_tok_s,
            f"at its capacity {fmt(t.capacity)} {unit}" if t.output_tok_s else "no capacity measured",
        )
        for t in res.targets
        if t.cost_per_hour
    ]


def pareto_points(res: CapacityResult) -> list[ParetoPoint]:
    gpus = {t.target: t.gpus for t in res.targets}
    out = []
    for p in res.probes:
        g = gpus.get(p.target)
        if p.tpot_p50_ms and p.output_tok_s and g:
            label = f"{fmt(p.value)}/s" if res.vary == "rate" else f"c={int(p.value)}"
            met = p.verdict in ("pass", "marginal pass")
            out.append(ParetoPoint(p.target, label, 1000.0 / p.tpot_p50_ms, p.output_tok_s / g, met))
    return out


def _md_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    def cell(v: str) -> str:
        return v.replace("|", "\\|")

    return ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)] + [
        "| " + " | ".join(cell(c) for c in r) + " |" for r in rows
    ]


def probe_rows(res: CapacityResult) -> tuple[list[str], list[list[str]]]:
    headers = [
        "#",
        "target",
        "load",
        "verdict",
        "requests",
        "sent/s",
        "output tok/s",
        "TPOT p50 ms",
        "note",
        "results",
    ]
    rows = []
    for p in res.probes:
        load = f"{fmt(p.value)}/s" if res.vary == "rate" else f"{int(p.value)} streams"
        again = f" (repeat {p.repeat})" if p.repeat else ""
        early = "ended early" if p.ended_early else ""
        note = "; ".join(x for x in (early, p.note) if x)
        rows.append(
            [
                str(p.number),
                p.target,
                load + again,
                p.verdict,
                str(p.requests),
                fmt(p.achieved_rate),
                fmt(p.output_tok_s),
                fmt(p.tpot_p50_ms),
                note,
                p.dir,
            ]
        )
    return headers, rows


def probe_href(p: ProbeRow, name: str = "") -> str:
    """A link to the probe's results directory (or a file in it; "log": its console log beside it),
    relative to the capacity directory: it works wherever that directory is opened or moved."""
    if name == "log":
        return quote(p.dir + ".log")
    return quote(p.dir + "/" + name)


def _md_links(headers: list[str], rows: list[list[str]]) -> tuple[list[str], list[list[str]]]:
    """The probes' rows with their last cell (the results directory) a link."""
    return headers, [r[:-1] + [f"[{r[-1]}]({quote(r[-1])}/)"] for r in rows]


def render_markdown(res: CapacityResult, cost: CostSpec | None) -> str:
    headers, rows = table(res)
    out = [f"# Capacity: {res.scenario}", "", f"Within {slo_words(res.slo)}; status: {res.status}.", ""]
    sims = simulated_lines(res)
    if sims:
        out += [f"> **{SIMULATED}** " + "; ".join(sims) + ".", ""]
    out += _md_table(headers, rows)
    out += [""] + [f"- {ratio_sentence(r, res)}" for r in res.ratios]
    dec = decision(res)
    if len(res.targets) > 1 and dec:
        out += ["", "## Decision summary", "", *_md_table(*render_rows(dec))]
    be = break_even(res, cost)
    if be:
        out += ["", "## Self-hosting against the API", "", *[f"- {b.sentence()}" for b in be]]
    points = pareto_points(res)
    if points:
        out += ["", "## Pareto frontier (probes)", ""]
        out += _md_table(
            ["target", "probe", "tok/s per user", "tok/s per GPU", "met every SLO"],
            [
                [p.target, p.label, fmt(p.per_user_tok_s), fmt(p.per_gpu_tok_s), "yes" if p.met_slo else "no"]
                for p in points
            ],
        )
    out += ["", "## Probes", "", *_md_table(*_md_links(*probe_rows(res)))]
    out += ["", *[f"- {r}" for r in res.reasons]]
    out += ["", "## What the words mean", "", *[f"- **{k}**: {v}" for k, v in DEFINITIONS]]
    return "\n".join(out).rstrip() + "\n"
