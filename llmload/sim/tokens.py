"""Deterministic stand-ins for a tokenizer and a sampler.

- Prompt tokens: each whitespace-separated word counts ceil(len(word) / 8) tokens (one per common
  English word, as Llama-3's 128k vocabulary mostly gives; long words count more); each chat message
  adds 4 template tokens, the assistant header 3 and begin-of-text 1 (Llama-3-like).  Token ids are hashes of (word, piece), so equal prompt prefixes give equal block hashes.
- Output length: ``max_tokens`` with ignore_eos (or min_tokens >= max_tokens); otherwise a lognormal
  natural stop length drawn from a generator seeded by (simulator seed, request seed, request content).
- Reasoning (profiles with ``reasoning``): the first tokens of the output are reasoning, their count
  drawn from a generator of its own (so a profile without reasoning draws exactly as before), scaled by
  the request's effort, capped by its thinking budget; the answer's length follows (ignore_eos: up to
  max_tokens). Reasoning that reaches max_tokens leaves no answer token.
- Shaped answers (JSON or a tool call asked for): the answer is a document drawn from the schema
  (llmload/sim/shapes.py), one piece a token; it stops when the document is complete, whatever
  ignore_eos says (a grammar allows nothing after it), unless max_tokens cuts it first.
- Token text: short pseudo-words such as " tok123".
"""

from __future__ import annotations

import hashlib
import math
import random
import zlib
from collections.abc import Iterable
from dataclasses import dataclass

from llmload.sim.profiles import EFFORT_SCALE, OutputLength, Reasoning
from llmload.sim.shapes import Ask, pieces

CHARS_PER_TOKEN = 8
MESSAGE_OVERHEAD = 4
ASSISTANT_HEADER = 3
TOKEN_TEXTS: tuple[str, ...] = tuple(f" tok{i}" for i in range(1000))


def word_token_ids(text: str) -> list[int]:
    """Pseudo token ids of a text: ceil(len(word)/8) ids per whitespace word."""
    ids: list[int] = []
    for word in text.split():
        b = word.encode()
        for piece in range(max(1, math.ceil(len(word) / CHARS_PER_TOKEN))):
            ids.append(zlib.crc32(b, piece))
    return ids


def chat_token_ids(messages: Iterable[tuple[str, str]]) -> list[int]:
    """Token ids of chat messages given as (role, content) pairs, with template overhead."""
    ids: list[int] = [1]  # begin-of-text
    for role, content in messages:
        role_id = zlib.crc32(role.encode(), 7)
        ids.extend((2, role_id, 3, 4))  # header start, role, header end, newline
        ids.extend(word_token_ids(content))
    ids.extend((2, zlib.crc32(b"assistant", 7), 3)[:ASSISTANT_HEADER])
    return ids


def prompt_token_ids(prompt: str) -> list[int]:
    """Token ids of a completions prompt (begin-of-text + words)."""
    return [1, *word_token_ids(prompt)]


@dataclass(frozen=True)
class Plan:
    """What a request will do: how many tokens, why it stops, whether (and where) it faults."""

    output_tokens: int
    finish_reason: str  # "length" | "stop"
    fault_at: int | None  # abort after this many tokens (None: no fault)
    text_offset: int  # where its pseudo-words start in TOKEN_TEXTS
    reasoning_tokens: int = 0  # the first this many output tokens are reasoning
    pieces: tuple[str, ...] = ()  # a shaped answer's token texts (JSON), after the reasoning
    tool: str = ""  # the function a tool-call answer calls


def content_digest(payload: bytes) -> int:
    return int.from_bytes(hashlib.blake2b(payload, digest_size=8).digest(), "big")


def plan_request(
    *,
    max_tokens: int,
    min_tokens: int,
    ignore_eos: bool,
    dist: OutputLength,
    fault_rate: float,
    sim_seed: int,
    request_seed: int | None,
    digest: int,
    reasoning: Reasoning | None = None,
    effort: str | None = None,
    thinking_budget: int | None = None,
    ask: Ask | None = None,
) -> Plan:
    """Decide output length, finish reason and fault for one request, deterministically."""
    seed = (sim_seed, request_seed if request_seed is not None else -1, digest)
    rng = random.Random(hash(seed))
    natural = max(dist.min, round(dist.median * math.exp(dist.sigma * rng.gauss(0.0, 1.0))))
    r = 0
    if reasoning is not None:
        r = _reasoning_length(reasoning, random.Random(hash((*seed, "reasoning"))), effort, thinking_budget)
        natural += r
    shaped = pieces(ask, random.Random(hash((*seed, "shape")))) if ask is not None else ()
    if shaped:
        natural = r + len(shaped)
    if natural >= max_tokens or (not shaped and (ignore_eos or min_tokens >= max_tokens)):
        n, reason = max_tokens, "length"
    elif shaped:
        n, reason = natural, "stop"  # the wire says tool_calls for a tool call's stop
    else:
        n, reason = max(natural, min_tokens, 1), "stop"
    fault_at = None
    if fault_rate > 0 and rng.random() < fault_rate:
        fault_at = rng.randrange(0, n)
    tool = ask.function if ask is not None else ""
    return Plan(n, reason, fault_at, rng.randrange(len(TOKEN_TEXTS)), min(r, n), shaped, tool)


def _reasoning_length(spec: Reasoning, rng: random.Random, effort: str | None, budget: int | None) -> int:
    scale = EFFORT_SCALE.get(effort or "medium", 1.0)
    r = max(spec.min, round(spec.median * scale * math.exp(spec.sigma * rng.gauss(0.0, 1.0))))
    return r if budget is None else min(r, budget)


def token_text(plan: Plan, index: int) -> str:
    if plan.pieces and index >= plan.reasoning_tokens:
        return plan.pieces[index - plan.reasoning_tokens]
    return TOKEN_TEXTS[(plan.text_offset + index * 7) % len(TOKEN_TEXTS)]
