"""Engine /metrics: scrape the Prometheus text and normalise it to one vocabulary.

    normalise(text, kind) -> list[Sample]      # Sample(metric, raw_name, value)

``kind`` is one of ``KINDS``. The normalised names (``VOCABULARY``) are the same for every
engine, so dashboards compare engines on one query; ``raw_name`` keeps the engine's own
series name for traceability. Rules, from /work/shared/engines.md:

* Series are summed over every label set (vLLM V1's ``engine`` label for data-parallel
  ranks, ``model_name``, TP ranks, ...). Ratios (KV-cache usage, hit rates) are averaged.
* When an engine renamed a series, every name is listed newest first and the first one
  present wins (vLLM <= 0.9.1 ``gpu_cache_usage_perc``, >= 0.9.2 ``kv_cache_usage_perc``;
  ``time_per_output_token_seconds`` -> ``inter_token_latency_seconds``), so a version that
  exposes both during its deprecation window is not counted twice.
* Histograms give ``<name>_sum`` and ``<name>_count`` (seconds); rates and means are for the
  dashboard to derive (``non_negative_derivative``).
* ``prefix_cache_hit_ratio`` is the engine's own gauge when it has one (SGLang, vLLM V0),
  else hits / queries since start (vLLM V1 counters).
* TGI has no KV-cache gauge: ``kv_cache_usage_ratio`` is approximated as
  ``tgi_batch_current_max_tokens / tgi_batch_max_total_tokens`` (raw_name says so).
"""

from __future__ import annotations

import math
import urllib.error
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

KINDS: tuple[str, ...] = ("vllm", "aphrodite", "sglang", "tgi", "llamacpp", "trtllm")

VOCABULARY: tuple[str, ...] = (
    "requests_finished_total",
    "requests_running",
    "requests_waiting",
    "kv_cache_usage_ratio",
    "preemptions_total",
    "prompt_tokens_total",
    "generation_tokens_total",
    "prefix_cache_queries_total",
    "prefix_cache_hits_total",
    "prefix_cache_hit_ratio",
    "ttft_seconds_sum",
    "ttft_seconds_count",
    "itl_seconds_sum",
    "itl_seconds_count",
    "e2e_seconds_sum",
    "e2e_seconds_count",
    "queue_seconds_sum",
    "queue_seconds_count",
)


class MetricsError(ValueError):
    """The text is not Prometheus exposition format, or the kind is unknown."""


@dataclass(frozen=True)
class Sample:
    """One normalised engine figure."""

    metric: str  # a name from VOCABULARY
    raw_name: str  # the engine's series name (with the label filter, if any)
    value: float


@dataclass(frozen=True)
class _Raw:
    name: str
    labels: tuple[tuple[str, str], ...] = ()  # only samples with these label values

    def label(self) -> str:
        if not self.labels:
            return self.name
        return self.name + "{" + ",".join(f'{k}="{v}"' for k, v in self.labels) + "}"


@dataclass(frozen=True)
class _Rule:
    metric: str
    candidates: tuple[_Raw, ...]  # newest name first; the first present wins
    mean: bool = False  # average over label sets instead of summing


def _r(*names: str, labels: tuple[tuple[str, str], ...] = ()) -> tuple[_Raw, ...]:
    return tuple(_Raw(n, labels) for n in names)


def _hist(metric: str, *names: str) -> list[_Rule]:
    return [
        _Rule(f"{metric}_sum", _r(*(n + "_sum" for n in names))),
        _Rule(f"{metric}_count", _r(*(n + "_count" for n in names))),
    ]


