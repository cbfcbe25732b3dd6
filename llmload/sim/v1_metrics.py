"""The rest of Aphrodite 0.24.1's /metrics, so a simulated Aphrodite shows the names the real one does.

Recorded from the real server (tests/fixtures/engines/aphrodite_0_24_1.txt): beside the families
every dialect serves (telemetry.py: running, waiting, KV-cache usage, token and prefix-cache counters,
``request_success_total``, the TTFT / ITL / E2E / queue histograms) it serves the V1 engine's
request histograms, tokens per step, waiting requests by reason, prompt tokens by source, the sleep
state and the cache configuration. The simulator serves the same names and labels, with its own
figures where it has them:

- ``request_success_total``: every ``finished_reason`` the real one lists (``stop``, ``length``,
  ``abort``, ``error``, ``repetition``); the simulator ends a request by ``stop`` or ``length`` only,
  and counts neither a client's disconnect nor a fault as finished, so the others stay 0;
- prompt tokens: ``local_compute`` (computed), ``local_cache_hit`` (prefix-cache hits at the
  request's first admission), ``external_kv_transfer`` 0, and ``prompt_tokens_cached_total``;
- counters of what it does not model (an external KV cache, a multi-modal cache) are served at 0;
  the MFU estimates (``estimated_flops_per_gpu_total`` and the read and write bytes) are left out:
  the simulator has no FLOP model, and a made-up figure would be read as one.

Buckets are the real server's. No Locust import; the hot path observes one step and one finished
request at a time (never a token).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Protocol

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from llmload.sim.engine import EngineCore, Sequence, StepResult
from llmload.sim.profiles import SimProfile

REQUEST_S_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0,
                     240.0, 480.0, 960.0, 1920.0, 7680.0)  # fmt: skip
TPOT_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
                40.0, 80.0)  # fmt: skip
TOKENS_BUCKETS = (1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0)
STEP_TOKENS_BUCKETS = (
    1.0,
    8.0,
    16.0,
    32.0,
    64.0,
    128.0,
    256.0,
    512.0,
    1024.0,
    2048.0,
    4096.0,
    8192.0,
    16384.0,
)
PREEMPTION_BUCKETS = (1.0, 2.0, 3.0, 4.0, 5.0, 10.0, 20.0)
N_BUCKETS = (1.0, 2.0, 5.0, 10.0, 20.0)
FINISHED_REASONS = ("stop", "length", "abort", "error", "repetition")


class Histogram(Protocol):
    def observe(self, value: float, n: int = 1) -> None: ...


class _Scraped:
    """The scrape-time families (read from the engine when /metrics is asked for)."""

    def __init__(self, prefix: str, model: str, core: EngineCore, profile: SimProfile) -> None:
        self.p, self.model, self.core, self.profile = prefix, model, core, profile

    def _by(self, fam: GaugeMetricFamily | CounterMetricFamily, values: dict[str, float]) -> Metric:
        for key, value in values.items():
            fam.add_metric([self.model, "0", key], value)
        return fam

    def collect(self) -> Iterator[Metric]:
        p, c, lab = self.p, self.core, ["model_name", "engine"]
        yield self._by(
            GaugeMetricFamily(f"{p}:num_requests_waiting_by_reason", "Waiting requests by reason.",
                              labels=[*lab, "reason"]),
            {"capacity": len(c.waiting), "deferred": 0},
        )  # fmt: skip
        yield self._by(
            GaugeMetricFamily(f"{p}:engine_sleep_state", "Engine sleep state.", labels=[*lab, "sleep_state"]),
            {"awake": 1, "weights_offloaded": 0, "discard_all": 0},
        )
        cached = c.prompt_cached_tokens_total
        yield self._by(
            CounterMetricFamily(f"{p}:prompt_tokens_by_source", "Prompt tokens by source.",
                                labels=[*lab, "source"]),
            {"local_compute": c.prompt_tokens_total - cached, "local_cache_hit": cached, "external_kv_transfer": 0},
        )  # fmt: skip
        for name, doc, value in (
            ("prompt_tokens_cached", "Cached prompt tokens (local + external).", cached),
            ("external_prefix_cache_queries", "External prefix-cache queries, in tokens.", 0),
            ("external_prefix_cache_hits", "External prefix-cache hits, in tokens.", 0),
            ("mm_cache_queries", "Multi-modal cache queries, in items.", 0),
            ("mm_cache_hits", "Multi-modal cache hits, in items.", 0),
        ):
            fam = CounterMetricFamily(f"{p}:{name}", doc, labels=lab)
            fam.add_metric([self.model, "0"], value)
            yield fam
        pr = self.profile
        info = GaugeMetricFamily(
            f"{p}:cache_config_info", "Information of the LLMEngine CacheConfig",
            labels=["block_size", "cache_dtype", "enable_prefix_caching", "engine", "gpu_memory_utilization",
                    "num_gpu_blocks"],
        )  # fmt: skip
        info.add_metric(
            [str(pr.kv.block_size), "auto", str(pr.prefix_caching), "0", str(pr.gpu_memory_utilization),
             str(pr.blocks)], 1.0,
        )  # fmt: skip
        yield info


class V1Figures:
    """Aphrodite 0.24.1's request and step histograms and its scrape-time families."""

    def __init__(
        self,
        registry: CollectorRegistry,
        hist: Callable[[str, str, tuple[float, ...]], Histogram],
        prefix: str,
        model: str,
        core: EngineCore,
        profile: SimProfile,
    ) -> None:
        """``hist(name, doc, buckets)`` makes and registers one histogram under ``prefix``."""
        registry.register(_Scraped(prefix, model, core, profile))
        self.step_tokens = hist("iteration_tokens_total", "Tokens per engine step.", STEP_TOKENS_BUCKETS)
        self.prompt = hist("request_prompt_tokens", "Prefill tokens per request.", TOKENS_BUCKETS)
        self.generation = hist("request_generation_tokens", "Generation tokens per request.", TOKENS_BUCKETS)
        self.max_generation = hist("request_max_num_generation_tokens", "Requested generation tokens.",
                                   TOKENS_BUCKETS)  # fmt: skip
        self.max_tokens = hist(
            "request_params_max_tokens", "The max_tokens request parameter.", TOKENS_BUCKETS
        )
        self.n = hist("request_params_n", "The n request parameter.", N_BUCKETS)
        self.kv_computed = hist("request_prefill_kv_computed_tokens", "New KV tokens computed in prefill.",
                                TOKENS_BUCKETS)  # fmt: skip
        self.preemptions = hist("request_num_preemptions", "Preemptions per request.", PREEMPTION_BUCKETS)
        self.inference = hist("request_inference_time_seconds", "Time RUNNING.", REQUEST_S_BUCKETS)
        self.prefill = hist("request_prefill_time_seconds", "Time in PREFILL.", REQUEST_S_BUCKETS)
        self.decode = hist("request_decode_time_seconds", "Time in DECODE.", REQUEST_S_BUCKETS)
        self.tpot = hist("request_time_per_output_token_seconds", "TPOT per request.", TPOT_BUCKETS)

    def stepped(self, res: StepResult) -> None:
        self.step_tokens.observe(res.prefill_tokens + res.decode_seqs)

    def finished(self, seq: Sequence, max_tokens: int, first_token_t: float, end_t: float) -> None:
        """A request that ended by stop or length: ``first_token_t`` and ``end_t`` are the emissions
        of its first and last tokens, on the clock of its arrival and of the engine's steps."""
        scheduled = seq.first_scheduled if seq.first_scheduled is not None else seq.arrival
        self.prompt.observe(seq.prompt_len)
        self.generation.observe(seq.output)
        self.max_generation.observe(max_tokens)
        self.max_tokens.observe(max_tokens)
        self.n.observe(1)
        self.kv_computed.observe(seq.prompt_len - seq.cached_tokens)
        self.preemptions.observe(seq.preemptions)
        self.inference.observe(max(0.0, end_t - scheduled))
        self.prefill.observe(max(0.0, first_token_t - scheduled))
        self.decode.observe(max(0.0, end_t - first_token_t))
        if seq.output > 1:
            self.tpot.observe((end_t - first_token_t) / (seq.output - 1))
