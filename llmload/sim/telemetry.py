"""What the simulator exposes about itself: engine /metrics (vLLM or Aphrodite names), the emulated
GPUs (DCGM-exporter text) and its own llmload_sim_* health figures.

Counters and gauges are read from the engine at scrape time (a prometheus_client Collector), so the
hot path only observes the latency histograms.
"""

from __future__ import annotations

import math
import socket
import uuid
from bisect import bisect_left
from collections.abc import Iterator
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

from llmload.sim.engine import EngineCore
from llmload.sim.profiles import GIB, SimProfile
from llmload.sim.v1_metrics import FINISHED_REASONS, V1Figures

TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
                20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)  # fmt: skip
ITL_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
               40.0, 80.0)  # fmt: skip
REQUEST_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0,
                   240.0, 480.0, 960.0, 1920.0, 7680.0)  # fmt: skip
LAG_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 5.0)


@dataclass
class SimHealth:
    """The simulator's own figures (host vs model clock, aborts)."""

    lag_s: float = 0.0
    lag_max_s: float = 0.0
    late_steps: int = 0
    aborted_fault: int = 0
    aborted_disconnect: int = 0
    finished_length: int = 0
    finished_stop: int = 0


class _EngineCollector:
    def __init__(
        self, prefix: str, model: str, core: EngineCore, health: SimHealth, profile: SimProfile
    ) -> None:
        self.p, self.model, self.core, self.health, self.profile = prefix, model, core, health, profile

    def _labels(self, fam: GaugeMetricFamily | CounterMetricFamily, value: float, *extra: str) -> Metric:
        fam.add_metric([self.model, "0", *extra], value)
        return fam

    def collect(self) -> Iterator[Metric]:
        p, c, h = self.p, self.core, self.health
        lab = ["model_name", "engine"]
        yield self._labels(
            GaugeMetricFamily(f"{p}:num_requests_running", "Requests in the running batch.", labels=lab),
            len(c.running),
        )
        yield self._labels(
            GaugeMetricFamily(f"{p}:num_requests_waiting", "Requests waiting to be scheduled.", labels=lab),
            len(c.waiting),
        )
        yield self._labels(
            GaugeMetricFamily(f"{p}:kv_cache_usage_perc", "KV-cache usage, 0..1.", labels=lab), c.kv.usage
        )
        for name, doc, value in (
            ("num_preemptions", "Preemptions (recompute).", c.preemptions_total),
            ("prompt_tokens", "Prefill tokens processed.", c.prompt_tokens_total),
            ("generation_tokens", "Generation tokens processed.", c.generation_tokens_total),
            ("prefix_cache_queries", "Prefix-cache queries, in tokens.", c.prefix_queries_total),
            ("prefix_cache_hits", "Prefix-cache hits, in tokens.", c.prefix_hits_total),
        ):
            yield self._labels(CounterMetricFamily(f"{p}:{name}", doc, labels=lab), value)
        done = CounterMetricFamily(
            f"{p}:request_success", "Finished requests.", labels=[*lab, "finished_reason"]
        )
        done.add_metric([self.model, "0", "length"], h.finished_length)
        done.add_metric([self.model, "0", "stop"], h.finished_stop)
        if p == "aphrodite":  # 0.24.1 lists every reason, at 0 until one happens (v1_metrics.py)
            for reason in FINISHED_REASONS[2:]:
                done.add_metric([self.model, "0", reason], 0)
        yield done
        yield GaugeMetricFamily(
            "llmload_sim_clock_lag_seconds", "Host behind the model clock at the last step.", value=h.lag_s
        )
        yield GaugeMetricFamily(
            "llmload_sim_clock_lag_max_seconds", "Largest host lag seen.", value=h.lag_max_s
        )
        yield CounterMetricFamily(
            "llmload_sim_late_steps", "Steps emitted later than warn_lag_ms.", value=h.late_steps
        )
        yield CounterMetricFamily("llmload_sim_steps", "Engine steps run.", value=c.steps_total)
        yield CounterMetricFamily(
            "llmload_sim_busy_seconds", "Model time spent in steps.", value=c.busy_seconds_total
        )
        ab = CounterMetricFamily("llmload_sim_aborted_requests", "Requests cut short.", labels=["reason"])
        ab.add_metric(["fault"], h.aborted_fault)
        ab.add_metric(["disconnect"], h.aborted_disconnect)
        yield ab
        yield GaugeMetricFamily("llmload_sim_kv_blocks", "KV blocks in the pool.", value=c.kv.num_blocks)
        info = GaugeMetricFamily(
            "llmload_sim_info", "Simulator profile.", labels=["profile", "dialect", "model_name"]
        )
        info.add_metric([self.profile.name, self.p, self.model], 1)
        yield info


