"""The limits every size in a scenario stays within (docs/scenarios.md lists them).

They are generous, far above any real run, and there so that a slip of the keyboard
(``users: 1000000000`` ended in a fatal Python error, exit 134) is one line and exit 2 before
anything is allocated (issue 30, item 6).
"""

MAX_USERS = 100_000  # concurrent streams (users, vus, max_vus, concurrency levels) per target
MAX_RATE_PER_S = 100_000.0  # arrivals per second per target (rates, spawn rates, rate levels)
MAX_TOKENS = 10_000_000  # tokens in one prompt or one answer
MAX_ARRIVALS = 10_000_000  # arrivals an open-loop phase schedules per target (each is kept in memory)
MAX_SCENARIO_BYTES = 8 * 2**20  # a scenario file (its datasets and traces are files of their own)
