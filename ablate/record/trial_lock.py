"""No trial process of a sweep dir runs while ablate decides which trials to run again.

A killed ablate process (SIGKILL, a lost SSH session) takes its trials with it: each asks the kernel to die
with its parent (``PR_SET_PDEATHSIG``). But that death is asynchronous, and a warm trial dies only after
its warm parent has: on a loaded machine a trial near its end can outlive the orchestrator by a second or
more, and write its ``result.json`` after ``ablate resume`` has moved its outputs aside and started the same
trial again (measured on CI: a trial's attempt-1 record over the re-run's dir, its outputs split across
``attempts/1/`` and the trial dir).

So every trial process holds a shared ``flock`` on the sweep dir's ``.trials.lock`` while it runs
(:func:`hold`, from before its manifest until its record is written; an inline trial, which runs in the
orchestrator's own process, needs none), and the orchestrator takes the
same lock exclusively while it reads the trial dirs and moves interrupted attempts aside (:func:`quiet`):

- a trial process still running when a resume starts is waited for (it is dying, or it finishes and its
  record counts: it ran in full from the pinned code); one still there after :data:`STRAY_WAIT_S` stops
  the resume with its pid and the command that ends it;
- a trial process started while the orchestrator holds the lock exclusively belongs to no live
  orchestrator (the one holding it launches only after releasing it): it records nothing and exits
  (:class:`StrayTrial`).

The kernel drops a ``flock`` when the last process holding its open file ends (SIGKILL included), so a
dead trial never blocks a resume. Reference: flock(2); proc(5), ``/proc/locks``.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from ablate.errors import SweepDirError
from ablate.record.sweepdir import DEFAULT_FILE_MODE, open_nofollow, os_error

#: The lock file in the sweep dir's root.
TRIALS_LOCK = ".trials.lock"
#: Longest wait, in seconds, for trial processes of an earlier ablate process to end before a resume.
STRAY_WAIT_S = 60.0
#: Seconds of waiting before the wait is reported (a dying trial usually ends well within it).
TELL_AFTER_S = 1.0

_BUSY = (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK)


class StrayTrial(Exception):
    """Raised in a trial process that started while its sweep dir's orchestrator decides what to run (its own
    orchestrator is gone): the trial records nothing and exits."""


def _open(root: Path) -> int:
    return open_nofollow(root / TRIALS_LOCK, os.O_RDWR | os.O_CREAT, DEFAULT_FILE_MODE)


def _try(fd: int, how: int, path: Path) -> bool:
    try:
        fcntl.flock(fd, how | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in _BUSY:
            return False
        raise os_error(exc, path, "lock") from exc
    return True


@contextlib.contextmanager
def hold(root: str | os.PathLike[str]) -> Iterator[None]:
    """In a trial process: hold the sweep dir's trial lock, shared, for the duration of the block.

    Raises
    ------
    StrayTrial
        When the orchestrator holds it exclusively (:func:`quiet`): this trial belongs to an ablate process
        that is gone.
    SweepDirError
        When the lock file cannot be opened or locked (a symlink planted there, permissions).
    """
    path = Path(root) / TRIALS_LOCK
    fd = _open(Path(root))
    try:
        if not _try(fd, fcntl.LOCK_SH, path):
            raise StrayTrial(f"the ablate process that started this trial is gone and another one is deciding "
                             f"which trials of {root} to run: this trial exits without running")
        yield
    finally:
        os.close(fd)


def holders(root: str | os.PathLike[str]) -> list[int]:
    """Pids holding a ``flock`` on the sweep dir's trial lock, from ``/proc/locks`` (empty where there is none)."""
    try:
        ino = os.stat(Path(root) / TRIALS_LOCK, follow_symlinks=False).st_ino
        with open("/proc/locks", encoding="ascii", errors="replace") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return []
    pids = []
    for line in lines:
        f = line.split()
        if len(f) >= 6 and f[1] == "FLOCK" and f[-3].endswith(f":{ino}") and f[-4].isdigit():
            pids.append(int(f[-4]))
    return sorted(set(pids))


@contextlib.contextmanager
def quiet(root: str | os.PathLike[str], *, wait_s: float = STRAY_WAIT_S,
          log: Callable[[str], None] | None = None) -> Iterator[None]:
    """In the orchestrator (holding the sweep dir's lock): wait until no trial process of the sweep dir runs, then
    hold the trial lock exclusively for the block (trials started meanwhile exit: :class:`StrayTrial`).

    Parameters
    ----------
    wait_s : float
        Longest wait, in seconds, for running trial processes to end.
    log : callable, optional
        Told once, after :data:`TELL_AFTER_S` s, which processes are waited for.

    Raises
    ------
    SweepDirError
        When trial processes still run after ``wait_s`` seconds: their pids, and the command that ends them.
    """
    path = Path(root) / TRIALS_LOCK
    fd = _open(Path(root))
    try:
        t0 = time.monotonic()
        told = False
        while not _try(fd, fcntl.LOCK_EX, path):
            waited = time.monotonic() - t0
            if not told and waited >= TELL_AFTER_S and log is not None:
                pids = holders(root)
                log(f"ablate: waiting for {len(pids) or 'some'} trial process(es) of {root} started by an ablate "
                    f"process that is gone to end (pid {', '.join(map(str, pids)) or '?'}); they die with it")
                told = True
            if waited >= wait_s:
                pids = holders(root)
                listed = " ".join(map(str, pids)) or "PID"
                raise SweepDirError(
                    f"trial processes started by an earlier ablate process still run in {root} after "
                    f"{wait_s:.0f} s (pid {', '.join(map(str, pids)) or 'unknown: see /proc/locks'}), so which "
                    "trials to run again cannot be decided yet", where=str(path),
                    fix=f"let them finish, or end them (`kill {listed}`), then run the command again; "
                    "finished trials are kept")
            time.sleep(0.05)
        yield
    finally:
        os.close(fd)
