"""Workloads: the deterministic sequence of requests every target receives.

Request ``i`` is a pure function of (workload, seed, salt, i): every target gets the
same prompts in the same order (paired A/B), and a rerun with the same salt (or
``salt: false``) sends the same traffic. The salt is drawn per run by default, so a
rerun against a long-lived server does not ride its prefix cache.

Kinds: synthetic (length distributions), jsonl (one prompt per line), sharegpt
(conversations), prefix (N shared long prefixes x unique suffixes, to exercise
prefix caching), multiturn (sessions whose history grows each turn), trace (a
timestamped request log, llmload/load/trace.py: its lengths here, its times in the
load plan; request i is the trace's row i mod 1,000,000, the open-loop arrival number).
Token counts are approximated by words (one short word ~ one token) unless a
local tokenizer file is given; with one, synthetic, prefix and multiturn prompts are
cut to exactly the asked number of tokens by that tokenizer (the chat template the
server wraps around them is not counted here: summary.json reports it as the
difference between the server's prompt tokens and llmload's).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llmload.config.lengths import LengthDist, sample_length
from llmload.config.limits import MAX_TOKENS
from llmload.config.workload_spec import (
    DatasetWorkload,
    MultiturnWorkload,
    PrefixWorkload,
    SyntheticWorkload,
    TraceWorkload,
    Workload,
)
from llmload.config.yamlsrc import InputError, json_array_items, jsonl_objects, read_paced
from llmload.load.trace import BLOCK_TOKENS, TraceRow, load_trace

_WORDS = (
    "time year people way day man thing woman life child world school state family student group country "
    "problem hand part place case week company system program question work government number night point "
    "home water room mother area money story fact month lot right study book eye job word business issue "
    "side kind head house service friend father power hour game line end member law car city community name "
    "president team minute idea kid body information back parent face others level office door health person "
    "art war history party result change morning reason research girl guy moment air teacher force education "
    "river light stone green quick small large early young great little own other old big high different"
).split()


def words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(n))


@dataclass
class RequestSpec:
    index: int
    messages: list[dict[str, Any]]  # chat messages (an agent's turns add tool calls and results)
    max_tokens: int
    prompt_tokens_est: int
    session: int = -1
    turn: int = 0
    think_time: float = 0.0
    agent_rounds: int = 0  # an agent loop's turns at most (0: no agent; llmload/locust/sessions.py)
    tool_wait_s: float = 0.0  # an agent's turn: the time in the tool before it


class WorkloadSource:
    """Builds request ``i`` on demand (datasets are loaded once)."""

    def __init__(self, wl: Workload, base_dir: Path | None = None, tokenizer: Any = None) -> None:
        self.wl = wl
        self.base_dir = base_dir or Path.cwd()
        self._items: list[tuple[list[dict[str, str]], int | None]] | None = None
        self._tok = tokenizer
        if isinstance(wl, DatasetWorkload):
            self._items = load_dataset(self._resolve(wl.path), wl.kind)
        if wl.tokenizer:
            self._tok = load_tokenizer(self._resolve(wl.tokenizer))
        self.turns_max = max(1, _max_len(wl.turns)) if isinstance(wl, MultiturnWorkload) else 1
        self._trace: list[TraceRow] = []
        self.answer_shape = wl.answer_shape()  # what each answer is judged against (config/answer_check.py)
        self.notes: list[str] = []  # what loading changed (a trace sorted), said once by the run
        if isinstance(wl, TraceWorkload):
            self._trace = load_trace(
                self._resolve(wl.path),
                wl.format,
                speedup=wl.speedup,
                start_s=wl.window_start,
                duration_s=wl.window_duration,
                notes=self.notes,
            )

    @property
    def request_fields(self) -> dict[str, Any]:
        """Body fields every request carries for the workload's knobs (reasoning models): the
        effort as ``reasoning_effort`` (OpenAI, vLLM, SGLang), the thinking budget as vLLM's
        ``thinking_token_budget``; tools, tool_choice and response_format as written (the Responses
        API's spelling is made by build_request). A target's ``extra_body`` is merged over them
        (another engine's spelling goes there)."""
        out: dict[str, Any] = self.wl.body_fields()
        if self.wl.reasoning_effort is not None:
            out["reasoning_effort"] = self.wl.reasoning_effort
        if self.wl.thinking_budget is not None:
            out["thinking_token_budget"] = self.wl.thinking_budget
        return out

    def trace_offsets(self) -> list[float]:
        """A trace workload's send times (seconds from the replay's start); [] for other kinds."""
        return [r.offset_s for r in self._trace]

    def _resolve(self, p: str) -> Path:
        path = Path(p)
        return path if path.is_absolute() else (self.base_dir / path)

    def count_tokens(self, text: str) -> int:
        if self._tok is not None:
            return len(self._tok.encode(text, add_special_tokens=False).ids)
        return len(text.split())

    @property
    def output_counter(self) -> Callable[[str], int] | None:
        """The local tokenizer's count, for servers that send no usage (None without one)."""
        return self.count_tokens if self._tok is not None else None

    def text(self, rng: random.Random, n: int, lead: str = "") -> str:
        """Prompt text of ``n`` tokens: exact by the tokenizer when one is given, else ``n`` words;
        ``lead`` (the salt) starts it and counts among the ``n``."""
        if self._tok is None:
            return f"{lead} {words(rng, n - 1)}" if lead and n > 1 else words(rng, n)
        return sized_text(self._tok, rng, n, prefix=f"{lead} " if lead else "")

    @property
    def _lead(self) -> str:
        """The salt as the prompt's first word: the system prompt's when there is one, else the user
        text's (generated texts carry it within their size)."""
        salt = self.wl.salt
        return f"[{salt}]" if isinstance(salt, str) else ""

    def _system(self) -> list[dict[str, str]]:
        if not self.wl.system_prompt:
            return []
        lead = self._lead
        return [
            {
                "role": "system",
                "content": f"{lead} {self.wl.system_prompt}" if lead else self.wl.system_prompt,
            }
        ]

    def _user_lead(self) -> str:
        return "" if self.wl.system_prompt else self._lead

    def get(self, i: int) -> RequestSpec:
        wl = self.wl
        rng = random.Random(f"{wl.seed}:{i}")
        max_tokens = sample_length(wl.output_tokens, rng)
        if isinstance(wl, SyntheticWorkload):
            if wl.prompts:
                lead = self._user_lead()
                text = (
                    f"{lead} {wl.prompts[i % len(wl.prompts)]}" if lead else wl.prompts[i % len(wl.prompts)]
                )
            else:
                text = self.text(rng, sample_length(wl.input_tokens, rng), self._user_lead())
            msgs = [*self._system(), {"role": "user", "content": text}]
        elif isinstance(wl, PrefixWorkload):
            group = i % wl.prefix_groups
            prefix = self.text(
                random.Random(f"{wl.seed}:prefix:{group}"), wl.prefix_tokens, self._user_lead()
            )
            text = (
                prefix + "\n\nQuestion " + str(i) + ": " + self.text(rng, sample_length(wl.input_tokens, rng))
            )
            msgs = [*self._system(), {"role": "user", "content": text}]
        elif isinstance(wl, MultiturnWorkload):
            return self._turn(wl, i)
        elif isinstance(wl, TraceWorkload):
            row = self._trace[i % 1_000_000 % len(self._trace)]
            max_tokens = max(1, row.output_tokens)
            msgs = [*self._system(), {"role": "user", "content": self._trace_text(row, rng)}]
        else:
            assert self._items is not None
            msgs, out_len = self._items[i % len(self._items)]
            lead = self._user_lead()
            if lead and msgs:  # a dataset's prompt, as it is, after the salt
                msgs = [{**msgs[0], "content": f"{lead} {msgs[0]['content']}"}, *msgs[1:]]
            msgs = [*self._system(), *msgs]
            if out_len is not None:
                max_tokens = out_len
        est = sum(self.count_tokens(m["content"]) for m in msgs)
        return RequestSpec(i, msgs, max_tokens, est)

    def _trace_text(self, row: TraceRow, rng: random.Random) -> str:
        """A prompt of the row's length; with ``hash_ids``, made of those blocks' texts, so requests
        that share leading ids share that prefix (words stand for tokens here)."""
        lead = self._user_lead()
        if not row.hash_ids:
            return self.text(rng, max(1, row.input_tokens), lead)
        blocks = [words(random.Random(f"{self.wl.seed}:block:{h}"), BLOCK_TOKENS) for h in row.hash_ids]
        text = " ".join(" ".join(blocks).split()[: max(1, row.input_tokens - (1 if lead else 0))])
        return f"{lead} {text}" if lead else text

    def _turn(self, wl: MultiturnWorkload, i: int) -> RequestSpec:
        """Index i = session * turns_max + turn; history holds earlier turns of the session.

        Earlier assistant replies are replaced by deterministic text of the length
        asked for, so every target sees exactly the same prompts.
        """
        session, turn = divmod(i, self.turns_max)
        srng = random.Random(f"{wl.seed}:session:{session}")
        n_turns = min(self.turns_max, max(1, sample_length(wl.turns, srng)))
        turn = min(turn, n_turns - 1)
        msgs = self._system()
        max_tokens = 0
        for t in range(turn + 1):
            trng = random.Random(f"{wl.seed}:session:{session}:turn:{t}")
            lead = self._user_lead() if t == 0 else ""
            msgs.append(
                {"role": "user", "content": self.text(trng, sample_length(wl.input_tokens, trng), lead)}
            )
            max_tokens = sample_length(wl.output_tokens, trng)
            if t < turn:
                msgs.append({"role": "assistant", "content": words(trng, max_tokens)})
        est = sum(self.count_tokens(m["content"]) for m in msgs)
        spec = RequestSpec(i, msgs, max_tokens, est, session=session, turn=turn, think_time=wl.think_time)
        spec.turn = turn if turn < n_turns else n_turns - 1
        return spec

    def session_turns(self, session: int) -> int:
        if not isinstance(self.wl, MultiturnWorkload):
            return 1
        srng = random.Random(f"{self.wl.seed}:session:{session}")
        return min(self.turns_max, max(1, sample_length(self.wl.turns, srng)))


def _max_len(spec: int | LengthDist) -> int:
    return spec if isinstance(spec, int) else spec.max if spec.dist != "fixed" else (spec.value or 1)


def load_dataset(path: Path, kind: str) -> list[tuple[list[dict[str, str]], int | None]]:
    """JSONL prompts or ShareGPT conversations -> [(messages, output_tokens or None)]."""
    try:
        text = read_paced(path)
    except OSError as e:
        raise InputError(f"{path}: cannot read dataset: {e.strerror}") from None
    items: list[tuple[list[dict[str, str]], int | None]] = []
    if kind == "jsonl":
        for n, obj in jsonl_objects(text, path):
            items.append(_jsonl_item(obj, path, n))
    else:
        not_a_list = f"{path}:1: a ShareGPT file is a JSON list of {{conversations: [...]}}"
        for n, conv in enumerate(json_array_items(text, path, not_a_list)):
            item = _sharegpt_item(conv, path, n)
            if item is not None:
                items.append(item)
    if not items:
        raise InputError(f"{path}: the dataset holds no usable prompt")
    return items


def _jsonl_item(obj: Any, path: Path, n: int) -> tuple[list[dict[str, str]], int | None]:
    if not isinstance(obj, dict):
        raise InputError(f"{path}:{n}: expected a JSON object with `prompt` or `messages`")
    out = obj.get("output_tokens", obj.get("max_tokens"))
    if out is not None and (not isinstance(out, int) or isinstance(out, bool) or not 1 <= out <= MAX_TOKENS):
        raise InputError(f"{path}:{n}: output_tokens must be a whole number from 1 to {MAX_TOKENS:,}")
    if isinstance(obj.get("prompt"), str):
        return [{"role": "user", "content": obj["prompt"]}], out
    msgs = obj.get("messages")
    if (
        isinstance(msgs, list)
        and msgs
        and all(
            isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
            for m in msgs
        )
    ):
        return [{"role": m["role"], "content": m["content"]} for m in msgs], out
    raise InputError(f"{path}:{n}: expected `prompt` (string) or `messages` (list of {{role, content}})")


def _sharegpt_item(conv: Any, path: Path, n: int) -> tuple[list[dict[str, str]], int | None] | None:
    turns = conv.get("conversations") if isinstance(conv, dict) else None
    if not isinstance(turns, list):
        raise InputError(f"{path}: entry {n}: expected an object with a `conversations` list")
    human = next((t for t in turns if isinstance(t, dict) and t.get("from") in ("human", "user")), None)
    if human is None or not isinstance(human.get("value"), str):
        return None  # conversations without a human turn are skipped, as peer tools do
    reply = next((t for t in turns if isinstance(t, dict) and t.get("from") in ("gpt", "assistant")), None)
    out = (
        len(reply["value"].split())
        if reply and isinstance(reply.get("value"), str) and reply["value"]
        else None
    )
    return [{"role": "user", "content": human["value"]}], out


def sized_text(tok: Any, rng: random.Random, n: int, prefix: str = "") -> str:
    """``prefix`` and words, cut to exactly ``n`` tokens by ``tok`` (a ``tokenizers.Tokenizer``).

    Cutting the token ids and decoding them can re-encode to a different count where the cut
    splits a merge, so nearby cuts are tried until one re-encodes to ``n``.
    """
    text = prefix + words(rng, n + 8)
    ids = tok.encode(text, add_special_tokens=False).ids
    while len(ids) < n + 8:
        text += " " + words(rng, n + 8)
        ids = tok.encode(text, add_special_tokens=False).ids
    best = ""
    for k in (n, n - 1, n + 1, n - 2, n + 2, n - 3, n + 3):
        if k < 0:
            continue
        cand = str(tok.decode(ids[:k]))
        if len(tok.encode(cand, add_special_tokens=False).ids) == n:
            return cand
        best = best or cand
    return best


def load_tokenizer(path: Path) -> Any:
    if not path.is_file():
        raise InputError(f"{path}: tokenizer file not found")
    from tokenizers import Tokenizer

    try:
        return Tokenizer.from_file(str(path))
    except Exception as e:  # noqa: BLE001 - the library raises plain Exception
        raise InputError(f"{path}: cannot load tokenizer: {e}") from None
