"""llmload's reasoning figures against a real vLLM server (the CPU build) with a reasoning parser.

The tiny local Llama's tokenizer has no <think>/</think>; this test copies the model and turns two
rare vocabulary entries into them (the weights are random: any two ids do). vLLM 0.32 serves it with
``--reasoning-parser deepseek_r1``: what comes before </think> streams as reasoning, the rest as
content. The model is steered by the thinking budget (``thinking_token_budget``, llmload's
``thinking_budget`` knob), which makes vLLM force </think> after that many reasoning tokens, with
<think> at the end of the prompt as DeepSeek-R1's template puts it.

What vLLM 0.32 itself reports, found here (2026-12-04): ``completion_tokens_details.reasoning_tokens``
counts only tokens between a *generated* <think> and </think>, so with <think> in the prompt it says
0 while it streams reasoning; and it streams no chunk for </think> (nor for some forced tokens), so
chunks are fewer than completion_tokens. llmload therefore counts reasoning from the chunks there
(``reasoning_tokens_source: chunks``), and the checks are what the stream itself proves: TTFO >= TTFT
on every request, the reasoning phase within the budget, an answer phase after it, both phases in
most streams, and output tokens equal to the server's usage.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from llmload.client.openai_stream import build_request, stream_request
from llmload.client.transport import GeventTransport
from llmload.measure.records import RequestRecord
from tests.engines import SERVED, start_vllm, tiny_model

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]
THINK, END_THINK = "<think>", "</think>"


def think_model(tmp_path: Path) -> Path:
    """A copy of the tiny model whose tokenizer has <think> and </think> (two merged-word ids reused)."""
    out = tmp_path / "tiny-think"
    shutil.copytree(tiny_model(tmp_path), out)
    tok = json.loads((out / "tokenizer.json").read_text())
    model, added = tok["model"], tok["added_tokens"]

    def parts(m: str | list[str]) -> list[str]:
        return m if isinstance(m, list) else m.split(" ")

    results = {"".join(parts(m)) for m in model["merges"]}
    inputs = {p for m in model["merges"] for p in parts(m)}
    spare = [k for k, _ in sorted(model["vocab"].items(), key=lambda kv: -kv[1]) if k in results - inputs][:2]
    model["merges"] = [m for m in model["merges"] if "".join(parts(m)) not in spare]
    config = json.loads((out / "tokenizer_config.json").read_text())
    for name, old in zip((THINK, END_THINK), spare, strict=True):
        i = model["vocab"].pop(old)
        model["vocab"][name] = i
        entry = {"content": name, "lstrip": False, "normalized": False, "rstrip": False, "single_word": False}
        added.append({"id": i, **entry, "special": False})
        config.setdefault("added_tokens_decoder", {})[str(i)] = {**entry, "special": False}
    (out / "tokenizer.json").write_text(json.dumps(tok))
    (out / "tokenizer_config.json").write_text(json.dumps(config))
    return out


def test_reasoning_and_answer_phases_on_vllm(tmp_path: Path) -> None:
    with start_vllm(think_model(tmp_path), extra_args=["--reasoning-parser", "deepseek_r1"]) as server:
        tr = GeventTransport(server.base_url)
        recs = []
        for i, budget in enumerate((3, 4, 5, 6, 3, 4, 5, 6)):
            req = build_request(
                api="chat",
                model=SERVED,
                prompt=f"question {i} {THINK}",
                max_tokens=16,
                ignore_eos=True,
                extra_body={"thinking_token_budget": budget},
            )
            rec = stream_request(tr, req, RequestRecord(target="vllm", index=i))
            recs.append((budget, rec))
        tr.close()
    for budget, rec in recs:
        assert rec.status == "ok", (rec.status, rec.error)
        assert rec.output_tokens == 16 and rec.output_tokens_source == "usage"
        assert rec.ttft_s is not None and rec.ttfo_s is not None and rec.ttfo_s >= rec.ttft_s
        assert rec.reasoning_chunks <= budget, (budget, rec.reasoning_chunks)
        assert rec.reasoning_tokens + rec.answer_tokens == rec.output_tokens and rec.answer_tokens > 0
    # Random weights: a reasoning token can decode to "" and vLLM then streams no delta for it, so
    # a request's reasoning phase may be invisible; most show one, before the answer. (By chunk order:
    # on a busy CPU, vLLM's chunks often share one read, so TTFO can equal TTFT to the microsecond.)
    both = [rec for _, rec in recs if rec.reasoning_chunks and rec.answer_split == rec.reasoning_chunks]
    assert len(both) >= len(recs) // 2, [(b, r.reasoning_chunks) for b, r in recs]
