"""The one "skip, or fail in CI" helper: a test that needs something this host may lack.

    from tests.required import require

    influxd = require(shutil.which("influxd"), "influxd is not installed (apt-get install influxdb)")

Locally a missing thing skips the test with the reason. With ``CI=true`` it fails the test instead:
CI must run against the real servers, engines and browsers, and a skip there would hide that it did not.
"""

from __future__ import annotations

import os
from typing import NoReturn, TypeVar

import pytest

T = TypeVar("T")


def in_ci() -> bool:
    """CI=true (read at each call: a test may set it)."""
    return os.environ.get("CI", "").lower() == "true"


def missing(reason: str) -> NoReturn:
    """Skip the test with ``reason``; with CI=true fail it."""
    if in_ci():
        pytest.fail(f"CI=true and {reason}", pytrace=False)
    pytest.skip(reason)


def require(thing: T | None, reason: str) -> T:
    """``thing`` when it is there (truthy); otherwise skip the test, or fail it with CI=true."""
    if not thing:
        missing(reason)
    return thing
