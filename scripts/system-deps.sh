#!/usr/bin/env bash
# Install the system packages the test suite uses, when missing (Debian/Ubuntu, as root or with sudo):
# InfluxDB 1.x and VictoriaMetrics (telemetry tests), Chromium + driver (browser tests),
# docker-compose 1.x and shellcheck (offline compose and entry-script validation), iproute2 (network
# namespaces: a worker host whose link a test cuts), openssl (a self-signed certificate for a TLS
# target), faketime (a worker whose wall clock is off: tests/test_clocks.py), gcc and Python's headers
# (the batch reader's reads in C, built at install: setup.py). Safe to run repeatedly.
set -euo pipefail
need=()
command -v influxd >/dev/null 2>&1 || need+=(influxdb)
command -v victoria-metrics >/dev/null 2>&1 || need+=(victoria-metrics)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v chromedriver >/dev/null 2>&1 || need+=(chromium-driver)
command -v docker-compose >/dev/null 2>&1 || need+=(docker-compose)
command -v shellcheck >/dev/null 2>&1 || need+=(shellcheck)
command -v ip >/dev/null 2>&1 || need+=(iproute2)
command -v openssl >/dev/null 2>&1 || need+=(openssl)
command -v faketime >/dev/null 2>&1 || need+=(faketime)
# a C compiler and Python's headers: the batch reader's reads in C (setup.py, llmload/client/_chunked.c)
command -v gcc >/dev/null 2>&1 || need+=(gcc)
python3 -c 'import os, sysconfig, sys; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' \
  2>/dev/null || need+=(python3-dev)
if [ ${#need[@]} -eq 0 ]; then
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "system-deps: missing ${need[*]} and not root: install them, or tests that need them will skip (fail when CI=true)" >&2
    exit 0
  fi
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "system-deps: no apt-get; install ${need[*]} by hand" >&2
  exit 0
fi
echo "system-deps: installing ${need[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
