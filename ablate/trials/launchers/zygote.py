"""The warm parent of trial processes (``launcher.warm=true``): imports the task once, forks each trial.

Used by ``launcher=local`` (one per launch, :class:`ablate.trials.launchers.warm.WarmParent`) and by a packed
SLURM job (``launcher=slurm``, ``trials_per_job=k``: one per job start, see
:mod:`ablate.trials.launchers.slurm_pack_job`). Started as
``python -m ablate.trials.launchers.zygote SWEEP_DIR [--entry MODULE] [--stdout-fd FD]``.
It imports what every trial would import (ablate's trial code, omegaconf, the task module from the
pinned code snapshot, and with it torch, plus the entry module), checks that forking is still safe, then
serves fork requests. Each trial is a fresh ``os.fork()`` of this process, which never runs a trial itself,
so nothing a trial does (module state it mutates, RNG draws, CUDA, threads) reaches the next one.

Protocol: JSON lines. This process writes one ``{"ready": REPORT}`` line, then reads requests
``{"id": N, "argv": [...], "env": {...}, "threads": T, "stdout": PATH, "stderr": PATH}`` from stdin
and answers ``{"id": N, "pid": P}`` once the trial is forked and ``{"id": N, "exit": CODE}`` when it has
ended (CODE as :attr:`subprocess.Popen.returncode`: negative for a signal). The fork runs
``ENTRY.main(argv)`` (the entry named at start: ``ablate.trials.trial`` by default); without ``stdout``/``stderr``
it keeps this process's fds 1 and 2 (``--stdout-fd`` names the fd its fd 1 is taken from; default its
stderr). End of stdin: kill what is left and exit.

Why not ``multiprocessing``'s forkserver: it is one server per Python process with a process-global
preload list (``set_forkserver_preload``) and environment, so two ablations in one process (the
Python API, the test suite) or a user's own forkserver (a ``DataLoader``) would share it; its preload
imports module names with the orchestrator's ``sys.path`` (the live tree), while a trial must import
the task from the pinned snapshot; and its ``PYTHONHASHSEED`` is whatever the orchestrator had. This
module is its serve loop (select on requests and a SIGCHLD wakeup fd) without those globals.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import signal
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ablate.pin import pins
from ablate.record.sweepdir import SweepDir, open_log
from ablate.trials import trial
from ablate.trials.launchers import fork_hazards
from ablate.trials.tasks.interface import import_callable
from ablate.trials.trial import PARENT_ENV, die_with_parent

#: Environment variable holding the warm parent's pid in each trial it forked (recorded in the manifest).
WARM_ENV = "ABLATE_WARM_PARENT"
#: Modules a fork may run (``MODULE.main(argv)``): a trial of ``launcher=local``, one of a packed SLURM job.
ENTRIES = ("ablate.trials.trial", "ablate.trials.launchers.slurm_pack_job")


def os_threads() -> int:
    """Threads of this process as the kernel counts them (native pools included); Python's count
    where ``/proc`` is missing."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        import threading

        return threading.active_count()


def preload(sweep_root: str, entry: str = ENTRIES[0]) -> dict[str, Any]:
    """Import what the trials of ``sweep_root`` import (and ``entry``, the module each fork runs), then
    report whether forking is safe.

    Returns
    -------
    dict
        ``threads`` (OS threads now; more than 1 means a pool was started before the fork: the
        launcher starts this process with ``OMP_NUM_THREADS``, ``MKL_NUM_THREADS`` and
        ``OPENBLAS_NUM_THREADS`` at 1 so that importing numpy or torch starts none),
        ``cuda`` (True when torch initialised CUDA here), ``imported`` (task specs imported),
        ``import_errors`` (spec -> message; those trials fail on their own with the full error),
        ``hash_seed`` (this interpreter's ``PYTHONHASHSEED``), ``pid``.
    """
    importlib.import_module(entry)
    sd = SweepDir(sweep_root)
    plan = trial.load_plan(sd)
    code_root = pins.trial_code_root(sd, plan)
    specs = sorted({str(fn) for a in plan["arms"] if (fn := ((a.get("config") or {}).get("task") or {}).get("fn"))})
    imported, errors = [], {}
    with fork_hazards.Watch(str(code_root)) as watch:  # names each thread and socket the import leaves
        for spec in specs:
            try:
                import_callable(spec, code_root)
                imported.append(spec)
            except Exception as exc:  # the trial reports it with its own message
                errors[spec] = str(exc)
    pinned = (plan.get("pins") or {}).get("data") or {}
    if pins.data_paths(plan) and not all((pinned.get(p) or {}).get("content") for p in pins.data_paths(plan)):
        import dvc.repo  # noqa: F401  (a plan without content digests: its trials verify the data with DVC)
    import omegaconf  # noqa: F401  (every trial resolves its config)
    import threadpoolctl  # noqa: F401  (each fork sets its slot's thread count with it)
    torch = sys.modules.get("torch")
    cuda = False
    if torch is not None:
        try:
            cuda = bool(torch.cuda.is_initialized())
        except Exception:  # a torch without a usable cuda module: nothing initialised
            cuda = False
    return {"pid": os.getpid(), "threads": os_threads(), "cuda": cuda, "imported": imported,
            "import_errors": errors, "hash_seed": os.environ.get("PYTHONHASHSEED"), **watch.report()}


def _write(fd: int, msg: Mapping[str, Any]) -> None:
    data = (json.dumps(msg) + "\n").encode()
    while data:
        data = data[os.write(fd, data):]


