"""Keep an in-process trial (``launcher=inline``) from ending the ablate process or changing its state.

Under ``launcher=inline`` the task runs in the orchestrating process, so ``sys.exit``,
``os._exit`` or a ``KeyboardInterrupt`` raised by the task would end ablate itself, with no
results.csv and no verdict. :func:`contained` turns each into an exception the trial records as a
failed trial with its cause, while a real Ctrl-C (SIGINT delivered to this process) still stops
ablate as before: the two are told apart by whether the SIGINT handler ran. What the task changes of
the process-global state (environment, working directory, ``sys.path``, numpy's and torch's settings ...)
is put back after it (:func:`snapshot`, :func:`restore`). :class:`TrialIsolation` is both, as the one
context manager a trial runs in.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator, Mapping
from typing import Any

from ablate.trials.seeding import PostImportHook, clear_import_hooks


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


#: torch's own state at import, for a trial that imported torch itself (no earlier state to restore).
_TORCH_DEFAULTS = {"torch default dtype": "torch.float32", "torch grad mode": True,
                   "torch deterministic algorithms": (False, False), "cudnn.deterministic": False,
                   "cudnn.benchmark": False, "torch anomaly mode": False}
#: numpy's error settings as its import leaves them (a trial that imported numpy started from these).
_NUMPY_DEFAULTS = {"numpy error settings": {"divide": "warn", "over": "warn", "under": "ignore", "invalid": "warn"}}
#: Signals whose handlers an inline trial's task may replace (SIGINT is ablate's own while a trial runs).
_SIGNALS = ("SIGTERM", "SIGHUP", "SIGUSR1", "SIGUSR2", "SIGALRM")


#: numpy's and torch's state the moment the running inline trial first imported them, before its task could change
#: it (:func:`snapshot` watches for their import; :func:`restore` puts it back and forgets it).
_AT_IMPORT: dict[str, Any] = {}
_CAPTURE = PostImportHook()


def _numpy_state(np: Any) -> dict[str, Any]:
    return {"numpy error settings": np.geterr(), "numpy print options": np.get_printoptions()}


def _watch_imports() -> None:
    """Note numpy's and torch's state when they are first imported (a trial that imports them itself)."""
    for name, state in (("numpy", _numpy_state), ("torch", _torch_state)):
        if name not in sys.modules and name not in _CAPTURE.callbacks and not any(
                k.startswith(name) for k in _AT_IMPORT):
            _CAPTURE.add(name, lambda module, _state=state: _AT_IMPORT.update(_state(module)))


def _torch_state(torch: Any) -> dict[str, Any]:
    return {"torch default dtype": str(torch.get_default_dtype()), "torch grad mode": torch.is_grad_enabled(),
            "torch deterministic algorithms": (torch.are_deterministic_algorithms_enabled(),
                                               torch.is_deterministic_algorithms_warn_only_enabled()),
            "cudnn.deterministic": bool(torch.backends.cudnn.deterministic),
            "cudnn.benchmark": bool(torch.backends.cudnn.benchmark), "torch threads": torch.get_num_threads(),
            "torch anomaly mode": bool(torch.is_anomaly_enabled())}


def _torch_state_keys() -> tuple[str, ...]:
    return (*_TORCH_DEFAULTS, "torch threads")


def _set_torch(torch: Any, key: str, value: Any) -> None:
    if key == "torch default dtype":
        torch.set_default_dtype(getattr(torch, value.removeprefix("torch.")))
    elif key == "torch grad mode":
        torch.set_grad_enabled(value)
    elif key == "torch deterministic algorithms":
        torch.use_deterministic_algorithms(value[0], warn_only=value[1])
    elif key == "cudnn.deterministic":
        torch.backends.cudnn.deterministic = value
    elif key == "cudnn.benchmark":
        torch.backends.cudnn.benchmark = value
    elif key == "torch threads":
        torch.set_num_threads(value)
    elif key == "torch anomaly mode":
        torch.autograd.set_detect_anomaly(value)


def snapshot() -> dict[str, Any]:
    """The process-global state an inline trial can change (see :func:`restore`)."""
    mask = os.umask(0o077)  # read by setting: put back at once
    os.umask(mask)
    state: dict[str, Any] = {"os.environ": dict(os.environ), "working directory": os.getcwd(),
                             "sys.path": list(sys.path), "umask": mask, "recursion limit": sys.getrecursionlimit(),
                             "signal handlers": {n: signal.getsignal(getattr(signal, n)) for n in _SIGNALS
                                                 if hasattr(signal, n)}}
    np = sys.modules.get("numpy")
    if np is not None:
        state.update(_numpy_state(np))
    torch = sys.modules.get("torch")
    if torch is not None:
        state.update(_torch_state(torch))
    _watch_imports()
    return state


def within(path: str, root: str) -> bool:
    """True when ``path`` is ``root`` or below it (a sibling sharing its prefix, ``/sw/code2`` beside
    ``/sw/code``, is not); both as given, no symlink resolved."""
    root = root.rstrip(os.sep) or os.sep
    return path == root or path.startswith(root if root == os.sep else root + os.sep)


def restore(before: dict[str, Any], baseline: dict[str, Any] | None = None, own_root: str | None = None) -> list[str]:
    """Put back what an inline trial changed of the state :func:`snapshot` took (``before``), and name
    each change the task made: what differs from ``baseline`` (the state just before the task ran, after
    ablate's own seeding and thread settings; default ``before``).

    Restored: ``os.environ``, the working directory, ``sys.path``, the umask, the recursion limit, the
    handlers of SIGTERM, SIGHUP, SIGUSR1, SIGUSR2 and SIGALRM (from the main thread), numpy's error settings
    and print options, torch's default dtype, grad mode, deterministic-algorithms setting,
    ``cudnn.deterministic``, ``cudnn.benchmark``, thread count and anomaly mode (when the trial imported numpy
    or torch itself: their state the moment it imported them, which :func:`snapshot` watched for). Not torch's float32
    matmul precision and TF32 switches: once a task mixes their legacy and new APIs, torch refuses to read
    them. ``sys.path`` entries below ``own_root`` (the sweep dir: ablate put its code snapshot there) are
    removed without being named. Returns one line per change the task made (empty: none).
    """
    base = before if baseline is None else baseline
    now = snapshot()
    _CAPTURE.clear()
    at_import = {**_TORCH_DEFAULTS, **_NUMPY_DEFAULTS, **_AT_IMPORT}
    _AT_IMPORT.clear()
    if "torch default dtype" in now:  # torch imported by the trial itself: it started from its state at import
        before = {**{k: v for k, v in at_import.items() if k in _torch_state_keys()}, **before}
        base = {**{k: v for k, v in at_import.items() if k in _torch_state_keys()}, **base}
    if "numpy error settings" in now:  # numpy alike
        before = {**{k: v for k, v in at_import.items() if k.startswith("numpy")}, **before}
        base = {**{k: v for k, v in at_import.items() if k.startswith("numpy")}, **base}
    changed: list[str] = []
    def theirs(paths: list[str]) -> list[str]:  # sys.path without ablate's own entries (the code snapshot)
        return [p for p in paths if own_root is None or not within(p, own_root)]

    for key, value in now.items():
        old = base.get(key)
        if key == "sys.path":
            old, value = theirs(base[key]), theirs(value)
        if key in base and old != value:
            changed.append(_describe(key, old, value))
    if now["os.environ"] != before["os.environ"]:
        set_environ(before["os.environ"])
    if now["working directory"] != before["working directory"]:
        os.chdir(before["working directory"])
    if now["sys.path"] != before["sys.path"]:
        sys.path[:] = before["sys.path"]
    if "umask" in before and now["umask"] != before["umask"]:
        os.umask(before["umask"])
    if "recursion limit" in before and now["recursion limit"] != before["recursion limit"]:
        sys.setrecursionlimit(before["recursion limit"])
    if threading.current_thread() is threading.main_thread():  # only the main thread may set a handler
        for name, handler in (before.get("signal handlers") or {}).items():
            if handler is not None and now["signal handlers"].get(name) is not handler:
                signal.signal(getattr(signal, name), handler)
    np = sys.modules.get("numpy")
    if np is not None:
        if "numpy error settings" in before and now["numpy error settings"] != before["numpy error settings"]:
            np.seterr(**before["numpy error settings"])
        if "numpy print options" in before and now["numpy print options"] != before["numpy print options"]:
            np.set_printoptions(**before["numpy print options"])
    torch = sys.modules.get("torch")
    if torch is not None:
        for key in _torch_state(torch):
            if key in before and now[key] != before[key]:
                _set_torch(torch, key, before[key])
    return changed


class TrialIsolation:
    """One trial's isolation from the process it runs in: a context manager, entered once per trial.

    In-process (``launcher=inline``, ``active``): on entry, the process-global state is noted
    (:func:`snapshot`) and the task's exits are contained (:func:`contained`); :meth:`task_starts` notes
    the state again just before the task runs (after ablate's own seeding and thread settings), so that
    :meth:`restore` puts the state back and names only what the task itself changed. The trial calls
    :meth:`restore` before it writes its result (the lines go into it); on exit, whatever was not restored
    yet (no result was written: a Ctrl-C) is restored all the same, the exits are no longer contained and
    the trial's pending seed-on-import hooks are dropped. Not active (the trial has its own process): it
    changes nothing, and its guard never sees a Ctrl-C.

    Parameters
    ----------
    active : bool
        True when the trial runs inside the orchestrating process.
    own_root : str, optional
        The sweep dir: ``sys.path`` entries below it are ablate's own (its code snapshot), removed without
        being named (:func:`restore`).

    Attributes
    ----------
    guard : Guard
        ``guard.user_interrupt`` is True once a real SIGINT reached this process during the trial.
    """

    def __init__(self, active: bool, own_root: str | None = None) -> None:
        self.active = active
        self.own_root = own_root
        self.guard = Guard()
        self._before: dict[str, Any] | None = None
        self._baseline: dict[str, Any] | None = None
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> TrialIsolation:
        if self.active:
            self._before = snapshot()
            self.guard = self._stack.enter_context(contained())
        return self

    def task_starts(self) -> None:
        """Note the state just before the task runs: what differs from it at the end, the task changed."""
        if self._before is not None:
            self._baseline = snapshot()

    def restore(self) -> list[str]:
        """Put back the process-global state the trial changed (once; later calls do nothing).

        Returns
        -------
        list of str
            One line per change the task made (:func:`restore`); empty when not active or already restored.
        """
        if self._before is None:
            return []
        before, self._before = self._before, None
        return restore(before, self._baseline, own_root=self.own_root)

    def __exit__(self, *exc_info: object) -> None:
        try:
            self.restore()  # no result was written (a Ctrl-C): restore all the same
        finally:
            self._stack.close()
            if self.active:
                clear_import_hooks()


def set_environ(want: Mapping[str, str]) -> None:
    """Make ``os.environ`` hold exactly ``want``, changing only the variables that differ (clearing and refilling
    it set each of its ~90 variables again, twice per inline trial)."""
    for key in [k for k in os.environ if k not in want]:
        del os.environ[key]
    for key, value in want.items():
        if os.environ.get(key) != value:
            os.environ[key] = value


def _describe(key: str, old: Any, new: Any) -> str:
    if key == "os.environ":
        keys = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
        return f"os.environ ({', '.join(keys[:5])}{' ...' if len(keys) > 5 else ''})"
    if key == "sys.path":
        added = [p for p in new if p not in old]
        return f"sys.path ({'added ' + ', '.join(added[:3]) if added else 'reordered or shortened'})"
    if key == "signal handlers":
        names = sorted(n for n in set(old) | set(new) if old.get(n) is not new.get(n))
        return f"signal handlers ({', '.join(names)})"
    if key == "umask":
        return f"umask ({old:04o} -> {new:04o})"
    if key == "numpy print options":
        return f"numpy print options ({ {k: v for k, v in new.items() if old.get(k) != v} })"
    return f"{key} ({old} -> {new})"
