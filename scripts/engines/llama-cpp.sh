#!/usr/bin/env bash
# Build llama.cpp's llama-server (CPU only) for the real-engine tests (tests/engines.py).
# The source is the llama.cpp tree vendored in llama-cpp-python's sdist, taken from PyPI with pip:
# nothing else is downloaded (no prebuilt web UI, no curl, no OpenSSL). Idempotent: the binary and a
# stamp are cached in $LLMLOAD_LLAMA_CPP_DIR (default <repo>/.tools/llama.cpp), so a second run is
# instant. The first one takes 10-26 minutes on 2 cores.
#   scripts/engines/llama-cpp.sh           # then: .tools/llama.cpp/bin/llama-server --version
set -euo pipefail
cd "$(dirname "$0")/../.."
VERSION=0.3.36 # llama-cpp-python, whose vendor/llama.cpp is built
DEST="${LLMLOAD_LLAMA_CPP_DIR:-$PWD/.tools/llama.cpp}"
BIN="$DEST/bin/llama-server"
STAMP="$DEST/.llmload-llama-cpp-python-$VERSION"
[ -f "$STAMP" ] && [ -x "$BIN" ] && exit 0

need=()
command -v cmake >/dev/null 2>&1 || need+=(cmake)
command -v g++ >/dev/null 2>&1 || need+=(g++)
command -v make >/dev/null 2>&1 || need+=(make)
PY=""
for c in "$PWD/.venv/bin/python" python3; do
	if "$c" -m pip --version >/dev/null 2>&1; then PY="$c"; break; fi
done
[ -n "$PY" ] || need+=(python3-pip)
if [ ${#need[@]} -gt 0 ]; then
	[ "$(id -u)" -eq 0 ] || { echo "llama-cpp: missing ${need[*]} (install them as root)" >&2; exit 1; }
	echo "llama-cpp: installing ${need[*]}"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
	PY="${PY:-python3}"
fi

work="$DEST/work"
rm -rf "$work"
mkdir -p "$work/src" "$DEST/bin"
trap 'echo "llama-cpp: failed; logs in $work" >&2; tail -n 40 "$work"/*.log >&2 2>/dev/null || true' ERR
echo "llama-cpp: fetching llama-cpp-python==$VERSION's sdist from PyPI"
"$PY" -m pip download -q --no-deps --no-binary :all: "llama-cpp-python==$VERSION" -d "$work"
tar -xzf "$work/llama_cpp_python-$VERSION.tar.gz" -C "$work/src" --strip-components=3 \
	"llama_cpp_python-$VERSION/vendor/llama.cpp"
echo "llama-cpp: building llama-server (10-26 minutes on 2 cores)"
cmake -S "$work/src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
	-DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_UI=OFF \
	-DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
	-DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_APP=OFF >"$work/cmake.log"
cmake --build "$work/build" --target llama-server -j "${LLMLOAD_BUILD_JOBS:-2}" >"$work/build.log"
install -m 0755 "$work/build/bin/llama-server" "$BIN"
"$BIN" --version 2>&1 | head -n 2
rm -rf "$work"
touch "$STAMP"