class FastHistogram:
    """A Prometheus histogram that takes ``n`` equal observations at once (one call per step, not per token)."""

    def __init__(self, name: str, doc: str, buckets: tuple[float, ...], labels: dict[str, str]) -> None:
        self.name, self.doc, self.buckets, self.labels = name, doc, buckets, labels
        self.counts = [0] * (len(buckets) + 1)  # the last one is +Inf
        self.sum = 0.0

    def observe(self, value: float, n: int = 1) -> None:
        self.counts[bisect_left(self.buckets, value)] += n
        self.sum += value * n

    @property
    def count(self) -> int:
        return sum(self.counts)

    def collect(self) -> Iterator[Metric]:
        fam = HistogramMetricFamily(self.name, self.doc, labels=list(self.labels))
        acc, pairs = 0, []
        for bound, c in zip([*map(str, self.buckets), "+Inf"], self.counts, strict=True):
            acc += c
            pairs.append((bound, acc))
        fam.add_metric(list(self.labels.values()), pairs, self.sum)
        yield fam


class EngineMetrics:
    """The /metrics registry of one simulator."""

    def __init__(
        self, prefix: str, model: str, core: EngineCore, health: SimHealth, profile: SimProfile
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(_EngineCollector(prefix, model, core, health, profile))
        lab = {"model_name": model, "engine": "0"}

        def hist(name: str, doc: str, buckets: tuple[float, ...]) -> FastHistogram:
            h = FastHistogram(f"{prefix}:{name}", doc, buckets, lab)
            self.registry.register(h)
            return h

        self.ttft = hist("time_to_first_token_seconds", "Time to first token.", TTFT_BUCKETS)
        self.itl = hist("inter_token_latency_seconds", "Inter-token latency.", ITL_BUCKETS)
        self.e2e = hist("e2e_request_latency_seconds", "End-to-end latency.", REQUEST_BUCKETS)
        self.queue = hist("request_queue_time_seconds", "Time waiting.", REQUEST_BUCKETS)
        self.lag = FastHistogram("llmload_sim_step_lag_seconds", "Host lag behind the model clock per step.",
                                 LAG_BUCKETS, {})  # fmt: skip
        self.registry.register(self.lag)
        # a simulated Aphrodite serves the rest of 0.24.1's families too (v1_metrics.py)
        self.v1 = (
            V1Figures(self.registry, hist, prefix, model, core, profile) if prefix == "aphrodite" else None
        )

    def text(self) -> bytes:
        return generate_latest(self.registry)


class GpuEmulator:
    """Per tensor-parallel rank: flat pre-allocated memory, utilisation, power, energy, temperature, clock."""

    TAU_S = 30.0  # thermal time constant

    def __init__(
        self, profile: SimProfile, core: EngineCore, now: float, hostname: str | None = None
    ) -> None:
        self.profile, self.core = profile, core
        self.hostname = hostname or socket.gethostname()
        g = profile.gpu
        tp = profile.tensor_parallel
        kv_bytes = profile.blocks * profile.kv.bytes_per_block
        self.total_mib = g.memory_gib * 1024.0
        used = (profile.weights_gib * GIB + kv_bytes) / tp + profile.activation_reserve_gib * GIB
        self.used_mib = min(self.total_mib, used / 2**20)
        self.uuids = [
            "GPU-" + str(uuid.uuid5(uuid.NAMESPACE_DNS, f"{self.hostname}/{profile.name}/{i}"))
            for i in range(tp)
        ]
        self.util = 0.0
        self.energy_j = 0.0
        self.temp_c = g.ambient_c
        self._last_t = now
        self._last_busy = core.busy_seconds_total

    @property
    def power_w(self) -> float:
        g = self.profile.gpu
        return g.idle_w + (g.max_w - g.idle_w) * self.util

    def sample(self, now: float) -> None:
        """Fold the time since the last sample: utilisation = busy fraction of that interval."""
        dt = now - self._last_t
        if dt <= 0:
            return
        busy = self.core.busy_seconds_total - self._last_busy
        self.util = min(1.0, max(0.0, busy / dt))
        self.energy_j += self.power_w * dt
        g = self.profile.gpu
        target = g.ambient_c + (g.max_temp_c - g.ambient_c) * (self.power_w / g.max_w)
        self.temp_c += (target - self.temp_c) * (1.0 - math.exp(-dt / self.TAU_S))
        self._last_t, self._last_busy = now, self.core.busy_seconds_total

    def dcgm_text(self) -> str:
        g = self.profile.gpu
        sm = g.sm_clock_mhz if self.util > 0.02 else g.idle_sm_clock_mhz
        fields = (
            ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).", f"{sm}"),
            ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", f"{self.temp_c:.0f}"),
            ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", f"{self.power_w:.3f}"),
            ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter",
             "Total energy consumption since boot (in mJ).", f"{self.energy_j * 1000.0:.0f}"),
            ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", f"{self.util * 100.0:.0f}"),
            ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).", f"{self.total_mib - self.used_mib:.0f}"),
            ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).", f"{self.used_mib:.0f}"),
        )  # fmt: skip
        lines = [f"# simulated GPU: llmload sim profile {self.profile.name}, not real hardware"]
        for name, kind, doc, value in fields:
            lines += [f"# HELP {name} {doc}", f"# TYPE {name} {kind}"]
            for i, u in enumerate(self.uuids):
                lines.append(
                    f'{name}{{gpu="{i}",UUID="{u}",device="nvidia{i}",modelName="{g.name}",'
                    f'Hostname="{self.hostname}",simulated="true"}} {value}'
                )
        return "\n".join(lines) + "\n"
