"""What a run saves, as typed models (summary.json, requests.jsonl, timeseries, telemetry) and their JSON schemas."""
