#!/usr/bin/env bash
# Install NVIDIA's AIPerf into its own virtualenv: a peer client for `make bench` (bench/peers.py),
# not a dependency of llmload. Idempotent: a stamp file makes a second run cost nothing.
# About 2.5 minutes and 1.2 GB the first time (pyarrow, transformers, scipy, pandas).
#   scripts/bench/aiperf.sh            # into $LLMLOAD_AIPERF_VENV (default: <repo>/.venv-aiperf)
set -euo pipefail
cd "$(dirname "$0")/../.."
REQS=("aiperf==0.13.0")
VENV="${LLMLOAD_AIPERF_VENV:-$PWD/.venv-aiperf}"
STAMP="$VENV/.llmload-bench"
[ "$(cat "$STAMP" 2>/dev/null)" = "${REQS[*]}" ] && exit 0
echo "aiperf: installing ${REQS[*]} into $VENV (about 2.5 minutes)"
[ -x "$VENV/bin/python" ] || "${LLMLOAD_AIPERF_PYTHON:-python3}" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q "${REQS[@]}"
"$VENV/bin/aiperf" --version >/dev/null
printf '%s' "${REQS[*]}" >"$STAMP"
