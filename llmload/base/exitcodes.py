"""Every exit code llmload's commands end with, in one leaf module (README "Exit codes").

``llmload run | master`` (and ``llmload report``, which rebuilds a run's verdict):

=====  ======================================================================================
code   meaning
=====  ======================================================================================
0      the run completed and every SLO was met (or none is set)
1      an SLO was missed (``llmload compare --fail-on-regression``: a regression was found)
2      bad input (scenario, dataset, option) or a target not ready: one line names what
3      the run is invalid: no request succeeded, the client was overloaded where its figures rest
       on user-space stamps, the plan ended early, a worker was lost (unless allowed), or the
       results disk filled (status interrupted: the run stopped, docs/results.md); or it is
       inconclusive: an SLO rests on a figure the run flagged and none was missed (status stays
       ok; ``slo.flagged_figures: judge`` judges it anyway: llmload/report/flagged.py)
4      the run was judged and summary.json holds its figures and verdict, but the reports
       (report.html, report.md, junit.xml) could not be written; a missed SLO or an invalid run
       keeps its own code (1, 3): the reports never change a verdict
5      ``llmload worker``: its master went away (no heartbeat, or a broken connection): the worker
       stopped sending, cut its open streams and spooled its records (docs/distributed.md)
130    interrupted by SIGINT (Ctrl-C); 143: by SIGTERM (128 + the signal's number, as a shell says)
=====  ======================================================================================

``llmload collect`` and ``llmload influx replay`` use 1 for "nothing to read" and "points remain".
"""

from __future__ import annotations

import signal

EXIT_OK = 0
EXIT_SLO = 1
EXIT_INPUT = 2
EXIT_INVALID = 3
EXIT_REPORTS = 4
EXIT_MASTER_LOST = 5  # llmload worker: its master is gone (llmload/locust/orphan.py)
EXIT_SIGINT = 128 + signal.SIGINT
EXIT_SIGTERM = 128 + signal.SIGTERM
EXIT_NO_SOURCE = 1  # llmload collect: no source could be read
EXIT_REMAINING = 1  # llmload influx replay: points remain spooled


def exit_code_for_signal(name: str) -> int:
    """130 for SIGINT, 143 for SIGTERM: 128 + the signal's number."""
    return 128 + int(signal.Signals[name])
