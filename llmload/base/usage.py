"""Command-line usage errors: one line naming the option typed and what is wrong, exit 2."""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn


class ArgParser(argparse.ArgumentParser):
    """argparse, with a usage error as one line (the option typed, what is wrong) and exit 2."""

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: {message} (see {self.prog} --help)", file=sys.stderr)
        raise SystemExit(2)
