"""A simulated Aphrodite serves the /metrics names of the real Aphrodite 0.24.1 (issue 24 item 5),
checked against the text recorded from the real server (tests/fixtures/engines/aphrodite_0_24_1.txt),
so the default demo's engine figures come from the same series a real run reads."""

from __future__ import annotations

import asyncio
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from collectors.engine_metrics import normalise
from llmload.sim.profiles import list_profiles, load_profile
from llmload.sim.server import SimServer

REAL = (Path(__file__).parent / "fixtures" / "engines" / "aphrodite_0_24_1.txt").read_text()
LEFT_OUT = {  # the MFU estimates: the simulator has no FLOP model (llmload/sim/v1_metrics.py)
    "aphrodite:estimated_flops_per_gpu",
    "aphrodite:estimated_read_bytes_per_gpu",
    "aphrodite:estimated_write_bytes_per_gpu",
}
APHRODITE_PROFILES = [n for n in list_profiles() if load_profile(n).dialect == "aphrodite"]


def _families(text: str) -> dict[str, tuple[set[str], set[tuple[tuple[str, str], ...]]]]:
    """family -> (its label names, its label sets without engine and model_name), _created left out."""
    out: dict[str, tuple[set[str], set[tuple[tuple[str, str], ...]]]] = {}
    for fam in text_string_to_metric_families(text):
        if not fam.name.startswith("aphrodite:") or fam.name.endswith("_created"):
            continue
        names: set[str] = set()
        sets: set[tuple[tuple[str, str], ...]] = set()
        for s in fam.samples:
            if s.name.endswith("_created"):
                continue
            names |= set(s.labels) - {"le"}
            sets.add(
                tuple(sorted((k, v) for k, v in s.labels.items() if k not in ("le", "engine", "model_name")))
            )
        out[fam.name] = (names, sets)
    return out


async def _served(profile: str, requests: int) -> str:
    """The /metrics text of an in-process simulator after ``requests`` streamed chat requests."""
    server = SimServer(load_profile(profile))
    port = await server.start()
    body = b'{"messages":[{"role":"user","content":"hello there"}],"max_tokens":4,"stream":true}'
    head = b"POST /v1/chat/completions HTTP/1.1\r\nhost: sim\r\ncontent-length: %d\r\n\r\n" % len(body)
    try:
        for _ in range(requests):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(head + body)
            while not (await reader.readline()).startswith(b"data: [DONE]"):
                pass
            writer.close()
        return server.metrics.text().decode()
    finally:
        await server.close()


def test_every_name_llmload_reads_from_the_real_server_is_served_by_each_aphrodite_profile() -> None:
    assert APHRODITE_PROFILES  # the quickstart's aphrodite-exl2 among them
    real = {(s.metric, s.raw_name) for s in normalise(REAL, "aphrodite")}
    for profile in APHRODITE_PROFILES:
        sim = {(s.metric, s.raw_name) for s in normalise(asyncio.run(_served(profile, 1)), "aphrodite")}
        assert sim == real, profile  # the same figures, from the same series


def test_the_simulator_serves_the_real_families_with_their_labels() -> None:
    real, sim = _families(REAL), _families(asyncio.run(_served(APHRODITE_PROFILES[0], 0)))
    assert set(real) - set(sim) == LEFT_OUT
    for name in set(real) - LEFT_OUT - {"aphrodite:cache_config_info"}:
        assert sim[name][0] == real[name][0], name  # label names
    # the configuration's labels that the simulator has (block size, blocks, prefix caching, ...)
    assert sim["aphrodite:cache_config_info"][0] < real["aphrodite:cache_config_info"][0]
    for name in ("request_success_total", "prompt_tokens_by_source_total", "num_requests_waiting_by_reason",
                 "engine_sleep_state"):  # fmt: skip
        family = "aphrodite:" + name.removesuffix("_total")
        assert sim[family][1] == real[family][1], family  # finished_reason, source, reason values


def test_the_request_histograms_count_what_the_simulator_did() -> None:
    fams = {
        s.name + str(sorted(s.labels.items())): s.value
        for fam in text_string_to_metric_families(asyncio.run(_served(APHRODITE_PROFILES[0], 3)))
        for s in fam.samples
        if "le" not in s.labels
    }

    def value(name: str, **labels: str) -> float:
        return fams[name + str(sorted({"engine": "0", "model_name": _model(), **labels}.items()))]

    for h in ("request_prompt_tokens", "request_generation_tokens", "request_params_max_tokens",
              "request_prefill_time_seconds", "request_decode_time_seconds", "request_num_preemptions"):  # fmt: skip
        assert value(f"aphrodite:{h}_count") == 3, h
    assert value("aphrodite:request_generation_tokens_sum") == value("aphrodite:generation_tokens_total")
    assert value("aphrodite:request_params_max_tokens_sum") == 3 * 4
    prompt = value("aphrodite:prompt_tokens_total")
    assert prompt > 0 and value("aphrodite:request_prompt_tokens_sum") == prompt
    by_source = [value("aphrodite:prompt_tokens_by_source_total", source=s)
                 for s in ("local_compute", "local_cache_hit", "external_kv_transfer")]  # fmt: skip
    assert sum(by_source) == prompt and by_source[1] == value("aphrodite:prompt_tokens_cached_total")
    assert value("aphrodite:request_success_total", finished_reason="repetition") == 0
    ended = sum(value("aphrodite:request_success_total", finished_reason=r) for r in ("stop", "length"))
    assert ended == 3
    assert (
        value("aphrodite:iteration_tokens_total_sum")
        == prompt - by_source[1] + value("aphrodite:generation_tokens_total") - 3
    )  # each step's new tokens: the prompts' computed part, then one per decode step after the first


def _model() -> str:
    return load_profile(APHRODITE_PROFILES[0]).model
