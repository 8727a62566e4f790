"""A trial's whole process tree ends with the trial (Linux: a child subreaper plus ``/proc``).

A task may start processes that leave its process group and session (``setsid``) and outlive their
parent; the kernel then reparents them to init, out of reach of a process-group kill. The trial's
process makes itself a *child subreaper* (``prctl(PR_SET_CHILD_SUBREAPER)``, Linux >= 3.4), so every
such orphan below it is reparented to it instead, and the whole tree stays visible as its descendants
in ``/proc``. When the task has returned, and when the trial is stopped (timeout, Ctrl-C), those
descendants are killed with SIGKILL and reaped. A process is identified by (pid, start time), so a
recycled pid is never signalled. Elsewhere (no ``/proc``, no prctl) these functions do nothing.

Reference: prctl(2), ``PR_SET_CHILD_SUBREAPER``; proc(5), ``/proc/[pid]/stat`` fields 4 (ppid) and 22
(starttime).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from typing import Any

PR_SET_CHILD_SUBREAPER = 36
#: A process: (pid, start time in clock ticks since boot).
Proc = tuple[int, int]


_LIBC: list[Any] = []


def libc() -> Any:
    """The C library (``ctypes``), opened once per process: the forks of a warm parent find it open (opening it
    costs each ~0.2 ms of CPU).

    Raises
    ------
    OSError
        When it cannot be opened.
    """
    if not _LIBC:
        import ctypes  # noqa: PLC0415  # lazy: ctypes once, on the first prctl call

        _LIBC.append(ctypes.CDLL(None, use_errno=True))
    return _LIBC[0]


def become_subreaper() -> bool:
    """Make this process the reaper of its orphaned descendants; True when the kernel agreed."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        return libc().prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _stat(pid: int) -> tuple[int, int, str] | None:
    """(ppid, start time, state) of ``pid`` from /proc, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read().decode(errors="replace")
    except OSError:
        return None
    fields = raw[raw.rfind(")") + 2:].split()  # the command name may hold spaces and parentheses
    return int(fields[1]), int(fields[19]), fields[0]


def _children(pid: int) -> list[int] | None:
    """The direct children of ``pid`` from ``/proc/<pid>/task/<tid>/children`` (every thread's), or None
    when the kernel does not offer that file (then the whole of ``/proc`` is scanned)."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return [] if os.path.isdir("/proc/self/task") else None
    out: list[int] = []
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as fh:
                out += [int(c) for c in fh.read().split()]
        except FileNotFoundError:
            if not os.path.exists(f"/proc/{pid}/task/{tid}"):
                continue  # the thread ended
            return None  # no children file (a kernel without CONFIG_PROC_CHILDREN)
        except OSError:
            continue
    return out


# Hand-made, not psutil: the same pids as psutil.Process(pid).children(recursive=True), 30-60x faster (it scans
# every process's stat; this reads the tree's own children files). docs/design-notes.md, "A trial's process tree".
def descendants(pid: int) -> list[Proc]:
    """Every live (non-zombie) process below ``pid``, as (pid, start time), parents before children.

    Walks the ``children`` files of the tree (a few reads for a trial with no processes of its own), else
    scans every process in ``/proc``.

    Parameters
    ----------
    pid : int
        The root of the tree (not included).
    """
    out: list[Proc] = []
    todo = [pid]
    seen = {pid}
    while todo:
        kids = _children(todo.pop(0))
        if kids is None:
            return _descendants_by_scan(pid)
        for child in kids:
            if child in seen:
                continue
            seen.add(child)
            st = _stat(child)
            if st is None:
                continue
            if st[2] != "Z":
                out.append((child, st[1]))
            todo.append(child)
    return out


def _descendants_by_scan(pid: int) -> list[Proc]:
    """:func:`descendants` from every ``/proc/<pid>/stat`` (where there are no ``children`` files)."""
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return []
    children: dict[int, list[tuple[int, int, str]]] = {}
    for p in pids:
        st = _stat(p)
        if st is not None:
            children.setdefault(st[0], []).append((p, st[1], st[2]))
    out: list[Proc] = []
    todo = [pid]
    while todo:
        for child, start, state in children.get(todo.pop(), []):
            if state != "Z":
                out.append((child, start))
            todo.append(child)
    return out


def kill(procs: list[Proc], sig: int = signal.SIGKILL) -> list[Proc]:
    """Send ``sig`` to each process still alive with the same start time; returns those signalled."""
    hit = []
    for pid, start in procs:
        st = _stat(pid)
        if st is None or st[1] != start:
            continue  # gone, or the pid now names another process
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)
            hit.append((pid, start))
    return hit


