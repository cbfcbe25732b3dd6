#!/usr/bin/env bash
# Entry point of the llmload image: one role per container, configured by environment variables
# (docker-compose.yml sets them from .env; .env.example documents each one).
#
#   master      llmload master (Locust master + web UI); sends the scenario to the workers
#   worker      llmload worker, connects to $LLMLOAD_MASTER_HOST:$LLMLOAD_MASTER_PORT
#   run         llmload run (headless, one host; $LLMLOAD_WORKERS local worker processes)
#   collector   python -m collectors (GPU-host sidecar: NVML/DCGM + engine /metrics -> InfluxDB)
#   sim         llmload sim (a simulated engine, no GPU)
#   anything else is executed as given (e.g. `bash`, `llmload report results/...`).
#
# Extra arguments after the role are passed on unchanged. Secrets (INFLUX_TOKEN, engine API keys)
# are read from the environment by llmload itself and never put on a command line, where `ps` and
# `docker inspect` would show them. LLMLOAD_ENTRYPOINT_DRY_RUN=1 prints the command (one argument
# per line) instead of running it.
set -euo pipefail

role="${1:-help}"
if [ "$#" -gt 0 ]; then
	shift
fi

args=()

die() {
	echo "llmload-entrypoint: $*" >&2
	exit 2
}

# Split a space-separated variable into arguments, each preceded by FLAG.
add_each() {
	local flag="$1" value="$2" item
	local -a items
	read -r -a items <<<"$value"
	for item in "${items[@]}"; do
		args+=("$flag" "$item")
	done
}

# InfluxDB: v2 API (org + bucket) when INFLUX_BUCKET is set, else v1 (database INFLUX_DB).
add_influx() {
	[ -n "${LLMLOAD_INFLUX_URL:-}" ] || return 0
	args+=(--influx "$LLMLOAD_INFLUX_URL" --influx-token-env INFLUX_TOKEN)
	if [ -n "${INFLUX_BUCKET:-}" ]; then
		args+=(--influx-api v2 --influx-bucket "$INFLUX_BUCKET")
		if [ -n "${INFLUX_ORG:-}" ]; then
			args+=(--influx-org "$INFLUX_ORG")
		fi
	else
		args+=(--influx-api v1 --influx-db "${INFLUX_DB:-llmload}")
	fi
}

# Options shared by `master` and `run`: scenario, overrides, target subset, results, InfluxDB.
add_scenario() {
	[ -n "${LLMLOAD_SCENARIO:-}" ] || die "LLMLOAD_SCENARIO is not set (path of the scenario file)"
	args+=("$LLMLOAD_SCENARIO")
	add_each --set "${LLMLOAD_SET:-}"
	if [ -n "${LLMLOAD_READY_TIMEOUT:-}" ]; then
		args+=(--set "client.ready_timeout=${LLMLOAD_READY_TIMEOUT}s")
	fi
	if [ -n "${LLMLOAD_TARGETS:-}" ]; then
		args+=(--targets "$LLMLOAD_TARGETS")
	fi
	if [ -n "${LLMLOAD_RESULTS:-}" ]; then
		args+=(--results "$LLMLOAD_RESULTS")
	fi
	add_influx
}

is_true() {
	case "${1:-}" in
	1 | true | TRUE | True | yes | on) return 0 ;;
	*) return 1 ;;
	esac
}

case "$role" in
master)
	args=(llmload master)
	add_scenario
	args+=(--master-bind-host "${LLMLOAD_BIND_HOST:-0.0.0.0}" --master-bind-port "${LLMLOAD_MASTER_PORT:-5557}")
	args+=(--web-host "${LLMLOAD_BIND_HOST:-0.0.0.0}" --web-port "${LLMLOAD_WEB_PORT:-8089}")
	args+=(--expect-workers "${LLMLOAD_EXPECT_WORKERS:-1}")
	if is_true "${LLMLOAD_HEADLESS:-false}"; then
		args+=(--headless)
	fi
	;;
worker)
	args=(llmload worker --master-host "${LLMLOAD_MASTER_HOST:-locust-master}")
	args+=(--master-port "${LLMLOAD_MASTER_PORT:-5557}")
	;;
run)
	args=(llmload run)
	add_scenario
	args+=(--workers "${LLMLOAD_WORKERS:-0}")
	;;
collector)
	args=(python -m collectors --gpu "${COLLECTOR_GPU:-nvml}" --interval "${COLLECTOR_INTERVAL:-5}")
	add_each --engine-metrics "${COLLECTOR_ENGINE_METRICS:-}"
	add_each --engine-kind "${COLLECTOR_ENGINE_KINDS:-}"
	add_each --tag "${COLLECTOR_TAGS:-}"
	if [ -n "${COLLECTOR_HOST_TAG:-}" ]; then
		args+=(--host-tag "$COLLECTOR_HOST_TAG")
	fi
	args+=(--spool-dir "${COLLECTOR_SPOOL_DIR:-/app/results/collector-spool}")
	if [ -n "${LLMLOAD_INFLUX_URL:-}" ]; then
		add_influx
	else
		args+=(--stdout)
	fi
	;;
sim)
	[ -n "${SIM_PROFILE:-}" ] || die "SIM_PROFILE is not set (llmload sim --list-profiles)"
	args=(llmload sim --host "${SIM_HOST:-0.0.0.0}" --port "${SIM_PORT:-8000}" --profile "$SIM_PROFILE")
	if [ -n "${SIM_SEED:-}" ]; then
		args+=(--seed "$SIM_SEED")
	fi
	;;
help | -h | --help)
	sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'
	exit 0
	;;
*)
	args=("$role")
	;;
esac

args+=("$@")
if is_true "${LLMLOAD_ENTRYPOINT_DRY_RUN:-}"; then
	printf '%s\n' "${args[@]}"
	exit 0
fi
exec "${args[@]}"
