"""Engine /metrics normalisation against recorded texts of every engine in engines.md, and DCGM text."""

from __future__ import annotations

from pathlib import Path

import pytest

from collectors.dcgm import MIB, parse_dcgm
from collectors.engine_metrics import KINDS, VOCABULARY, MetricsError, normalise

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "engines"


def _norm(name: str, kind: str) -> dict[str, tuple[float, str]]:
    samples = normalise((FIXTURES / name).read_text(), kind)
    assert all(s.metric in VOCABULARY for s in samples)
    by_metric = {s.metric: (s.value, s.raw_name) for s in samples}
    assert len(by_metric) == len(samples)  # one sample per normalised metric
    return by_metric


def _values(d: dict[str, tuple[float, str]]) -> dict[str, float]:
    return {k: v for k, (v, _) in d.items()}


def test_vllm_v1_sums_over_data_parallel_engines() -> None:
    got = _norm("vllm_v1_dp2.txt", "vllm")
    assert _values(got) == pytest.approx(
        {
            "requests_running": 3 + 4,
            "requests_waiting": 1 + 0,
            "kv_cache_usage_ratio": (0.5 + 0.25) / 2,  # a ratio: averaged over engines, not summed
            "preemptions_total": 2 + 1,
            "prompt_tokens_total": 12000 + 8000,
            "generation_tokens_total": 3000 + 2000,
            "prefix_cache_queries_total": 10000 + 6000,
            "prefix_cache_hits_total": 3000 + 1000,
            "prefix_cache_hit_ratio": (3000 + 1000) / (10000 + 6000),
            "ttft_seconds_sum": 4.5 + 3.5,
            "ttft_seconds_count": 30 + 20,
            "itl_seconds_sum": 59.0 + 39.0,
            "itl_seconds_count": 2950 + 1950,
            "e2e_seconds_sum": 63.5 + 42.5,
            "e2e_seconds_count": 30 + 20,
            "queue_seconds_sum": 1.5 + 0.5,
            "queue_seconds_count": 30 + 20,
        }
    )
    assert got["kv_cache_usage_ratio"][1] == "vllm:kv_cache_usage_perc"
    assert got["itl_seconds_sum"][1] == "vllm:inter_token_latency_seconds_sum"
    # the per-request TPOT histogram and the _by_reason gauge are not mistaken for ITL / waiting
    assert got["requests_waiting"][1] == "vllm:num_requests_waiting"


def test_vllm_old_names() -> None:
    got = _norm("vllm_v0_old.txt", "vllm")
    assert got["kv_cache_usage_ratio"] == (0.875, "vllm:gpu_cache_usage_perc")
    assert got["itl_seconds_sum"] == (510.0, "vllm:time_per_output_token_seconds_sum")
    assert got["itl_seconds_count"][0] == 25500.0
    assert got["prefix_cache_hit_ratio"] == (0.4, "vllm:gpu_prefix_cache_hit_rate")
    assert _values(got)["requests_running"] == 5.0 and _values(got)["preemptions_total"] == 7.0
    assert "queue_seconds_sum" not in got  # absent in that version: absent here, never 0


def test_vllm_deprecation_window_counts_once_and_prefers_new_names() -> None:
    got = _norm("vllm_0_9_2_both.txt", "vllm")
    assert got["kv_cache_usage_ratio"] == (0.3, "vllm:kv_cache_usage_perc")
    assert got["itl_seconds_count"] == (100.0, "vllm:inter_token_latency_seconds_count")


def test_aphrodite_prefix() -> None:
    got = _norm("aphrodite_0_6.txt", "aphrodite")
    assert got["kv_cache_usage_ratio"] == (0.625, "aphrodite:gpu_cache_usage_perc")
    assert _values(got)["requests_running"] == 6.0 and _values(got)["requests_waiting"] == 3.0
    assert got["itl_seconds_sum"] == (306.0, "aphrodite:time_per_output_token_seconds_sum")
    assert (
        normalise((FIXTURES / "aphrodite_0_6.txt").read_text(), "vllm") == []
    )  # wrong dialect finds nothing


def test_aphrodite_0_24_1_recorded_from_the_real_server() -> None:
    """Recorded from Aphrodite 0.24.1 on the CPU (tests/test_engine_aphrodite.py's server, two
    requests): V1 names under the aphrodite: prefix, every figure of the vocabulary found."""
    got = _norm("aphrodite_0_24_1.txt", "aphrodite")
    assert set(got) == set(VOCABULARY)
    assert all(raw.startswith("aphrodite:") for _, raw in got.values())
    assert got["kv_cache_usage_ratio"][1] == "aphrodite:kv_cache_usage_perc"
    assert got["itl_seconds_count"] == (6.0, "aphrodite:inter_token_latency_seconds_count")
    # summed over finished_reason, "repetition" (an Aphrodite-only reason) included
    assert got["requests_finished_total"] == (2.0, "aphrodite:request_success_total")
    assert _values(got)["generation_tokens_total"] == 8.0


