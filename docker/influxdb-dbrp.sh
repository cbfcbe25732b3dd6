#!/usr/bin/env bash
# One-shot init step of the compose stack (service influxdb-dbrp): map the InfluxDB 1.x database
# name $INFLUX_DB to the bucket $INFLUX_BUCKET (retention policy "autogen"), so that InfluxQL
# (Grafana's dashboards, `/query?db=`) and the v1 write API (`/write?db=`) work on InfluxDB 2.x.
# Idempotent: runs at every `docker compose up`, creates the mapping only when it is missing.
# The influx CLI reads INFLUX_HOST, INFLUX_TOKEN and INFLUX_ORG from the environment.
set -euo pipefail

: "${INFLUX_HOST:?INFLUX_HOST is not set}"
: "${INFLUX_TOKEN:?INFLUX_TOKEN is not set}"
: "${INFLUX_ORG:?INFLUX_ORG is not set}"
: "${INFLUX_BUCKET:?INFLUX_BUCKET is not set}"
db="${INFLUX_DB:-llmload}"
rp="${INFLUX_RP:-autogen}"

bucket_id="$(influx bucket list --name "$INFLUX_BUCKET" --hide-headers | awk 'NR == 1 {print $1}')"
if [ -z "$bucket_id" ]; then
	echo "influxdb-dbrp: bucket '$INFLUX_BUCKET' not found in org '$INFLUX_ORG'" >&2
	exit 1
fi

existing="$(influx v1 dbrp list --db "$db" --hide-headers || true)"
if [ -n "$existing" ]; then
	echo "influxdb-dbrp: database '$db' is already mapped:"
	echo "$existing"
	exit 0
fi

influx v1 dbrp create --db "$db" --rp "$rp" --bucket-id "$bucket_id" --default
echo "influxdb-dbrp: mapped database '$db' (rp '$rp') to bucket '$INFLUX_BUCKET' ($bucket_id)"
