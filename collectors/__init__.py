"""The GPU-host sidecar collector (`python -m collectors`)."""