def kill_group(pgid: int | None) -> None:
    """SIGKILL every process in the process group ``pgid`` at once (a group already gone, or not ours: nothing).

    What is left of a trial's group after the trial exited (an ``os._exit`` skipped its own cleanup), or a
    child that must stop now. Processes that left the group (``setsid``) are not reached: :func:`end_tree`
    ends a running trial with those, :func:`kill_descendants` a process's own subtree.
    """
    if pgid is not None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)


def end_tree(proc: Any, grace_s: float = 5.0) -> None:
    """End a running trial's whole process tree (``proc``: a Popen, or a warm parent's fork with its ``poll``,
    ``wait`` and ``pid``), the trial leading its own process group.

    SIGTERM to its process group (the trial, a subreaper, then kills every descendant itself), SIGKILL after
    ``grace_s`` seconds; processes that left the group (``setsid``) are found below the trial in ``/proc``
    (before it dies and its orphans go to init) and killed too. A trial already ended: nothing happens.
    """
    if proc.poll() is not None or proc.pid is None:
        return
    tree = descendants(proc.pid)  # before the trial dies and its orphans go to init
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:  # no group yet: a fork stopped before its own setsid (it has started nothing)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(proc.pid, signal.SIGKILL)  # unreaped, so the pid is still this trial's
        proc.wait()
        return
    except PermissionError:
        return
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        tree += descendants(proc.pid)
        kill_group(proc.pid)  # the trial first: killing its children first could let it exit on its own (0)
        kill(tree)
        proc.wait()
    kill(tree)  # any that escaped before the trial could end them


def kill_descendants(pid: int | None = None, *, rounds: int = 20) -> int:
    """SIGKILL every descendant of ``pid`` (default: this process) until none is left; reap this
    process's own dead children among them. Returns how many processes were killed.

    Repeated because a process may fork between the listing and the kill; its children are then
    found (reparented to the subreaper) on the next round.
    """
    pid = os.getpid() if pid is None else pid
    done: set[Proc] = set()
    for _ in range(rounds):
        hit = kill([p for p in descendants(pid) if p not in done])
        if not hit:
            break
        done.update(hit)
        if pid == os.getpid():
            reap(p for p, _ in hit)
        time.sleep(0.005)  # let the kernel finish the kills before listing again
    return len(done)


def reap(pids: object) -> None:
    """Collect the exit status of those of ``pids`` that are this process's children (no zombies)."""
    for p in pids:  # type: ignore[attr-defined]
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(p, 0)


#: Environment variable through which the local launcher tells a trial its parent's pid.
PARENT_ENV = "ABLATE_PARENT_PID"


def die_with_parent() -> None:
    """In a trial child: ask the kernel to SIGKILL us when the ablate process dies (Linux), and exit
    at once if it is already gone. No-op elsewhere or when not started by this launcher."""
    want = os.environ.get(PARENT_ENV)
    if not want or not sys.platform.startswith("linux"):
        return
    try:
        libc().prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG (a warm parent's forks find libc open)
    except (OSError, AttributeError):
        return
    if str(os.getppid()) != want:
        os._exit(1)


def own_process_tree() -> None:
    """Make this trial process the reaper of every orphan below it, and end its whole tree when it is
    stopped (SIGTERM: the launcher's timeout or Ctrl-C), so no process of the task outlives the trial."""
    if not become_subreaper():
        return

    def on_term(signum: int, frame: Any) -> None:
        kill_descendants()
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    signal.signal(signal.SIGTERM, on_term)
