"""A capacity search's results: capacity.json (typed), and its table for the terminal and capacity.md.

Per target: the capacity (llmload/capacity/search.py) with its interval, in requests per second
(or streams) and in output tokens per second measured by the probe at the capacity (the mean over
its repeats), per GPU (``labels.gpus`` or telemetry), per dollar (``cost_per_hour``) and per joule
(GPU energy telemetry), as llmload/report/efficiency.py defines them for any run. Between two
targets, the ratio of their capacities (per GPU when both GPU counts are known), its interval from
the ends of theirs: ``low = low_a / high_b``, ``high = high_a / low_b``.
"""

from __future__ import annotations

from itertools import combinations

from pydantic import BaseModel, ConfigDict

from llmload.report.slo import fmt


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class ProbeFigure(_Model):
    measured: float | None
    threshold: float
    low: float | None
    high: float | None
    passed: bool


class ProbeRow(_Model):
    number: int
    target: str
    value: float
    repeat: int
    dir: str
    exit_code: int
    verdict: str  # pass | fail | marginal pass | marginal fail | invalid | interrupted | no result
    ended_early: bool = False
    note: str = ""
    requests: int = 0
    achieved_rate: float | None = None
    output_tok_s: float | None = None
    tpot_p50_ms: float | None = None
    # the p99s the page charts against load (the probe's measured requests, as its verdict reads them)
    ttft_p99_ms: float | None = None
    itl_p99_ms: float | None = None
    e2e_p99_ms: float | None = None
    figures: dict[str, ProbeFigure] = {}


class TargetCapacity(_Model):
    target: str
    capacity: float | None
    low: float | None
    high: float | None
    bound: str  # found | at_least_max | below_min | unsettled
    unit: str  # req/s | streams
    probes: int
    output_tok_s: float | None = None
    gpus: int | None = None
    capacity_per_gpu: float | None = None
    output_tok_s_per_gpu: float | None = None
    cost_per_hour: float | None = None
    tokens_per_dollar: float | None = None
    tokens_per_joule: float | None = None
    simulated: str | None = None  # "simulated engine (profile X)" when it ran on llmload's simulator


class Ratio(_Model):
    better: str
    other: str
    per_gpu: bool
    value: float
    low: float | None
    high: float | None


class CapacityResult(_Model):
    scenario: str
    status: str  # done | interrupted | failed
    exit_code: int
    vary: str
    slo: dict[str, float]
    settings: dict[str, object]
    targets: list[TargetCapacity]
    ratios: list[Ratio]
    probes: list[ProbeRow]
    reasons: list[str] = []


def _scaled(t: TargetCapacity, per_gpu: bool) -> tuple[float | None, float | None, float | None]:
    k = 1.0 / t.gpus if per_gpu and t.gpus else 1.0
    return tuple(None if v is None else v * k for v in (t.capacity, t.low, t.high))  # type: ignore[return-value]


def ratios(targets: list[TargetCapacity]) -> list[Ratio]:
    """For each pair of targets with a capacity: the larger over the smaller, with its interval."""
    out = []
    for a, b in combinations([t for t in targets if t.capacity], 2):
        per_gpu = bool(a.gpus and b.gpus)
        (ca, la, ha), (cb, lb, hb) = _scaled(a, per_gpu), _scaled(b, per_gpu)
        assert ca and cb
        if ca < cb:
            a, b, (ca, la, ha), (cb, lb, hb) = b, a, (cb, lb, hb), (ca, la, ha)
        assert ca and cb
        low = la / hb if la is not None and hb else None
        high = ha / lb if ha is not None and lb else None
        out.append(Ratio(better=a.target, other=b.target, per_gpu=per_gpu, value=ca / cb, low=low, high=high))
    return out


def _interval(low: float | None, high: float | None) -> str:
    return f"({fmt(low) if low is not None else '?'}-{fmt(high) if high is not None else 'open'})"


def slo_words(slo: dict[str, float]) -> str:
    names = {
        "ttft_p99_ms": "TTFT p99 <= {} ms",
        "itl_p99_ms": "ITL p99 <= {} ms",
        "tpot_p50_ms": "TPOT p50 <= {} ms",
        "e2e_p99_ms": "E2E p99 <= {} ms",
        "error_rate": "error rate <= {}",
        "min_output_tok_s": "output >= {} tok/s",
    }
    share = slo.get("goodput_share")
    if share is not None:  # --at goodput: the per-request bounds each request must meet
        names.update(
            ttft_p99_ms="TTFT <= {} ms", ttfo_p99_ms="TTFO <= {} ms", itl_p99_ms="largest gap <= {} ms"
        )
        names.update(tpot_p50_ms="TPOT <= {} ms", e2e_p99_ms="E2E <= {} ms")
        each = ", ".join(
            names[k].format(fmt(v))
            for k, v in slo.items()
            if k in names and k not in ("error_rate", "min_output_tok_s")
        )
        return f"goodput: at least {share:.0%} of requests ok with {each}"
    return ", ".join(names[k].format(fmt(v)) for k, v in slo.items() if k in names)


def ratio_sentence(r: Ratio, res: CapacityResult) -> str:
    what = "request rate" if res.vary == "rate" else "concurrent streams"
    per = " per GPU" if r.per_gpu else ""
    return (
        f"{r.better} carries {r.value:.2f}x {_interval(r.low, r.high)} the {what} of {r.other}{per} "
        f"at {slo_words(res.slo)}"
    )


HEADERS = [
    "target",
    "capacity",
    "interval",
    "output tok/s",
    "per GPU",
    "tokens per $",
    "tokens per J",
    "probes",
]


def table(res: CapacityResult) -> tuple[list[str], list[list[str]]]:
    rows = []
    for t in res.targets:
        cap = "-" if t.capacity is None else f"{fmt(t.capacity)} {t.unit}"
        if t.bound == "at_least_max":
            cap = f">= {cap}"
        elif t.bound == "below_min":
            cap = f"< {fmt(t.high)} {t.unit}"
        elif t.bound == "unsettled":
            cap += " (unsettled)"
        per_gpu = "-" if t.capacity_per_gpu is None else f"{fmt(t.capacity_per_gpu)} {t.unit}"
        if t.output_tok_s_per_gpu is not None:
            per_gpu += f", {fmt(t.output_tok_s_per_gpu)} tok/s"
        rows.append(
            [
                t.target,
                cap,
                _interval(t.low, t.high),
                fmt(t.output_tok_s),
                per_gpu,
                fmt(t.tokens_per_dollar),
                fmt(t.tokens_per_joule),
                str(t.probes),
            ]
        )
    return HEADERS, rows


def render_text(res: CapacityResult) -> str:
    headers, rows = table(res)
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    lines = [f"capacity at {slo_words(res.slo)} ({res.status}):"]
    lines.append("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip())
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    lines += [ratio_sentence(r, res) for r in res.ratios]
    lines += simulated_lines(res)
    lines += res.reasons
    return "\n".join(lines)


def simulated_lines(res: CapacityResult) -> list[str]:
    """``target: simulated engine (profile X)`` for each target searched on llmload's simulator."""
    return [f"{t.target}: {t.simulated}" for t in res.targets if t.simulated]