def test_sglang() -> None:
    got = _values(_norm("sglang.txt", "sglang"))
    assert got == pytest.approx(
        {
            "requests_running": 8 + 8,  # summed over tp ranks
            "requests_waiting": 2,
            "kv_cache_usage_ratio": (0.4 + 0.6) / 2,
            "prefix_cache_hit_ratio": 0.2,
            "preemptions_total": 3,
            "prompt_tokens_total": 30000,
            "generation_tokens_total": 15000,
            "ttft_seconds_sum": 6.0,
            "ttft_seconds_count": 60,
            "itl_seconds_sum": 149.4,
            "itl_seconds_count": 14940,
            "e2e_seconds_sum": 155.4,
            "e2e_seconds_count": 60,
            "queue_seconds_sum": 0.9,
            "queue_seconds_count": 60,
        }
    )


def test_tgi_with_approximate_kv_usage() -> None:
    got = _norm("tgi.txt", "tgi")
    assert got["kv_cache_usage_ratio"] == (
        24576 / 98304,
        "tgi_batch_current_max_tokens/tgi_batch_max_total_tokens",
    )
    assert _values(got) | {"kv_cache_usage_ratio": 0} == pytest.approx(
        {
            "requests_running": 12,
            "requests_waiting": 5,
            "kv_cache_usage_ratio": 0,
            "prompt_tokens_total": 65536,
            "generation_tokens_total": 20480,
            "itl_seconds_sum": 2.4,
            "itl_seconds_count": 80,
            "e2e_seconds_sum": 640.0,
            "e2e_seconds_count": 80,
            "queue_seconds_sum": 16.0,
            "queue_seconds_count": 80,
        }
    )


def test_llamacpp() -> None:
    got = _values(_norm("llamacpp.txt", "llamacpp"))
    assert got == {
        "requests_running": 2,
        "requests_waiting": 1,
        "kv_cache_usage_ratio": 0.125,
        "prompt_tokens_total": 4096,
        "generation_tokens_total": 1024,
    }


def test_trtllm_serve_and_triton() -> None:
    serve = _norm("trtllm_serve.txt", "trtllm")
    assert _values(serve) == {
        "requests_running": 9,
        "requests_waiting": 4,
        "kv_cache_usage_ratio": 0.75,
        "prompt_tokens_total": 9000,
        "generation_tokens_total": 4500,
        "ttft_seconds_sum": 1.5,
        "ttft_seconds_count": 30,
        "e2e_seconds_sum": 45.0,
        "e2e_seconds_count": 30,
    }
    triton = _norm("triton_trtllm.txt", "trtllm")
    assert triton["requests_running"] == (10, 'nv_trt_llm_request_metrics{request_type="scheduled"}')
    assert triton["requests_waiting"][0] == 3
    assert triton["kv_cache_usage_ratio"] == (
        0.5,
        'nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="fraction"}',
    )
    assert triton["prompt_tokens_total"][0] == 25600 and triton["generation_tokens_total"][0] == 12800


def test_every_kind_has_a_fixture_that_yields_samples() -> None:
    seen = {
        "vllm": "vllm_v1_dp2.txt",
        "aphrodite": "aphrodite_0_6.txt",
        "sglang": "sglang.txt",
        "tgi": "tgi.txt",
        "llamacpp": "llamacpp.txt",
        "trtllm": "trtllm_serve.txt",
    }
    assert set(seen) == set(KINDS)
    for kind, name in seen.items():
        assert {"requests_running", "requests_waiting", "generation_tokens_total"} <= set(_norm(name, kind))


def test_bad_text_and_unknown_kind() -> None:
    with pytest.raises(MetricsError, match="unknown engine kind 'ollama'; known: vllm"):
        normalise("", "ollama")
    with pytest.raises(MetricsError, match="not Prometheus"):
        normalise('vllm:num_requests_running{engine="0" 3\n', "vllm")
    assert normalise("", "vllm") == []


def test_dcgm_text_to_gpu_fields() -> None:
    gpus = parse_dcgm((FIXTURES / "dcgm.txt").read_text())
    assert [g.gpu for g in gpus] == ["0", "1"]
    g0 = gpus[0]
    assert (g0.uuid, g0.gpu_name, g0.source) == (
        "GPU-aaaaaaaa-0000-0000-0000-000000000000",
        "NVIDIA H100 80GB HBM3",
        "dcgm",
    )
    assert g0.fields == pytest.approx(
        {
            "sm_clock_mhz": 1980,
            "temperature_c": 61,
            "power_watts": 512.25,
            "energy_joules": 123456789 / 1000,  # mJ -> J
            "gpu_util_ratio": 0.97,  # % -> ratio
            "mem_util_ratio": 0.45,
            "memory_free_bytes": 4096 * MIB,
            "memory_used_bytes": 76000 * MIB,
            "memory_reserved_bytes": 1463 * MIB,
            "memory_total_bytes": (76000 + 4096 + 1463) * MIB,
        }
    )
    assert gpus[1].fields["gpu_util_ratio"] == 0.0 and gpus[1].fields["sm_clock_mhz"] == 345


def test_dcgm_mig_instances_are_separate_gpus() -> None:
    text = (
        "# TYPE DCGM_FI_DEV_FB_USED gauge\n"
        'DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-x",modelName="A100",GPU_I_ID="1",GPU_I_PROFILE="1g.10gb"} 100\n'
        'DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-x",modelName="A100",GPU_I_ID="2",GPU_I_PROFILE="1g.10gb"} 200\n'
    )
    gpus = parse_dcgm(text)
    assert [(g.gpu, g.fields["memory_used_bytes"]) for g in gpus] == [
        ("0/mig1", 100 * MIB),
        ("0/mig2", 200 * MIB),
    ]
