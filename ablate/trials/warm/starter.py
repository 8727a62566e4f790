"""The starter's side of warm trial processes (``launcher.warm=true``).

:class:`WarmParent` starts one :mod:`ablate.trials.warm.parent` process (per launch of ``launcher=local``;
per start of a packed SLURM job, :mod:`ablate.trials.launchers.slurm.pack_job`), refuses when forking
from it would be unsafe (CUDA initialised, a thread pool started while importing the task), and
hands out trial handles that behave like the cold path's ``subprocess.Popen``: a pid that leads its
own process group, a wait with a timeout, a return code (negative: killed by that signal).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import IO, Any

from ablate.errors import ConfigError, UserError
from ablate.record.sweepdir import open_log
from ablate.trials import proctree
from ablate.trials.warm import hazards


class WarmTrial:
    """One trial forked by the warm parent: ``pid`` (its own process group), :meth:`wait`, ``returncode``."""

    def __init__(self) -> None:
        self.pid: int | None = None
        self.returncode: int | None = None
        self._started = threading.Event()
        self._ended = threading.Event()

    def wait(self, timeout: float | None = None) -> int | None:
        """Block until the trial ends (return its code) or ``timeout`` seconds pass.

        Raises
        ------
        subprocess.TimeoutExpired
            When it is still running after ``timeout`` seconds (as ``Popen.wait``).
        """
        if not self._ended.wait(timeout):
            raise subprocess.TimeoutExpired(f"trial pid {self.pid}", timeout or 0)
        return self.returncode

    def poll(self) -> int | None:
        """The return code when the trial has ended, else None."""
        return self.returncode if self._ended.is_set() else None

    @property
    def forked(self) -> bool:
        """True once the warm parent reported the trial's pid: a process was made for it. False for a
        trial whose warm parent died (or was gone) before it forked it: it never ran."""
        return self.pid is not None


class WarmParent:
    """A warm parent for the trials of one sweep dir.

    Parameters
    ----------
    sweep_root : str
        The sweep dir (its ``ablation.yaml`` names the task to import).
    cwd : str
        Working directory of the warm parent and so of every trial (the project root).
    env : dict
        Its environment (fixed ``PYTHONHASHSEED`` included); each trial adds its own on top.
    log : path-like or None
        Where the warm parent's own output goes (what the task module prints at import); None: this
        process's stdout and stderr, which the trials then share (a packed SLURM job's logs).
    entry : str
        The module each fork runs (``main(argv)``): one of :data:`ablate.trials.warm.parent.ENTRIES`.
    preexec_fn : callable, optional
        Run in the warm parent before it starts (signal dispositions set there, ``SIG_IGN`` included,
        reach every fork).
    preload : sequence of str
        Modules it imports after the task (``launcher.preload``), checked like the task's imports.
    meanwhile : callable, optional
        Run in this process after the warm parent is started, before waiting for its ready report (the
        orchestrator's own imports, on the core the warm parent leaves free).
    until_ready : iterable, optional
        Small steps of work (each ``next`` does one and yields anything but None) taken after ``meanwhile``,
        one at a time, only while the warm parent has not yet reported ready: what is left when it has is
        dropped (each trial does its own part itself). The trials' working dirs, built meanwhile
        (:func:`ablate.trials.workdir.trial_workdir`).
    learn : bool
        True (``launcher.learn_imports``, the default): after each trial it also imports what that trial
        imported and it had not, when a probe finds that safe (:class:`ablate.trials.warm.parent.Learner`).
    early : EarlyParent, optional
        A warm parent started before the sweep dir existed (:mod:`ablate.trials.warm.early`), to hand the
        sweep dir to instead of starting one (``env`` is then its own). Should it not report ready (an early
        import it refused, or any other failure), it is ended and one is started here, which reports as usual.

    Raises
    ------
    UserError
        When the task cannot be forked safely: CUDA was initialised or a thread pool started while
        the task module was imported (the fix names ``launcher.warm=false``), a ``launcher.preload``
        module cannot be imported, or the warm parent died.
    """

    def __init__(self, sweep_root: str, cwd: str, env: Mapping[str, str], log: str | None,
                 entry: str = "ablate.trials.trial", preexec_fn: Callable[[], None] | None = None,
                 preload: Sequence[str] = (), learn: bool = True, meanwhile: Callable[[], None] | None = None,
                 early: Any = None, until_ready: Iterable[Any] = ()) -> None:
        def fresh() -> subprocess.Popen[bytes]:
            return _start(sweep_root, cwd, env, log, entry, preexec_fn, preload, learn)

        proc = None
        if early is not None and log is not None and preexec_fn is None:
            proc = early.hand_over(sweep_root, log, entry, preload, learn)
        self._proc = proc or fresh()
        self.log = log or "the job's stderr"
        self._log_file = log
        self.env = dict(env)
        #: How the warm parent died, once it has (None while it serves forks): see :meth:`death_note`.
        self.death: str | None = None
        self._closing = False
        self._lock = threading.Lock()
        self._next_id = 0
        self._trials: dict[int, WarmTrial] = {}
        assert self._proc.stdout is not None and self._proc.stdin is not None
        self._out: IO[bytes] = self._proc.stdout
        self._in: IO[bytes] = self._proc.stdin
        try:
            if meanwhile is not None:
                meanwhile()
            steps = iter(until_ready)
            while not select.select([self._out], [], [], 0)[0] and next(steps, None) is not None:
                pass  # nothing read from the pipe yet, so nothing is buffered: select sees what it holds
        except BaseException:  # a Ctrl-C meanwhile: the warm parent ends with it
            self.close()
            raise
        msg = self._ready_line()
        if msg.get("ready") is None and proc is not None:  # the early one did not get there: start one afresh
            self.close()
            self._closing = False
            self._proc = fresh()
            assert self._proc.stdout is not None and self._proc.stdin is not None
            self._out, self._in = self._proc.stdout, self._proc.stdin
            msg = self._ready_line()
        self.report: dict[str, Any] | None = msg.get("ready")
        if self.report is None:
            self.close()
            raise UserError(f"the warm parent could not start: {msg.get('error')}; see {self.log}",
                            where="launcher.warm", fix="fix the error, or run each trial in a fresh process "
                            "with `launcher.warm=false`")
        bad = self.report.get("preload_errors") or {}
        if bad:
            name = next(iter(bad))
            self.close()
            raise UserError(f"the warm parent cannot import {name!r} ({bad[name]})", where="launcher.preload",
                            fix="name modules importable in the trials' environment (e.g. "
                            "`launcher.preload=[torch._dynamo]`), or drop it")
        #: Apps whose trials start a fresh ``python <app>`` although warm: script -> why (said once, here).
        self.app_fallback: dict[str, str] = dict(self.report.get("app_fallback") or {})
        for app, why in self.app_fallback.items():
            print(f"ablate: launcher.warm: each trial of the app {app} starts a fresh `python {app}` process: the "
                  f"warm parent cannot hold it safely ({why})", file=sys.stderr, flush=True)
        problem = unsafe_reason(self.report)
        if problem:
            self.close()
            raise UserError(problem, where="launcher.warm", fix=unsafe_fix(self.report))
        self._reader = threading.Thread(target=self._read, name="ablate-warm-reader", daemon=True)
        self._reader.start()

    def _ready_line(self) -> dict[str, Any]:
        line = self._out.readline()
        return json.loads(line) if line.strip() else {"ready": None, "error": "it exited while importing the task"}

    @property
    def pid(self) -> int:
        """The warm parent's pid (each trial's parent)."""
        return self._proc.pid

    def start(self, argv: Sequence[str], env: Mapping[str, str], threads: int, stdout: str | None = None,
              stderr: str | None = None, reseed: bool = True) -> WarmTrial:
        """Fork one trial (``ENTRY.main(argv)`` in a fork) and return its handle once it has a pid.

        Parameters
        ----------
        argv : sequence of str
            The entry's arguments (``ablate.trials.trial``: ``SWEEP ARM SEED ATTEMPT``).
        env : mapping
            What the trial sets on top of the warm parent's environment (``PYTHONHASHSEED`` is not
            among what it can change: that was fixed when the warm parent started).
        threads : int
            Its CPU thread count (torch's and the OpenMP/BLAS pools', set after the fork).
        stdout, stderr : str, optional
            Its log files; None: the warm parent's own.
        reseed : bool
            True: the fork draws numpy's and torch's generators afresh from OS entropy, as a fresh interpreter
            would start; False when the trial seeds both from its own seed before any of its task runs (an ``fn``
            trial under ``determinism=seeded`` or ``strict``), so that draw would be replaced unused (about 1.6 ms
            of CPU a trial: torch records the caller's stack for its lazy CUDA seeding).
        """
        handle = WarmTrial()
        with self._lock:
            rid = self._next_id
            self._next_id += 1
            self._trials[rid] = handle
            req = {"id": rid, "argv": [str(a) for a in argv], "env": dict(env), "stdout": stdout, "stderr": stderr,
                   "threads": int(threads), "reseed": bool(reseed)}
            try:
                self._in.write((json.dumps(req) + "\n").encode())
                self._in.flush()
            except (BrokenPipeError, OSError):
                handle.returncode = None
                handle._started.set()
                handle._ended.set()
                return handle
        while not handle._started.wait(1.0):  # the reader ends every handle when the parent's pipe closes ...
            if not self._reader.is_alive():  # ... and one asked for after that is never forked
                with self._lock:
                    self._trials.pop(rid, None)
                handle._started.set()
                handle._ended.set()
        return handle

    def _read(self) -> None:
        for line in self._out:
            msg = json.loads(line)
            with self._lock:
                handle = self._trials.get(msg.get("id"))
            if handle is None:
                continue
            if "pid" in msg:
                handle.pid = int(msg["pid"])
                handle._started.set()
            if "exit" in msg:
                handle.returncode = int(msg["exit"])
                handle._ended.set()
                with self._lock:
                    self._trials.pop(msg["id"], None)
        if not self._closing:
            self.death = self._how_it_died()
        with self._lock:  # the warm parent is gone: whatever it ran is gone with it
            left = list(self._trials.values())
            self._trials.clear()
        for handle in left:
            handle._started.set()
            handle._ended.set()

    def _how_it_died(self) -> str:
        """``killed by SIGKILL`` / ``exited with code N``: the warm parent's end, read once its pipe closed."""
        try:
            rc = self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:  # its pipe closed, yet it runs: it is of no use any more
            return "closed its pipe to ablate"
        if rc < 0:
            name = signal.Signals(-rc).name if -rc in signal.Signals._value2member_map_ else f"signal {-rc}"
            return f"killed by {name}" + (", often the out-of-memory killer" if -rc == signal.SIGKILL else "")
        return f"exited with code {rc}"

    def death_note(self) -> str:
        """One clause on the warm parent's death for a trial's record: its pid, how it died, and its log when
        that holds anything (a log it wrote nothing to is removed, so it is never named)."""
        note = f"the warm parent (pid {self.pid}) it was forked from died ({self.death or 'it is gone'})"
        try:
            wrote = self._log_file is not None and os.path.getsize(self._log_file) > 0
        except OSError:
            wrote = False
        return note + (f"; its output: {self._log_file}" if wrote else "")

    def close(self, timeout_s: float = 10.0) -> None:
        """End the warm parent (it kills any trial still running) and wait for it."""
        self._closing = True
        with contextlib.suppress(OSError):
            self._in.close()
        try:
            self._proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proctree.kill_group(self._proc.pid)
            self._proc.wait()
        if self._proc.stdout is not None:
            self._proc.stdout.close()


def _start(sweep_root: str, cwd: str, env: Mapping[str, str], log: str | None, entry: str,
           preexec_fn: Callable[[], None] | None, preload: Sequence[str], learn: bool) -> subprocess.Popen[bytes]:
    """Start ``python -m ablate.trials.warm.parent SWEEP_DIR ...`` (see :class:`WarmParent`)."""
    cmd = [sys.executable, "-m", "ablate.trials.warm.parent", sweep_root, "--entry", entry]
    if preload:
        cmd += ["--preload", *[str(m) for m in preload]]
    if not learn:
        cmd.append("--no-learn")
    out_fd = log_fd = None
    if log is None:
        out_fd = os.dup(1)  # fd 1 of the warm parent is the protocol: our stdout travels as another fd
        cmd += ["--stdout-fd", str(out_fd)]
    else:
        log_fd = open_log(log)  # never through a symlink planted in the sweep dir
    try:
        return subprocess.Popen(
            cmd, cwd=cwd, env=dict(env), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log_fd,
            start_new_session=True, pass_fds=() if out_fd is None else (out_fd,), preexec_fn=preexec_fn)
    finally:
        for fd in (out_fd, log_fd):
            if fd is not None:
                os.close(fd)


def unsafe_reason(report: Mapping[str, Any]) -> str | None:
    """Why forking trials from a warm parent in the state ``report`` describes is unsafe, or None.

    ``report`` is the warm parent's ready report (``cuda``, ``threads``, ``imported``, and what
    :class:`ablate.trials.warm.hazards.Watch` saw: each new thread and socket with where it came from),
    or the same fields after it imported what trials imported (``imported``: those modules).
    """
    task = ", ".join([*(report.get("imported") or []), *(report.get("preloaded") or [])]) or "the task module"
    if report.get("rng_drawn"):
        rngs = " and ".join(hazards.RNG_NAMES.get(n, n) for n in report["rng_drawn"])
        return (f"importing {task} drew random numbers from {rngs} in the warm parent every trial is forked from: "
                "every trial would share that one draw, made before any seed was set (a fresh process draws it "
                "after ablate seeds it from the trial's seed)")
    if report.get("cuda"):
        return (f"importing {task} initialised CUDA in the warm parent every trial is forked from, and a "
                "forked process cannot use CUDA")
    if report.get("trial_env_read"):
        names = ", ".join(f"${n}" for n in report["trial_env_read"])
        return (f"importing {task} read {names}, which each trial sets to its own value (its seed, its dirs): in "
                "the warm parent every trial is forked from it is unset, so every trial would keep that one read, "
                "where a fresh process reads its own")
    named = hazards.explain(report, task)
    if named is not None:
        return named[0]
    if int(report.get("threads") or 1) > 1:
        return (f"importing {task} started {int(report['threads']) - 1} thread(s) in the warm parent every trial "
                "is forked from (a thread pool, a logger, a prefetcher); a fork keeps only the forking "
                "thread, so a trial could hang on a lock one of them held")
    return None


def unsafe_fix(report: Mapping[str, Any]) -> str:
    """The cheapest fix for what :func:`unsafe_reason` found: a library setting, the import to move, or
    ``launcher.warm=false`` with what it costs."""
    if report.get("rng_drawn"):
        return ("draw them inside the task function (seeded there), or run each trial in a fresh process with "
                "`launcher.warm=false`")
    if report.get("trial_env_read") and not report.get("cuda"):
        return ("read it inside the task function (each trial sets it before the task runs), or run each trial in "
                "a fresh process with `launcher.warm=false`")
    named = None if report.get("cuda") else hazards.explain(report, "")
    if named is not None:
        return named[1]
    return ("do that work inside the task function instead of at import, or run each trial in a fresh process "
            "with `launcher.warm=false`")


def check_preload(preload: Any, learn: Any) -> tuple[list[str], bool]:
    """``launcher.preload`` (module names) and ``launcher.learn_imports`` (a bool), checked.

    Raises
    ------
    ConfigError
        A preload that is not a list of dotted module names, or a ``learn_imports`` that is not a bool.
    """
    if preload is None:
        preload = []
    if isinstance(preload, str) or not isinstance(preload, Sequence) or not all(
            isinstance(m, str) and m and all(p.isidentifier() for p in m.split(".")) for m in preload):
        raise ConfigError(f"must be a list of module names, got {preload!r}", where="launcher.preload",
                          fix="e.g. `launcher.preload=[torch._dynamo]`: the warm parent imports them once, "
                          "so no trial pays for them")
    if not isinstance(learn, bool):
        raise ConfigError(f"must be true or false, got {learn!r}", where="launcher.learn_imports",
                          fix="`launcher.learn_imports=false` keeps the warm parent to the task's own imports "
                          "and `launcher.preload`")
    return list(preload), learn