def _child(req: Mapping[str, Any], entry: str, close_fds: list[int]) -> None:
    """In the forked trial: detach, take the request's logs and environment, reseed, run ``entry.main``,
    exit. Never returns."""
    code = 1
    try:
        os.setsid()  # its own session and process group: killed as a group, never by our Ctrl-C
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGPIPE):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for fd in close_fds:
            os.close(fd)

        for target, key in ((1, "stdout"), (2, "stderr")):
            if req.get(key):  # else the warm parent's own (a packed SLURM job's logs)
                fd = open_log(req[key])  # never through a symlink planted in the trial dir
                os.dup2(fd, target)
                os.close(fd)
        env = dict(req.get("env") or {})
        env.pop("PYTHONHASHSEED", None)  # fixed when this interpreter started: one per ablation
        os.environ.update(env)
        os.environ[WARM_ENV] = str(os.getppid())

        os.environ[PARENT_ENV] = str(os.getppid())  # trial.main: die with the warm parent
        _fresh_process_state(int(req.get("threads") or 0))
        argv = [str(a) for a in req["argv"]]
        sys.argv = [entry, *argv]
        code = importlib.import_module(entry).main(argv)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        try:
            import atexit

            atexit._run_exitfuncs()  # what a fresh interpreter runs at exit (trackers flush here)
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _fresh_process_state(threads: int) -> None:
    """What a fresh interpreter would have: RNGs from OS entropy (the trial seeds them again when
    its determinism mode says so) and the slot's thread count."""
    import random

    random.seed()
    np = sys.modules.get("numpy")
    if np is not None:
        np.random.seed()
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.seed()
    if threads > 1 and (np is not None or torch is not None):  # pools were kept at 1 thread until the fork
        from threadpoolctl import threadpool_limits

        threadpool_limits(threads)  # OpenMP, OpenBLAS, MKL: what OMP_NUM_THREADS & co would have set
    if torch is not None and threads > 0:
        torch.set_num_threads(threads)


def serve(entry: str, req_fd: int, out_fd: int) -> None:
    """Fork one trial (``entry.main(request argv)``) per request line on ``req_fd`` and report pids and
    exit codes on ``out_fd``."""
    import selectors

    sig_r, sig_w = os.pipe()
    os.set_blocking(sig_r, False)
    os.set_blocking(sig_w, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.set_wakeup_fd(sig_w)
    running: dict[int, int] = {}  # pid -> request id
    buf = b""
    eof = False
    with selectors.DefaultSelector() as sel:
        sel.register(req_fd, selectors.EVENT_READ)
        sel.register(sig_r, selectors.EVENT_READ)
        while not eof or running:
            ready = {key.fileobj for key, _ in sel.select()}
            if sig_r in ready:
                with contextlib.suppress(BlockingIOError):
                    os.read(sig_r, 4096)
            while running:  # reap every child that ended (SIGCHLD may coalesce)
                try:
                    pid, status = os.waitpid(-1, os.WNOHANG)
                except ChildProcessError:
                    break
                if pid == 0:
                    break
                rid = running.pop(pid, None)
                if rid is not None:
                    _write(out_fd, {"id": rid, "exit": os.waitstatus_to_exitcode(status)})
            if req_fd in ready and not eof:
                chunk = os.read(req_fd, 65536)
                if not chunk:
                    eof = True
                    sel.unregister(req_fd)
                    for pid in running:  # the orchestrator is gone or done: no trial outlives it
                        with contextlib.suppress(ProcessLookupError, PermissionError):
                            os.killpg(pid, signal.SIGKILL)
                    continue
                buf += chunk
                *lines, buf = buf.split(b"\n")
                for line in lines:
                    if not line.strip():
                        continue
                    req = json.loads(line)
                    sys.stdout.flush()
                    sys.stderr.flush()
                    pid = os.fork()
                    if pid == 0:
                        _child(req, entry, [req_fd, out_fd, sig_r, sig_w])
                    running[pid] = req["id"]
                    _write(out_fd, {"id": req["id"], "pid": pid})


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m ablate.trials.launchers.zygote SWEEP_DIR [--entry MODULE] [--stdout-fd FD]``
    (started by :class:`ablate.trials.launchers.warm.WarmParent`)."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m ablate.trials.launchers.zygote")
    ap.add_argument("sweep_dir")
    ap.add_argument("--entry", choices=ENTRIES, default=ENTRIES[0])
    ap.add_argument("--stdout-fd", type=int, default=None)
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)

    die_with_parent()
    req_fd, out_fd = os.dup(0), os.dup(1)  # the protocol; fds 0 and 1 are left to what the task prints
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    if args.stdout_fd is not None:  # the starter's own stdout (a packed job's log), passed down
        os.dup2(args.stdout_fd, 1)
        os.close(args.stdout_fd)
    else:
        os.dup2(2, 1)
    sys.path[:] = [p for p in sys.path if p not in ("", os.getcwd())]  # never import from the live tree
    root = str(Path(args.sweep_dir))
    try:
        report = preload(root, args.entry)
    except Exception as exc:
        _write(out_fd, {"ready": None, "error": f"{type(exc).__name__}: {exc}"})
        return 1
    _write(out_fd, {"ready": report})
    if report["threads"] > 1 or report["cuda"] or report.get("sockets"):
        return 0  # the launcher refuses with the reason
    serve(args.entry, req_fd, out_fd)
    return 0


if __name__ == "__main__":
    sys.exit(main())
