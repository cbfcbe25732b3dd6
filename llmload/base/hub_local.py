"""One object per gevent hub (so per thread), kept on the hub itself: no module-level state.

The stream client's batch reader and its silence watchdog (llmload/client/) each serve every stream
of one event loop; a second thread with its own hub gets its own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import gevent

T = TypeVar("T")


def per_hub(name: str, make: Callable[[], T]) -> T:
    """This hub's ``name``, made by ``make`` at its first use."""
    hub = gevent.get_hub()
    got: T | None = getattr(hub, name, None)
    if got is None:
        got = make()
        setattr(hub, name, got)
    return got
