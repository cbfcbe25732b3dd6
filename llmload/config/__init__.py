"""Scenario syntax: YAML with line numbers, the validated Scenario, executors, SLOs, costs, secrets, the resolved run."""
