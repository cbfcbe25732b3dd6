"""Locust's event hooks, typed: ``@on(events.init)`` registers a listener and keeps its signature.

Locust's ``EventHook.add_listener`` has no annotations, so used as a decorator it would make every
listener untyped for mypy; this one registers the same function in the same order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


def on(hook: Any) -> Callable[[F], F]:
    def register(fn: F) -> F:
        hook.add_listener(fn)
        return fn

    return register
