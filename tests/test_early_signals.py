"""Signals held while gevent patches the interpreter (llmload/base/early_signals.py) reach the
handler that was in place once the block is done: each once, in order, none lost."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest

from llmload.base.early_signals import signals_held


@pytest.fixture
def recorded() -> Iterator[list[str]]:
    got: list[str] = []
    before = {
        s: signal.signal(s, lambda n, _f: got.append(signal.Signals(n).name))
        for s in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        yield got
    finally:
        for s, h in before.items():
            signal.signal(s, h)


def test_signals_in_the_block_come_after_it_once_each(recorded: list[str]) -> None:
    with signals_held():
        signal.raise_signal(signal.SIGTERM)
        signal.raise_signal(signal.SIGINT)
        signal.raise_signal(signal.SIGTERM)
        assert recorded == []  # nothing reaches the handler inside
    assert recorded == ["SIGTERM", "SIGINT"]
    signal.raise_signal(signal.SIGINT)  # and the handler is back
    assert recorded == ["SIGTERM", "SIGINT", "SIGINT"]


def test_an_exception_in_the_block_still_delivers_them(recorded: list[str]) -> None:
    with pytest.raises(ValueError), signals_held():
        signal.raise_signal(signal.SIGINT)
        raise ValueError
    assert recorded == ["SIGINT"]
