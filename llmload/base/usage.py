"""Command-line usage errors: one line naming the option typed and what is wrong, exit 2."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import NoReturn


class ArgParser(argparse.ArgumentParser):
    """argparse, with a usage error as one line (the option typed, what is wrong) and exit 2."""

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: {message} (see {self.prog} --help)", file=sys.stderr)
        raise SystemExit(2)


def port_number(value: str) -> int:
    """A TCP port option: a number from 0 (the kernel picks one, where the option allows it) to 65535."""
    try:
        port = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {value!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port from 0 to 65535, got {port}")
    return port


def bounded_int(low: int, high: int) -> Callable[[str], int]:
    """An integer option from ``low`` to ``high``: one past them is a usage error, not hours or memory."""

    def parse(value: str) -> int:
        try:
            n = int(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {value!r}") from None
        if not low <= n <= high:
            raise argparse.ArgumentTypeError(f"expected {low:,} to {high:,}, got {n:,}")
        return n

    return parse
