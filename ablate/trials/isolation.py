"""Keep an in-process trial (``launcher=inline``) from ending the ablate process.

Under ``launcher=inline`` the task runs in the orchestrating process, so ``sys.exit``,
``os._exit`` or a ``KeyboardInterrupt`` raised by the task would end ablate itself, with no
results.csv and no verdict. :func:`contained` turns each into an exception the trial records as a
failed trial with its cause, while a real Ctrl-C (SIGINT delivered to this process) still stops
ablate as before: the two are told apart by whether the SIGINT handler ran.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from typing import Any


class TaskExit(BaseException):
    """The task tried to end the process (``sys.exit``, ``os._exit``); carries the cause in words.

    A ``BaseException`` like ``SystemExit``, so task code that catches ``Exception`` does not swallow it.
    """


class Guard:
    """What :func:`contained` saw: ``user_interrupt`` is True once a real SIGINT reached this process."""

    def __init__(self) -> None:
        self.user_interrupt = False


def exit_cause(exc: BaseException) -> str:
    """One line naming how the task tried to end the process (``sys.exit(3)``, ``os._exit(0)`` ...).

    Parameters
    ----------
    exc : BaseException
        A ``SystemExit``, ``TaskExit`` or ``KeyboardInterrupt`` raised by the task.
    """
    if isinstance(exc, TaskExit):
        return str(exc)
    if isinstance(exc, SystemExit):
        return f"the task called sys.exit({exc.code!r}) (SystemExit) before returning its metrics"
    return "the task raised KeyboardInterrupt itself (not a Ctrl-C from the user) before returning its metrics"


@contextlib.contextmanager
def contained() -> Iterator[Guard]:
    """Run the block with ``os._exit`` turned into :class:`TaskExit` and SIGINT noted in the guard.

    ``os._exit`` called from this process (any thread) raises :class:`TaskExit` instead; forked
    children (``multiprocessing`` workers) still exit for real, since they run under another pid.
    SIGINT (only when the handler can be set: main thread, SIGINT not ignored) sets
    ``Guard.user_interrupt`` and raises ``KeyboardInterrupt`` as Python's default handler does.
    Everything is restored on exit.

    Yields
    ------
    Guard
    """
    guard = Guard()
    pid = os.getpid()
    real_exit = os._exit

    def _exit(code: int) -> Any:
        if os.getpid() != pid:
            real_exit(code)
        raise TaskExit(f"the task called os._exit({code!r}) before returning its metrics")

    old_int: Any = None
    main = threading.current_thread() is threading.main_thread()
    if main:
        old_int = signal.getsignal(signal.SIGINT)
        if old_int is signal.SIG_IGN or old_int is None:
            main = False
    if main:
        def on_int(signum: int, frame: Any) -> None:
            guard.user_interrupt = True
            if callable(old_int) and old_int is not signal.default_int_handler:
                old_int(signum, frame)
            raise KeyboardInterrupt

        signal.signal(signal.SIGINT, on_int)
    os._exit = _exit  # type: ignore[assignment]
    try:
        yield guard
    finally:
        os._exit = real_exit
        if main:
            signal.signal(signal.SIGINT, old_int)