def _vllm_rules(p: str) -> list[_Rule]:
    return [
        _Rule("requests_finished_total", _r(f"{p}:request_success_total")),  # summed over finished_reason
        _Rule("requests_running", _r(f"{p}:num_requests_running")),
        _Rule("requests_waiting", _r(f"{p}:num_requests_waiting")),
        _Rule("kv_cache_usage_ratio", _r(f"{p}:kv_cache_usage_perc", f"{p}:gpu_cache_usage_perc"), mean=True),
        _Rule("preemptions_total", _r(f"{p}:num_preemptions_total", f"{p}:num_preemptions")),
        _Rule("prompt_tokens_total", _r(f"{p}:prompt_tokens_total")),
        _Rule("generation_tokens_total", _r(f"{p}:generation_tokens_total")),
        _Rule("prefix_cache_queries_total", _r(f"{p}:prefix_cache_queries_total")),
        _Rule("prefix_cache_hits_total", _r(f"{p}:prefix_cache_hits_total")),
        _Rule("prefix_cache_hit_ratio", _r(f"{p}:gpu_prefix_cache_hit_rate"), mean=True),
        *_hist("ttft_seconds", f"{p}:time_to_first_token_seconds"),
        *_hist("itl_seconds", f"{p}:inter_token_latency_seconds", f"{p}:time_per_output_token_seconds"),
        *_hist("e2e_seconds", f"{p}:e2e_request_latency_seconds"),
        *_hist("queue_seconds", f"{p}:request_queue_time_seconds"),
    ]


RULES: dict[str, list[_Rule]] = {
    "vllm": _vllm_rules("vllm"),
    "aphrodite": _vllm_rules("aphrodite"),
    "sglang": [
        _Rule("requests_running", _r("sglang:num_running_reqs")),
        _Rule("requests_waiting", _r("sglang:num_queue_reqs")),
        _Rule("kv_cache_usage_ratio", _r("sglang:token_usage"), mean=True),
        _Rule("preemptions_total", _r("sglang:num_retracted_requests_total", "sglang:num_retracted_reqs")),
        _Rule("prompt_tokens_total", _r("sglang:prompt_tokens_total")),
        _Rule("generation_tokens_total", _r("sglang:generation_tokens_total")),
        _Rule("prefix_cache_hit_ratio", _r("sglang:cache_hit_rate"), mean=True),
        *_hist("ttft_seconds", "sglang:time_to_first_token_seconds"),
        *_hist("itl_seconds", "sglang:inter_token_latency_seconds", "sglang:time_per_output_token_seconds"),
        *_hist("e2e_seconds", "sglang:e2e_request_latency_seconds"),
        *_hist("queue_seconds", "sglang:queue_time_seconds"),
    ],
    "tgi": [
        _Rule("requests_running", _r("tgi_batch_current_size")),
        _Rule("requests_waiting", _r("tgi_queue_size")),
        _Rule("prompt_tokens_total", _r("tgi_request_input_length_sum")),
        _Rule("generation_tokens_total", _r("tgi_request_generated_tokens_sum")),
        # TGI has no TTFT or ITL histogram; the per-request mean time per token stands in for ITL.
        *_hist("itl_seconds", "tgi_request_mean_time_per_token_duration"),
        *_hist("e2e_seconds", "tgi_request_duration"),
        *_hist("queue_seconds", "tgi_request_queue_duration"),
    ],
    "llamacpp": [
        _Rule("requests_running", _r("llamacpp:requests_processing")),
        _Rule("requests_waiting", _r("llamacpp:requests_deferred")),
        _Rule(
            "kv_cache_usage_ratio", _r("llamacpp:kv_cache_usage_ratio"), mean=True
        ),  # removed in newer builds
        _Rule("prompt_tokens_total", _r("llamacpp:prompt_tokens_total")),
        _Rule("generation_tokens_total", _r("llamacpp:tokens_predicted_total")),
    ],
    "trtllm": [
        # trtllm-serve (/prometheus/metrics) first, then Triton's TensorRT-LLM backend names.
        _Rule(
            "requests_running",
            (
                _Raw("trtllm_num_requests_running"),
                _Raw("nv_trt_llm_request_metrics", (("request_type", "scheduled"),)),
            ),
        ),
        _Rule(
            "requests_waiting",
            (
                _Raw("trtllm_num_requests_waiting"),
                _Raw("nv_trt_llm_request_metrics", (("request_type", "waiting"),)),
            ),
        ),
        _Rule(
            "kv_cache_usage_ratio",
            (
                _Raw("trtllm_kv_cache_utilization"),
                _Raw("nv_trt_llm_kv_cache_block_metrics", (("kv_cache_block_type", "fraction"),)),
            ),
            mean=True,
        ),
        _Rule("prompt_tokens_total", _r("trtllm_prompt_tokens_total", "nv_llm_input_token_len_sum")),
        _Rule("generation_tokens_total", _r("trtllm_generation_tokens_total", "nv_llm_output_token_len_sum")),
        *_hist("ttft_seconds", "trtllm_time_to_first_token_seconds"),
        *_hist("itl_seconds", "trtllm_inter_token_latency_seconds", "trtllm_time_per_output_token_seconds"),
        *_hist("e2e_seconds", "trtllm_e2e_request_latency_seconds"),
        *_hist("queue_seconds", "trtllm_request_queue_time_seconds"),
    ],
}

