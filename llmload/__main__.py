import _signal  # built in and loaded before any of llmload runs: the handlers go in before any import

_NAMES = {_signal.SIGINT: "SIGINT", _signal.SIGTERM: "SIGTERM"}


def _early(signum: int, _frame: object) -> None:
    """A signal while the command is still importing: nothing was sent or made, so it ends here and now
    (an exception raised inside a C extension's import can crash the interpreter: SIGSEGV, seen once)."""
    import os

    if not os.environ.get(
        "LLMLOAD_RUN_WORKER"
    ):  # a worker of llmload run: its master says it (children.RUN_WORKER)
        os.write(2, f"llmload: {_NAMES[signum]} during start-up: nothing was sent\n".encode())
    os._exit(128 + signum)


for _sig in _NAMES:
    _signal.signal(_sig, _early)

from llmload.cli import main  # noqa: E402 - after the handlers: a signal during the imports is one line

raise SystemExit(main())  # each command decides from here (llmload/cli/__init__.py, OWN_SIGNALS)
