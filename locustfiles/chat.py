"""Streaming chat load on every target of a scenario.

    locust -f locustfiles/chat.py --scenario scenarios/quickstart.yaml            # web UI
    locust -f locustfiles/chat.py --headless --scenario scenarios/quickstart.yaml # headless

See README: the scenario decides targets, workload and load plan; Locust's own
flags (web UI, --master/--worker, --headless) work as usual.
"""

from llmload.locust.locustfile import LLMUser

__all__ = ["LLMUser"]
