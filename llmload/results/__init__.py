"""The end of a run: summary.json built, the run judged (status, SLOs, exit code), rebuilt from its files."""
