"""The options llmload adds to Locust's command line: the locustfile's plugin adds them at Locust's
start (plugin.py), and ``llmload run`` asks the same parser which options are unknown (runcmd.py)."""

from __future__ import annotations

import argparse
from typing import Any


def add_options(parser: Any) -> None:
    """llmload's options on Locust's parser (``llmload run`` gives them to Locust: runcmd.py)."""
    grp = parser  # Locust's include_in_web_ui works on the parser itself, not on groups
    grp.add_argument("--scenario", default="", include_in_web_ui=True, help="llmload scenario YAML file")
    grp.add_argument(
        "--set", dest="llm_set", action="append", default=[], help="override a scenario field: key.path=value"
    )
    grp.add_argument(
        "--results", dest="llm_results", default="", help="results directory (default: output.dir/run_id)"
    )
    grp.add_argument(
        "--llm-targets",
        default="",
        include_in_web_ui=True,
        help="comma-separated targets to run (default: all)",
    )
    grp.add_argument(
        "--allow-worker-loss", action="store_true", default=False, help="exit 0 when a worker is lost"
    )
    grp.add_argument(  # headless only: the web UI's form does not show it
        "--llm-quiet",
        action="store_true",
        default=False,
        include_in_web_ui=False,
        help="no live progress lines",
    )
    grp.add_argument(
        "--llm-no-reports", action="store_true", default=False, help="skip HTML/Markdown/JUnit reports"
    )
    # llmload run's Handoff file: internal, not in the form
    grp.add_argument("--llm-run", default="", include_in_web_ui=False, help=argparse.SUPPRESS)
