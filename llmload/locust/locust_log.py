"""What a headless run keeps of Locust's own log.

    quiet_headless()   # once the run is set up, headless only

- Locust's periodic stats table: llmload prints its own progress line (intervals.py), so only the
  stats logger's warnings are kept.
- Locust's "You can't start a distributed test before at least one worker processes has connected":
  when a worker quits, Locust's master re-dispatches its users to the workers left before it sees that
  none is left, and with none it warns so (locust/runners.py, the "quit" message). Nobody started
  anything: the line came just before llmload's own about the last worker leaving (fleet.py,
  conclude.py), which says what happened and what it means for the run. In the web UI a user can press
  Start with no worker connected, so there the warning stays.
"""

from __future__ import annotations

import logging

REDISPATCH_WARNING = "You can't start a distributed test before at least one worker"


class _NoRedispatchWarning(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(REDISPATCH_WARNING)


def quiet_headless() -> None:
    logging.getLogger("locust.stats_logger").setLevel(logging.WARNING)
    runners = logging.getLogger("locust.runners")
    if not any(isinstance(f, _NoRedispatchWarning) for f in runners.filters):  # one per process
        runners.addFilter(_NoRedispatchWarning())
