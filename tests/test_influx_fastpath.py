"""The request points' fast path (PointFormatter.request) against a straightforward encoding.

The reference below spells the line protocol out field by field, with its own escaping and its
own timestamp counter, so a shortcut in the fast path (a cached series, a prebuilt %-format, the
tag dict keyed by identity) cannot change a byte unnoticed.
"""

from __future__ import annotations

import math
import random

from llmload.measure.records import RequestRecord
from llmload.sinks.influx_points import PointFormatter


def _esc(text: str, measurement: bool = False) -> str:
    out = text.replace(",", "\\,").replace(" ", "\\ ").replace("\n", " ").replace("\r", " ")
    return out if measurement else out.replace("=", "\\=")


def _num(v: float) -> str:
    return repr(float(v))


class Reference:
    def __init__(self, run_id: str, worker: str) -> None:
        self.run_id, self.worker = run_id, worker
        self.used: dict[tuple[str, int], int] = {}

    def line(self, rec: RequestRecord, tags: dict[str, str]) -> str:
        worker = rec.worker if rec.worker and rec.worker != "local" else self.worker
        full = {**tags, "run_id": self.run_id, "status": rec.status, "worker": worker, "phase": rec.phase}
        prefix = ",".join(
            [_esc("llm_request", True)] + [f"{_esc(k)}={_esc(v)}" for k, v in sorted(full.items()) if v]
        )
        us = int(rec.start_time * 1_000_000.0 + 0.5)
        n = self.used.get((prefix, us), 0)
        self.used[(prefix, us)] = n + 1
        ts = us * 1000 + min(n, 999)
        return f"{prefix} {self.fields(rec)} {ts}"

    def fields(self, rec: RequestRecord) -> str:
        ttft, e2e, itl, n_out, n_in = rec.ttft_s, rec.e2e_s, rec.itl_s, rec.output_tokens, rec.prompt_tokens
        lag = None if rec.intended_time is None else max(0.0, rec.start_time - rec.intended_time)
        if ttft is not None and e2e is not None and itl and n_in is not None and n_out >= 2:
            vals = [ttft, e2e, (e2e - ttft) / (n_out - 1), sum(itl) / len(itl), max(itl)]
            if all(math.isfinite(v) for v in vals + [lag or 0.0]):
                names = ["ttft_ms", "e2e_ms", "tpot_ms", "itl_mean_ms", "itl_max_ms"]
                parts = [f"index={rec.index}.0", f"output_tokens={n_out}.0", f"prompt_tokens={n_in}.0"]
                parts += [f"{k}={v * 1000.0:.3f}" for k, v in zip(names, vals, strict=True)]
                if lag is not None:
                    parts.append(f"schedule_lag_ms={lag * 1000.0:.3f}")
                return ",".join(parts)
        ms = {
            "ttft_ms": ttft,
            "e2e_ms": e2e,
            "tpot_ms": rec.tpot_s,
            "itl_mean_ms": sum(itl) / len(itl) if itl else None,
            "itl_max_ms": max(itl) if itl else None,
            "schedule_lag_ms": rec.schedule_lag_s,
        }
        parts = [f"index={_num(rec.index)}", f"output_tokens={_num(n_out)}"]
        if n_in is not None:
            parts.append(f"prompt_tokens={_num(n_in)}")
        for k, v in ms.items():
            if v is not None and math.isfinite(round(v * 1000.0, 3)):
                parts.append(f"{k}={_num(round(v * 1000.0, 3))}")
        return ",".join(parts)


def _records(rng: random.Random, n: int) -> list[RequestRecord]:
    t0 = 1_764_676_805.0
    out = []
    for i in range(n):
        n_out = rng.choice([0, 1, 2, 51, 300])
        itl = [rng.uniform(0.001, 0.2) for _ in range(max(0, n_out - 1))]
        if itl and rng.random() < 0.05:
            itl[0] = rng.choice([math.nan, math.inf])
        start = t0 + rng.choice([i * 1e-3, 0.0, 1e-7 * i])  # some share a microsecond
        out.append(
            RequestRecord(
                target="t",
                status=rng.choice(["ok", "ok", "http_5xx", "truncated"]),
                index=i,
                worker=rng.choice(["local", "w-1", "w 2,=x"]),
                phase=rng.choice(["", "warm up", "p=1,%s"]),
                start_time=start,
                intended_time=rng.choice([None, start - rng.uniform(0, 0.01), start + 0.001]),
                ttft_s=rng.choice([None, rng.uniform(0.01, 2.0)]),
                e2e_s=rng.choice([None, rng.uniform(2.0, 30.0)]),
                itl_s=itl,
                prompt_tokens=rng.choice([None, 128, 4096]),
                output_tokens=n_out,
            )
        )
    return out


def test_fast_path_writes_the_reference_bytes() -> None:
    rng = random.Random(7)
    tag_sets = [
        {"target": "vllm-awq", "engine": "vllm"},
        {"target": "a b,c=d", "gpus": "2", "note": "100%", "empty": ""},
        {"target": "line\nbreak", "model": "Llama 3=70B"},
    ]
    fast, ref = PointFormatter("run 1,x", "local"), Reference("run 1,x", "local")
    for rec in _records(rng, 3000):
        tags = rng.choice(tag_sets)
        assert fast.request(rec, tags) == ref.line(rec, tags), rec
    # a fresh dict with the same tags (another sink, a copy) names the same series
    copy = dict(tag_sets[1])
    rec = _records(rng, 1)[0]
    assert fast.request(rec, copy) == ref.line(rec, copy)
