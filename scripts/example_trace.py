"""Write scenarios/traces/example-mooncake.jsonl: a small generated trace in Mooncake's layout.

    python scripts/example_trace.py scenarios/traces/example-mooncake.jsonl

80 requests over about 40 s: Poisson arrivals with two bursts, lognormal prompt and output lengths,
and three shared system-prompt prefixes (``hash_ids`` blocks of 512 tokens) that a third of the
requests extend, so a replay exercises the prefix cache. Seeded: the same file every time.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path


def rows(seed: int = 11) -> list[dict[str, object]]:
    rng = random.Random(seed)
    out: list[dict[str, object]] = []
    t = 0.0
    next_block = 100
    for i in range(80):
        burst = 12 <= i < 24 or 50 <= i < 60
        t += rng.expovariate(8.0 if burst else 1.5)
        n_in = max(16, min(3000, int(rng.lognormvariate(6.0, 0.8))))
        n_out = max(8, min(512, int(rng.lognormvariate(4.8, 0.6))))
        blocks = (n_in + 511) // 512
        shared = [rng.randrange(3)] if rng.random() < 1 / 3 else []  # one of three shared prefixes
        ids = shared + list(range(next_block, next_block + blocks - len(shared)))
        next_block += blocks
        out.append(
            {"timestamp": round(t * 1000), "input_length": n_in, "output_length": n_out, "hash_ids": ids}
        )
    return out


def main(path: str) -> int:
    Path(path).write_text("".join(json.dumps(r) + "\n" for r in rows()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
