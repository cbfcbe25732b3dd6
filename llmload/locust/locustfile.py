"""The locustfile llmload runs (``locust -f`` this file, or locustfiles/chat.py).

Users are generated per target from ``--scenario`` at init; LLMUser is only the
placeholder Locust needs to find at import time.
"""

from llmload.locust import plugin, webui_hooks  # noqa: F401  (register the options and listeners)
from llmload.locust.users import LLMUser

__all__ = ["LLMUser"]
