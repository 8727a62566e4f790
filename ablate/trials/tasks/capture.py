"""An ``fn`` trial's printed output in its own ``stdout.log`` / ``stderr.log``, under every launcher.

A function task runs in the trial's process, so what it prints goes wherever that process's fds 1 and 2
go: under ``launcher=local`` (fresh or warm) they are already the trial's logs; under ``launcher=inline``
they are ablate's terminal, and in a SLURM job the job's log (shared by a packed job's trials). When an
``fn`` task reads its metric from printed lines (``task.metric_pattern``, or ``metric_source: stdout``
/ ``stderr``), :func:`trial_output` makes sure those lines land in the trial's logs: where fd 1 (2) is
not the trial's log already, it is pointed at a pipe whose reader thread writes every byte both to
the trial's log and to where the fd went before (the terminal still shows it).

Covered: Python's ``print``/``sys.stdout``/``sys.stderr`` (when they write to fds 1 and 2, as they do
outside a notebook), C-level writes to fds 1/2 (C stdio buffers are flushed at the end), and the
subprocesses the task starts (they inherit the fds). Not covered: a ``sys.stdout`` replaced by an object
that writes elsewhere (a notebook kernel's stream), and output written after the task returned by a
process it left running.
"""

from __future__ import annotations

import contextlib
import os
import select
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ablate.record.sweepdir import open_log


@dataclass
class Captured:
    """Where this trial's output starts in its logs (byte offsets), and how it got there."""

    stdout_start: int = 0
    stderr_start: int = 0
    teed: list[str] = field(default_factory=list)  # the streams this process teed (not already the trial's log)


def _flush_all() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    with contextlib.suppress(Exception):  # C stdio buffers (a C extension's printf)
        import ctypes  # noqa: PLC0415  # lazy: only when capturing

        ctypes.CDLL(None).fflush(None)


def _is_file(fd: int, path: Path) -> bool:
    try:
        a, b = os.fstat(fd), os.stat(path)
    except OSError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _pump(read_fd: int, log_fd: int, out_fd: int, stop: threading.Event) -> None:
    """Copy the pipe to the log and to the fd's old destination until the pipe is drained after ``stop``."""
    while True:
        ready, _, _ = select.select([read_fd], [], [], 0.05)
        if not ready:
            if stop.is_set():
                return
            continue
        try:
            chunk = os.read(read_fd, 65536)
        except OSError:
            return
        if not chunk:
            return
        os.write(log_fd, chunk)
        with contextlib.suppress(OSError):  # the terminal went away: the log still gets it
            os.write(out_fd, chunk)


@contextlib.contextmanager
def trial_output(stdout_log: Path, stderr_log: Path) -> Iterator[Captured]:
    """Run the block with fds 1 and 2 reaching the trial's ``stdout.log`` / ``stderr.log`` (see the module).

    Yields
    ------
    Captured
        The offsets at which this run's output starts in each log (read the lines from there).
    """
    _flush_all()
    cap = Captured()
    undo: list[tuple[int, int, int, int, threading.Thread, threading.Event]] = []
    try:
        for fd, path, name in ((1, stdout_log, "stdout"), (2, stderr_log, "stderr")):
            if _is_file(fd, path):  # launcher=local: the trial's own log already
                setattr(cap, f"{name}_start", os.fstat(fd).st_size)
                continue
            log_fd = open_log(path)
            setattr(cap, f"{name}_start", os.fstat(log_fd).st_size)
            saved = os.dup(fd)
            r, w = os.pipe()
            os.dup2(w, fd)
            os.close(w)
            stop = threading.Event()
            t = threading.Thread(target=_pump, args=(r, log_fd, saved, stop), daemon=True,
                                 name=f"ablate-tee-{name}")
            t.start()
            undo.append((fd, saved, r, log_fd, t, stop))
            cap.teed.append(name)
        yield cap
    finally:
        _flush_all()
        for fd, saved, r, log_fd, t, stop in reversed(undo):
            os.dup2(saved, fd)  # our end of the pipe closes; a process the task left may still hold one
            stop.set()
            t.join(timeout=5)
            for x in (saved, r, log_fd):
                with contextlib.suppress(OSError):
                    os.close(x)
