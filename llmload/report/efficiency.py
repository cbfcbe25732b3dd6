"""Cost and efficiency per target: tokens per GPU, per dollar and per joule.

- GPUs: the target's ``labels.gpus`` when it is a whole number, else the number of distinct
  ``gpu`` ids in its telemetry.jsonl samples; unknown otherwise.
- Output tok/s per GPU: ``throughput.output_tok_s / gpus``.
- Tokens per dollar: ``output_tok_s * 3600 / cost_per_hour``.
- Tokens per joule: output tokens counted by timeseries.jsonl intervals that end inside the span of
  the target's ``energy_joules`` samples, divided by the energy used over that span (last minus
  first cumulative reading, summed over the target's GPUs). Without energy counters, the energy is
  the integral of ``power_watts`` samples over time (trapezoids). Needs GPU telemetry.
"""

from __future__ import annotations

from dataclasses import dataclass

from llmload.report.results import RunData
from llmload.schema.results_model import TargetBlock


@dataclass(frozen=True)
class Efficiency:
    target: str
    gpus: int | None
    gpus_source: str  # "labels", "telemetry" or ""
    output_tok_s: float | None
    tok_s_per_gpu: float | None
    cost_per_hour: float | None
    tokens_per_dollar: float | None
    energy_j: float | None
    energy_source: str  # "energy_joules", "power_watts" (integrated) or ""
    tokens_per_joule: float | None


def _gpus(block: TargetBlock, run: RunData, target: str) -> tuple[int | None, str]:
    raw = block.labels.get("gpus")
    try:
        n = int(str(raw)) if raw is not None else None
    except ValueError:
        n = None
    if n and n > 0:
        return n, "labels"
    ids = {s.gpu for s in run.telemetry if s.target == target and s.source == "gpu"}
    ids.discard(None)
    return (len(ids), "telemetry") if ids else (None, "")


def _series(run: RunData, target: str, metric: str) -> dict[str, list[tuple[float, float]]]:
    per_gpu: dict[str, list[tuple[float, float]]] = {}
    for s in run.telemetry:
        if s.target == target and s.metric == metric and run.in_window(s.t):
            per_gpu.setdefault(s.gpu or "", []).append((s.t, s.value))
    for samples in per_gpu.values():
        samples.sort()
    return per_gpu


def _energy(run: RunData, target: str) -> tuple[float | None, float | None, float | None, str]:
    """(joules used, span start, span end, source), summed over the target's GPUs.

    From cumulative ``energy_joules`` (last minus first reading) when present, else by integrating
    ``power_watts`` over time (trapezoids between samples).
    """
    for metric in ("energy_joules", "power_watts"):
        total = 0.0
        starts: list[float] = []
        ends: list[float] = []
        for samples in _series(run, target, metric).values():
            if len(samples) < 2:
                continue
            if metric == "energy_joules":
                total += max(0.0, samples[-1][1] - samples[0][1])
            else:
                total += sum(
                    (t2 - t1) * (w1 + w2) / 2.0
                    for (t1, w1), (t2, w2) in zip(samples, samples[1:], strict=False)
                )
            starts.append(samples[0][0])
            ends.append(samples[-1][0])
        if starts and total > 0:
            return total, min(starts), max(ends), metric
    return None, None, None, ""


def efficiency(run: RunData) -> list[Efficiency]:
    out: list[Efficiency] = []
    for target, block in run.targets.items():
        tps = block.throughput.output_tok_s
        gpus, src = _gpus(block, run, target)
        cost = block.cost_per_hour if block.cost_per_hour else None  # 0 or unset: no cost figures
        joules, a, b, energy_source = _energy(run, target)
        tpj = None
        if joules and a is not None and b is not None:
            lines = [x for x in run.timeseries if x.target == target and a < x.t <= b]
            if lines:
                tpj = sum(x.output_tokens for x in lines) / joules
            elif tps is not None:
                tpj = tps * (b - a) / joules
        out.append(
            Efficiency(
                target=target,
                gpus=gpus,
                gpus_source=src,
                output_tok_s=tps,
                tok_s_per_gpu=tps / gpus if tps is not None and gpus else None,
                cost_per_hour=cost,
                tokens_per_dollar=tps * 3600.0 / cost if tps is not None and cost else None,
                energy_j=joules,
                energy_source=energy_source,
                tokens_per_joule=tpj,
            )
        )
    return out
