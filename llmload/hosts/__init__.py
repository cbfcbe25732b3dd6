"""The engines a run talks to: simulators started, readiness, the /metrics scraper."""
