"""The GPU-and-memory dashboard: GPU telemetry and engine metrics on one timeline."""

from __future__ import annotations

from typing import Any

from dashlib import (  # the panel vocabulary
    BUCKET,
    HOST,
    RUN,
    TARGET,
    TF,
    Layout,
    dashboard,
    q,
    regex_override,
    table,
    timeseries,
    unit_override,
    var_host,
    var_run_id,
    var_target,
)


def gpu_memory() -> dict[str, Any]:
    lay = Layout()

    def eng(metric: str, select: str = 'mean("value")') -> str:
        return (
            f'SELECT {select} FROM "engine" WHERE "metric" = \'{metric}\' AND {HOST} AND {TF} '
            f'{BUCKET}, "target", "host" fill(none)'
        )

    def gpu(field: str, agg: str = "mean") -> str:
        return f'SELECT {agg}("{field}") FROM "gpu" WHERE {HOST} AND {TF} {BUCKET}, "host", "gpu" fill(none)'

    client_tok_s = (
        f'SELECT mean("output_tok_s") FROM "llm_interval" WHERE {RUN} AND {TARGET} AND {TF} '
        f'{BUCKET}, "target" fill(none)'
    )
    counter_rate = 'non_negative_derivative(max("value"), 1s)'
    diff = 'non_negative_difference(max("value"))'
    panels = [
        timeseries(
            lay,
            "GPU memory used per host and GPU",
            "Framebuffer memory in use per GPU (solid) and the card's total (dashed); flat under vLLM and "
            "Aphrodite, which pre-allocate, so read KV-cache usage for load.",
            [
                q("A", gpu("memory_used_bytes"), "$tag_host gpu$tag_gpu used"),
                q("B", gpu("memory_total_bytes", "max"), "$tag_host gpu$tag_gpu total"),
            ],
            "bytes",
            overrides=[
                regex_override(
                    ".* total$", [{"id": "custom.lineStyle", "value": {"fill": "dash", "dash": [10, 10]}}]
                )
            ],
        ),
        timeseries(
            lay,
            "KV-cache usage per engine",
            "Fraction of the engine's KV-cache blocks in use (engine metric kv_cache_usage_ratio), the real "
            "memory-pressure signal of a pre-allocating engine.",
            [q("A", eng("kv_cache_usage_ratio"), "$tag_target ($tag_host)")],
            "percentunit",
        ),
        timeseries(
            lay,
            "GPU utilisation",
            "Share of time a kernel was running on each GPU (gpu_util_ratio from NVML or DCGM).",
            [q("A", gpu("gpu_util_ratio"), "$tag_host gpu$tag_gpu")],
            "percentunit",
        ),
        timeseries(
            lay,
            "GPU power",
            "Board power draw per GPU in watts (power_watts).",
            [q("A", gpu("power_watts"), "$tag_host gpu$tag_gpu")],
            "watt",
        ),
        timeseries(
            lay,
            "Engine requests running / waiting",
            "Requests the engine is decoding (running) and queued (waiting), from its own /metrics as "
            "normalised by the collector.",
            [
                q("A", eng("requests_running"), "$tag_target running"),
                q("B", eng("requests_waiting"), "$tag_target waiting"),
            ],
            "short",
        ),
        timeseries(
            lay,
            "Engine vs client output tokens/s",
            "Generation tokens/s counted by the engine (rate of generation_tokens_total, solid) against the "
            "output tokens/s llmload received (dashed), on one timeline.",
            [
                q("A", eng("generation_tokens_total", counter_rate), "$tag_target engine"),
                q("B", client_tok_s, "$tag_target client"),
            ],
            "short",
            min_interval="2s",
            overrides=[
                regex_override(
                    ".* client$", [{"id": "custom.lineStyle", "value": {"fill": "dash", "dash": [10, 10]}}]
                )
            ],
        ),
        timeseries(
            lay,
            "Preemptions/s",
            "Requests preempted per second by the engine's scheduler (non_negative_derivative of "
            "preemptions_total); non-zero means the KV cache ran out.",
            [q("A", eng("preemptions_total", counter_rate), "$tag_target")],
            "short",
        ),
        timeseries(
            lay,
            "Prefix-cache hit ratio",
            "Prefix-cache hits / queries within each bucket from the engine's counters (solid), and the "
            "collector's cumulative ratio since engine start (dashed).",
            [
                q(
                    "A",
                    f'SELECT sum("hits") / sum("queries") FROM '
                    f'(SELECT {diff} AS "hits" FROM "engine" WHERE "metric" = \'prefix_cache_hits_total\' '
                    f'AND {HOST} AND {TF} {BUCKET}, "target", "host"), '
                    f'(SELECT {diff} AS "queries" FROM "engine" WHERE "metric" = \'prefix_cache_queries_total\' '
                    f'AND {HOST} AND {TF} {BUCKET}, "target", "host") '
                    f'WHERE {TF} {BUCKET}, "target", "host" fill(none)',
                    "$tag_target per bucket",
                ),
                q("B", eng("prefix_cache_hit_ratio"), "$tag_target cumulative"),
            ],
            "percentunit",
            overrides=[
                regex_override(
                    ".* cumulative$",
                    [{"id": "custom.lineStyle", "value": {"fill": "dash", "dash": [10, 10]}}],
                )
            ],
        ),
    ]
    panels.append(
        table(
            lay,
            "Energy per 1,000 output tokens (time range)",
            "Joules the target's GPUs used over the time range (increase of energy_joules, summed over the "
            "GPUs its collector tagged with target=...) per 1,000 output tokens llmload received; set the "
            "time range to the run, idle time counts.",
            [
                q(
                    "A",
                    'SELECT sum("joules") AS "energy_j" FROM (SELECT spread("energy_joules") AS "joules" '
                    f'FROM "gpu" WHERE {HOST} AND {TF} GROUP BY "host", "gpu", "target") '
                    f'WHERE {TARGET} GROUP BY "target"',
                    fmt="table",
                ),
                q(
                    "B",
                    'SELECT sum("output_tokens") AS "output_tokens" FROM "llm_request" '
                    f'WHERE {RUN} AND {TARGET} AND {TF} GROUP BY "target"',
                    fmt="table",
                ),
            ],
            [
                {"id": "merge", "options": {}},
                {
                    "id": "calculateField",
                    "options": {
                        "mode": "binary",
                        "alias": "joules_per_token",
                        "binary": {"left": "energy_j", "operator": "/", "right": "output_tokens"},
                        "replaceFields": False,
                    },
                },
                {
                    "id": "calculateField",
                    "options": {
                        "mode": "binary",
                        "alias": "J per 1k tokens",
                        "binary": {"left": "joules_per_token", "operator": "*", "right": "1000"},
                        "replaceFields": False,
                    },
                },
                {
                    "id": "organize",
                    "options": {
                        "excludeByName": {"Time": True, "joules_per_token": True},
                        "renameByName": {
                            "target": "Target",
                            "energy_j": "Energy (J)",
                            "output_tokens": "Output tokens",
                        },
                    },
                },
            ],
            h=6,
            overrides=[unit_override("J per 1k tokens", "none", 1), unit_override("Energy (J)", "joule", 0)],
        )
    )
    return dashboard(
        "llmload-gpu-memory",
        "llmload: GPU, memory and engine internals",
        "GPU memory, KV cache, utilisation, power and energy per token next to the engine's scheduler "
        "metrics and the client's throughput, on one timeline (collector data: gpu and engine).",
        panels,
        [var_run_id(multi=False), var_target(), var_host()],
    )