_TGI_KV = ("tgi_batch_current_max_tokens", "tgi_batch_max_total_tokens")


def index_samples(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Sample name -> [(labels, value)].

    prometheus_client's parser appends ``_total`` to counter samples that lack it (DCGM's
    ``DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION``); such samples are also reachable under the
    name as written, unless a real series already has that name.
    """
    by_name: dict[str, list[tuple[dict[str, str], float]]] = {}
    aliases: dict[str, list[tuple[dict[str, str], float]]] = {}
    try:
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                row = (s.labels, float(s.value))
                by_name.setdefault(s.name, []).append(row)
                if family.type == "counter" and s.name == family.name + "_total":
                    aliases.setdefault(family.name, []).append(row)
    except (ValueError, TypeError, IndexError) as exc:
        raise MetricsError(f"not Prometheus text format: {exc}") from None
    for name, rows in aliases.items():
        by_name.setdefault(name, rows)
    return by_name


def _pick(by_name: dict[str, list[tuple[dict[str, str], float]]], rule: _Rule) -> Sample | None:
    for raw in rule.candidates:
        rows = by_name.get(raw.name)
        if not rows:
            continue
        values = [v for labels, v in rows if all(labels.get(k) == want for k, want in raw.labels)]
        values = [v for v in values if math.isfinite(v)]
        if not values:
            continue
        value = sum(values) / len(values) if rule.mean else sum(values)
        return Sample(rule.metric, raw.label(), value)
    return None


def normalise(text: str, kind: str) -> list[Sample]:
    """The normalised samples found in one /metrics text (missing series are simply absent)."""
    rules = RULES.get(kind)
    if rules is None:
        raise MetricsError(f"unknown engine kind {kind!r}; known: {', '.join(KINDS)}")
    by_name = index_samples(text)
    out: list[Sample] = []
    for rule in rules:
        sample = _pick(by_name, rule)
        if sample is not None:
            out.append(sample)
    found = {s.metric for s in out}
    if kind == "tgi" and "kv_cache_usage_ratio" not in found:
        cur, cap = (by_name.get(n) for n in _TGI_KV)
        if cur and cap:
            total = sum(v for _, v in cap)
            if total > 0:
                ratio = sum(v for _, v in cur) / total
                out.append(Sample("kv_cache_usage_ratio", "/".join(_TGI_KV), ratio))
    if "prefix_cache_hit_ratio" not in found:
        values = {s.metric: s for s in out}
        q, h = values.get("prefix_cache_queries_total"), values.get("prefix_cache_hits_total")
        if q is not None and h is not None and q.value > 0:
            out.append(Sample("prefix_cache_hit_ratio", f"{h.raw_name}/{q.raw_name}", h.value / q.value))
    return out


def no_metrics(status: int, url: str) -> str:
    """What an HTTP error from a /metrics URL means, said the same way by the collector and by the run:
    its error page is not Prometheus text, and parsing it would only say "Invalid labels"."""
    return f"HTTP {status}, no metrics at {url}"


def fetch(url: str, timeout_s: float = 5.0) -> str:
    """GET a /metrics text (raises OSError on failure, MetricsError on an HTTP error status)."""
    req = urllib.request.Request(url, headers={"Accept": "text/plain"})
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            return str(resp.read().decode("utf-8", "replace"))
    except urllib.error.HTTPError as e:
        raise MetricsError(no_metrics(e.code, url)) from None


def kinds_help(kinds: Iterable[str] = KINDS) -> str:
    return "|".join(kinds)
