"""The warm parent of trial processes (``launcher.warm=true``): imports the task once, forks each trial.

Used by ``launcher=local`` (one per launch, :class:`ablate.trials.warm.starter.WarmParent`) and by a packed
SLURM job (``launcher=slurm``, ``trials_per_job=k``: one per job start, see
:mod:`ablate.trials.launchers.slurm.pack_job`). Started as
``python -m ablate.trials.warm.parent SWEEP_DIR [--entry MODULE] [--stdout-fd FD]``, or by ``launcher=local``
before the sweep dir exists as ``... --early MODULE ...``: it imports those of the task's installed packages that
are safe to import before the code is pinned (:mod:`ablate.trials.warm.early`), then reads one line
``{"sweep": DIR, "log": PATH, "entry": MODULE, "preload": [...], "learn": BOOL}`` from stdin and goes on as
below (end of stdin instead: it exits).
It imports what every trial would import (ablate's trial code, omegaconf, the task module from the
pinned code snapshot, and with it torch, plus the entry module), checks that forking is still safe, then
serves fork requests. Each trial is a fresh ``os.fork()`` of this process, which never runs a trial itself,
so nothing a trial does (module state it mutates, RNG draws, CUDA, threads) reaches the next one.

Protocol: JSON lines. This process writes one ``{"ready": REPORT}`` line, then reads requests
``{"id": N, "argv": [...], "env": {...}, "threads": T, "stdout": PATH, "stderr": PATH, "reseed": B}`` from stdin
and answers ``{"id": N, "pid": P}`` once the trial is forked and ``{"id": N, "exit": CODE}`` when it has
ended (CODE as :attr:`subprocess.Popen.returncode`: negative for a signal). The fork runs
``ENTRY.main(argv)`` (the entry named at start: ``ablate.trials.trial`` by default); without ``stdout``/``stderr``
it keeps this process's fds 1 and 2 (``--stdout-fd`` names the fd its fd 1 is taken from; default its
stderr). End of stdin: kill what is left and exit. Each fork also gets the write end of a pipe of its own, on
which it reports, as it exits, the modules it imported that this process had not; between forks this
process imports them when that is safe (:class:`Learner`; ``--preload`` names modules to import at start,
``--no-learn`` turns learning off). An ``app`` task's script is imported here too (after a probe fork found
that safe), so each fork calls its ``@hydra.main`` function (:mod:`ablate.trials.tasks.app_warm`).

Why not ``multiprocessing``'s forkserver: it is one server per Python process with a process-global
preload list (``set_forkserver_preload``) and environment, so two ablations in one process (the
Python API, the test suite) or a user's own forkserver (a ``DataLoader``) would share it; its preload
imports module names with the orchestrator's ``sys.path`` (the live tree), while a trial must import
the task from the pinned snapshot; and its ``PYTHONHASHSEED`` is whatever the orchestrator had. This
module is its serve loop (select on requests and a SIGCHLD wakeup fd) without those globals.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import gc
import importlib
import json
import os
import random
import selectors
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ablate.pin import imported, pins
from ablate.plan.hydra_semantics import hydra_conf
from ablate.record.sweepdir import SweepDir, open_log
from ablate.trials import proctree, seeding
from ablate.trials.config import load_plan, plain_config, prime_config, reads_hydra_state, resolve_config
from ablate.trials.proctree import PARENT_ENV, die_with_parent
from ablate.trials.tasks.interface import import_callable, preload_warm, prepare_node
from ablate.trials.warm import early, fork, hazards
from ablate.trials.warm.starter import unsafe_reason
from ablate.trials.workdir import task_workdir

#: Environment variable holding the warm parent's pid in each trial it forked (recorded in the manifest).
WARM_ENV = "ABLATE_WARM_PARENT"
#: Modules a fork may run (``MODULE.main(argv)``): a trial of ``launcher=local``, one of a packed SLURM job.
ENTRIES = ("ablate.trials.trial", "ablate.trials.launchers.slurm.pack_job")


def os_threads() -> int:
    """Threads of this process as the kernel counts them (native pools included); Python's count
    where ``/proc`` is missing."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return threading.active_count()


def fork_state() -> dict[str, Any]:
    """What makes forking this process unsafe, as the ready report carries it: ``threads`` (OS threads
    now) and ``cuda`` (True when torch initialised CUDA here). Checked by
    :func:`ablate.trials.warm.starter.unsafe_reason`, at start and after each learned import."""
    torch = sys.modules.get("torch")
    cuda = False
    if torch is not None:
        try:
            cuda = bool(torch.cuda.is_initialized())
        except Exception:  # a torch without a usable cuda module: nothing initialised
            cuda = False
    return {"threads": os_threads(), "cuda": cuda}


def import_modules(names: list[str]) -> tuple[list[str], dict[str, str]]:
    """Import each of ``names`` in order; returns those imported and, for the others, the error."""
    done, errors = [], {}
    for name in names:
        try:
            importlib.import_module(name)
            done.append(name)
        except BaseException as exc:  # SystemExit at import too: it never ends the warm parent
            errors[name] = f"{type(exc).__name__}: {exc}"
    return done, errors


def preload(sweep_root: str, entry: str = ENTRIES[0], modules: list[str] | None = None,
            early_done: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Import what the trials of ``sweep_root`` import (and ``entry``, the module each fork runs, and the
    declared ``modules``: ``launcher.preload``), then report whether forking is safe. ``early_done``: what
    :func:`import_early` imported before the sweep dir was known (refused when the snapshot holds a module of
    one of those names, :func:`ablate.trials.warm.early.shadowed`).

    Returns
    -------
    dict
        ``threads`` (OS threads now; more than 1 means a pool was started before the fork: the
        launcher starts this process with ``OMP_NUM_THREADS``, ``MKL_NUM_THREADS`` and
        ``OPENBLAS_NUM_THREADS`` at 1 so that importing numpy or torch starts none),
        ``cuda`` (True when torch initialised CUDA here), ``imported`` (task specs imported),
        ``import_errors`` (spec -> message; those trials fail on their own with the full error),
        ``preloaded`` (the declared modules imported), ``preload_errors`` (module -> message: the launcher
        refuses), ``hash_seed`` (this interpreter's ``PYTHONHASHSEED``), ``pid``, ``early`` (the modules
        imported before the sweep dir was known; their seconds are in ``import_s``).
    """
    importlib.import_module(entry)
    proctree.become_subreaper()  # a daemon the task's import starts (setsid, double fork) stays visible below
    sd = SweepDir(sweep_root)
    plan = load_plan(sd)
    code_root = pins.trial_code_root(sd, plan)
    os.chdir(task_workdir(sd, plan, (plan["arms"][0].get("config") or {}).get("task") or {}))  # as a fresh trial
    early_names = list((early_done or {}).get("imported") or [])
    if early_names and (hit := early.shadowed(early_names, str(code_root))):
        raise RuntimeError(f"the code snapshot has its own {hit[0]!r}, imported from the installed packages before "
                           "the snapshot existed")
    specs = sorted({str(fn) for a in plan["arms"] if (fn := ((a.get("config") or {}).get("task") or {}).get("fn"))})
    imported, errors = [], {}
    with hazards.Watch(str(code_root)) as watch, hazards.env_reads(seeding.TRIAL_ENV) as env_read:
        for spec in specs:  # each thread, socket and process the import leaves is named; who drew; a trial's variable
            try:
                import_callable(spec, code_root)
                imported.append(spec)
            except Exception as exc:  # the trial reports it with its own message
                errors[spec] = str(exc)
    rng_drawn = watch.rng_own  # the task's own draw at import: every fork would share it, unseeded
    _note_library_draws(watch.rng_library)
    apps, app_fallback = _preload_apps(sd, plan, code_root)
    pinned = (plan.get("pins") or {}).get("data") or {}
    if pins.data_paths(plan) and not all((pinned.get(p) or {}).get("content") for p in pins.data_paths(plan)):
        import dvc.repo  # noqa: F401, PLC0415  (a plan without content digests: its trials verify the data with DVC)
    import omegaconf  # noqa: F401, PLC0415  (every trial resolves its config)
    import threadpoolctl  # noqa: F401, PLC0415  (each fork sets its slot's thread count with it)
    import xxhash  # noqa: F401, PLC0415  (each trial digests its code and data pins, before and after its task)
    for name in ("numpy", "torch"):  # what seeding looks up in every trial, found once here for every fork
        seeding.installed(name)
    declared, preload_errors = import_modules(list(modules or []))
    prepare_trials(plan)
    seen = watch.report()
    hazards.end_processes(seen)  # a process the import started: refused below, and never left running
    seen["import_s"] = round(seen["import_s"] + float((early_done or {}).get("import_s") or 0), 3)
    return {"pid": os.getpid(), **fork_state(), "imported": imported, "import_errors": errors,
            "preloaded": declared, "preload_errors": preload_errors, "apps": apps, "app_fallback": app_fallback,
            "hash_seed": os.environ.get("PYTHONHASHSEED"), "early": early_names, "rng_drawn": rng_drawn,
            "trial_env_read": env_read, "cwd": os.getcwd(), **seen}


def _note_library_draws(draws: list[dict[str, str]]) -> None:
    """Say in the warm parent's log (once per library) which installed library drew at import: not refused (each
    fork re-seeds every generator before its task runs; the library's draw is the same in every trial)."""
    for module in dict.fromkeys(d["module"] for d in draws):
        gens = " and ".join(hazards.RNG_NAMES.get(d["generator"], d["generator"]) for d in draws
                            if d["module"] == module)
        print(f"ablate warm parent: importing {module} drew from {gens}: that library's own draw at import (the "
              "same in every trial; each trial re-seeds every generator after its fork), so forking stays safe",
              file=sys.stderr, flush=True)


def import_early(names: list[str]) -> dict[str, Any]:
    """Import ``names`` (in the task's order) up to the first that :func:`ablate.trials.warm.early.installed`
    does not allow before the sweep dir exists (what follows it, the task imports after it), watched as the
    task's import is (:class:`ablate.trials.warm.hazards.Watch`).

    Returns
    -------
    dict
        ``imported`` (the modules imported), ``import_s`` (their seconds), ``refused`` (why this warm parent
        must not serve trials: an import failed, or left a thread, a socket or CUDA behind; None when none did).
    """
    project = os.getcwd()
    todo: list[str] = []
    for name in names:
        if name in sys.modules:
            continue
        if not early.installed(name, project):
            break
        todo.append(name)
    with hazards.Watch(project) as watch:
        done, errors = import_modules(todo)
    seen = {**fork_state(), **watch.report(), "imported": done}
    hazards.end_processes(seen)
    refused = (f"importing {next(iter(errors))} failed ({next(iter(errors.values()))})" if errors
               else unsafe_reason(seen))
    return {"imported": done, "import_s": seen["import_s"], "refused": refused}


def _read_line(fd: int) -> dict[str, Any] | None:
    """One JSON line from ``fd``, read a byte at a time (what follows it stays unread); None at end of file."""
    data = b""
    while not data.endswith(b"\n"):
        byte = os.read(fd, 1)
        if not byte:
            return None
        data += byte
    msg = json.loads(data)
    return msg if isinstance(msg, dict) else None


def _take_log(path: str) -> None:
    """Make ``path`` (the warm parent's log in the sweep dir) this process's fds 1 and 2, with what it wrote before
    (to fd 2: the file its starter gave it) copied in first."""
    fd = open_log(path)  # never through a symlink planted in the sweep dir
    with contextlib.suppress(OSError):
        os.lseek(2, 0, os.SEEK_SET)
        while chunk := os.read(2, 65536):
            os.write(fd, chunk)
    for target in (1, 2):
        os.dup2(fd, target)
    os.close(fd)


def prepare_trials(plan: Mapping[str, Any]) -> None:
    """Do here, once, the work every fork would repeat before its task runs, so each inherits it: the static part
    of the environment each manifest records (the installed packages, the CPU), the source files torch's seeding
    reads (its lazy CUDA seeding records the caller's stack, with lines from linecache), and each ``fn`` arm's
    config node (:func:`ablate.trials.tasks.interface.prepare_node`) and ``config.yaml`` template
    (:func:`ablate.trials.config.config_yaml`) when its config has nothing to resolve, so
    that what a fork would build is exactly this (one with interpolations is resolved in the fork: a resolver
    such as ``oc.env`` reads the fork's own environment). Every trial still checks its pins itself."""
    pins.capture_environment(light=True)
    imported.prime()  # which distribution provides each module held here: forks ask only for their own imports
    seeding.prime_torch_seeding()
    _prime_hydra_conf(plan)
    seed = (plan.get("seeds") or [0])[0]
    for arm in plan["arms"]:
        config = arm.get("config") or {}
        task = config.get("task") or {}
        if not task.get("fn") or not plain_config(config):
            continue
        with contextlib.suppress(Exception):  # the trial builds its own, and reports what fails
            cfg = resolve_config(config, seed)
            prepare_node(cfg, arm)
            prime_config(config, cfg)


def _prime_hydra_conf(plan: Mapping[str, Any]) -> None:
    """Build Hydra's config node (:func:`ablate.plan.hydra_semantics.hydra_conf`) here when every trial will open a
    Hydra context to resolve its config (an arm's config reads ``${hydra:...}``): each fork then copies it instead
    of building it (13-40 ms of CPU per trial, issue 42). An ``fn`` task whose module reads ``HydraConfig`` builds
    it in each trial, as before."""
    if any(reads_hydra_state(arm.get("config") or {}) for arm in plan.get("arms") or []):
        with contextlib.suppress(Exception):  # a trial that needs it builds its own, and reports what fails
            hydra_conf()


def _preload_apps(sd: SweepDir, plan: Mapping[str, Any], code_root: Any) -> tuple[dict[str, str], dict[str, str]]:
    """Import each ``app`` task's script here, when a probe fork that imported it alone found that safe.

    Returns ``apps`` (script -> its ``@hydra.main`` function: forks call it) and ``app_fallback`` (script -> why
    its trials start a fresh ``python <app>`` instead: the import failed, or started a thread, or CUDA).
    """
    tasks = {str(t["app"]): t for a in plan["arms"] if (t := (a.get("config") or {}).get("task") or {}).get("app")}
    apps, fallback = {}, {}
    for app, task in sorted(tasks.items()):
        workdir = task_workdir(sd, plan, task)  # where a fresh `python <app>` would start: the snapshot

        def load(task: Mapping[str, Any] = task, workdir: Any = workdir) -> dict[str, Any]:
            with contextlib.chdir(workdir):
                return {"function": preload_warm(task, code_root)}

        def probed(load: Callable[[], dict[str, Any]] = load) -> dict[str, Any]:
            with hazards.Watch(str(code_root)) as watch, hazards.env_reads(seeding.TRIAL_ENV) as env_read:
                loaded = load()  # who drew: the app's own code, or a library it imports
            return {**loaded, "rng_drawn": watch.rng_own, "rng_library": watch.rng_library,
                    "trial_env_read": env_read}

        probe = run_in_probe(probed)
        why = probe.get("error") or unsafe_reason({**probe, "imported": [app]})
        if why:
            fallback[app] = why
            continue
        _note_library_draws(probe.get("rng_library") or [])
        try:
            apps[app] = load()["function"]
        except Exception as exc:  # the probe imported it; here it failed: the trials start it afresh
            fallback[app] = f"importing it failed ({type(exc).__name__}: {exc})"
    return apps, fallback


def _write(fd: int, msg: Mapping[str, Any]) -> None:
    data = (json.dumps(msg) + "\n").encode()
    while data:
        data = data[os.write(fd, data):]


def _child(req: Mapping[str, Any], entry: str, close_fds: list[int], learn: Learner, report_fd: int,
           modules: tuple[frozenset[str], str | None] | None = None) -> None:
    """In the forked trial: detach, take the request's logs and environment, reseed, run ``entry.main``,
    report the modules it imported that this process had not (on ``report_fd``), exit. Never returns.
    ``modules``: this process's module names at the fork (:class:`ablate.trials.warm.fork.ParentModules`)."""
    code = 1
    fork.forked(learn.declared, learn.learned, modules)
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
        _fresh_process_state(int(req.get("threads") or 0), reseed=bool(req.get("reseed", True)))
        argv = [str(a) for a in req["argv"]]
        sys.argv = [entry, *argv]
        code = importlib.import_module(entry).main(argv)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        try:
            fork.leave_parent_finalizers()  # the parent's objects are the parent's to finalise
            atexit._run_exitfuncs()  # what a fresh interpreter runs at exit (trackers flush here)
            sys.stdout.flush()
            sys.stderr.flush()
            if report_fd >= 0:
                os.set_blocking(report_fd, False)  # more than a pipe holds is dropped, never waited for
                with contextlib.suppress(OSError):  # what it imported, and whether it ended with only one thread
                    os.write(report_fd, json.dumps({"roots": fork.new_roots(), **fork_state()}).encode())
        finally:
            os._exit(code)


def _fresh_process_state(threads: int, reseed: bool = True) -> None:
    """What a fresh interpreter would have: RNGs from OS entropy (the trial seeds them again when
    its determinism mode says so; ``reseed=False``: numpy's and torch's are left to the trial, which seeds both
    before its task runs) and the slot's thread count."""
    random.seed()
    np = sys.modules.get("numpy")
    if np is not None and reseed:
        np.random.seed()
    torch = sys.modules.get("torch")
    if torch is not None and reseed:
        torch.seed()
    if threads > 1 and (np is not None or torch is not None):  # pools were kept at 1 thread until the fork
        from threadpoolctl import threadpool_limits  # noqa: PLC0415  # lazy: threadpoolctl off this module's import

        threadpool_limits(threads)  # OpenMP, OpenBLAS, MKL: what OMP_NUM_THREADS & co would have set
    if torch is not None and threads > 0:
        torch.set_num_threads(threads)


class Learner:
    """What the warm parent preloads beyond the task: the declared modules (``launcher.preload``) and those it
    learns from its trials (each fork reports the modules it imported that the parent had not).

    :meth:`learn` runs between forks. The modules a trial reported, not yet held, are imported here only when
    a probe (a fork that imports only those modules, checks, and exits) found them safe
    (:func:`ablate.trials.warm.starter.unsafe_reason`): no thread started, CUDA untouched, and no draw from
    python's, numpy's or torch's global generator at import (:func:`ablate.trials.warm.hazards.rng_drawn`:
    held here, such a module would give every later trial one unseeded draw, where the trial that imported it
    drew after its own seeding). So a module that starts a thread, initialises CUDA or draws at import never
    reaches this process, and learning changes where an import is paid, not what a trial computes. After the
    import the same check runs here: should it fail, this process stops forking (its trials then end as when a
    warm parent dies). A module refused once (unsafe, or failing to import) is never tried again; the reason
    goes to this process's stderr (the warm parent's log), once.
    """

    def __init__(self, declared: list[str], enabled: bool) -> None:
        self.declared = list(declared)
        self.enabled = enabled
        self.learned: list[str] = []
        self.refused: dict[str, str] = {}

    def learn(self, roots: list[str]) -> None:
        """Import ``roots`` (the module roots a trial reported it imported) here, when a probe fork shows it safe."""
        todo = [r for r in roots if r not in sys.modules and r not in self.refused]
        if not self.enabled or not todo:
            return
        # a probe fork imports them first, so a thread, CUDA or a random draw at import never reaches this
        # process (the trial's own end cannot show a draw: it seeded before importing them)
        probe = self._probe(todo)
        why = probe.get("error") or unsafe_reason({**probe, "rng_drawn": [], "imported": todo})
        if why:
            self._refuse(todo, why)
            return
        for name, err in (probe.get("errors") or {}).items():
            self._refuse([name], f"importing it failed in a probe ({err})")
        drawn, read = probe.get("drawn") or {}, probe.get("env_read") or {}
        first = next((i for i, name in enumerate(todo) if name in drawn or name in read), len(todo))
        if first < len(todo):  # it and what follows it stay the trials' own (a later one may import it)
            name = todo[first]
            self._refuse(todo[first:], unsafe_reason({"rng_drawn": drawn.get(name) or [],
                                                      "trial_env_read": read.get(name) or [], "imported": [name]})
                         or "it drew random numbers at import")
        ok = [r for r in todo[:first] if r in (probe.get("ok") or [])]
        done, errors = import_modules(ok)
        for name, err in errors.items():
            self._refuse([name], f"importing it failed ({err})")
        self.learned += done
        why = unsafe_reason({**fork_state(), "imported": done})
        if why:  # the probe said safe, the same import here was not: forking from here is no longer safe
            print(f"ablate warm parent: learned import {why}; it stops forking trials", file=sys.stderr, flush=True)
            raise SystemExit(3)

    def _refuse(self, names: list[str], why: str) -> None:
        for name in names:
            self.refused[name] = why
        print(f"ablate warm parent: not preloading {', '.join(names)} (imported by a trial): {why}; each trial "
              "imports it itself", file=sys.stderr, flush=True)

    @staticmethod
    def _probe(names: list[str]) -> dict[str, Any]:
        def imports() -> dict[str, Any]:  # one at a time, in order: which of them draws, or reads a trial's variable
            ok, errors, drawn, env_read = [], {}, {}, {}
            for name in names:
                marks = hazards.rng_marks()
                with hazards.env_reads(seeding.TRIAL_ENV) as read:
                    done, failed = import_modules([name])
                ok += done
                errors.update(failed)
                if rngs := hazards.rng_drawn(marks):
                    drawn[name] = rngs
                if read:
                    env_read[name] = read
            return {"ok": ok, "errors": errors, "drawn": drawn, "env_read": env_read}

        return run_in_probe(imports)


def run_in_probe(work: Callable[[], Mapping[str, Any]]) -> dict[str, Any]:
    """Run ``work`` in a fork of this process (a probe, which then exits) and return what it returned, with
    the probe's :func:`fork_state` after it; ``error`` when it raised or ended without a report. Nothing the
    probe does reaches this process."""
    r, w = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the probe: work, report, exit (never runs anything else)
        try:
            os.close(r)
            proctree.become_subreaper()  # a daemon the import starts (setsid, double fork) stays below the probe
            try:
                out: dict[str, Any] = dict(work())
            except BaseException as exc:  # its failure is the report
                out = {"error": f"importing it failed ({type(exc).__name__}: {exc})"}
            procs = hazards.own_processes()  # started by the import: refused, and ended with the probe
            proctree.kill_descendants()
            data = json.dumps({**out, **fork_state(), **({"processes": procs} if procs else {})}).encode()
            while data:
                data = data[os.write(w, data):]
        finally:
            os._exit(0)
    os.close(w)
    chunks = []
    while chunk := os.read(r, 65536):
        chunks.append(chunk)
    os.close(r)
    _, status = os.waitpid(pid, 0)
    try:
        return dict(json.loads(b"".join(chunks)))
    except ValueError:
        return {"error": f"a probe doing it ended without a report (exit {os.waitstatus_to_exitcode(status)})"}


def serve(entry: str, req_fd: int, out_fd: int, learner: Learner | None = None) -> None:
    """Fork one trial (``entry.main(request argv)``) per request line on ``req_fd`` and report pids and
    exit codes on ``out_fd``; between forks, preload what the trials imported (``learner``)."""
    learner = learner or Learner([], enabled=False)
    held = fork.ParentModules()
    reports: dict[int, int] = {}  # pid -> read end of the pipe its list of new imports comes on
    sig_r, sig_w = os.pipe()
    os.set_blocking(sig_r, False)
    os.set_blocking(sig_w, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.set_wakeup_fd(sig_w)
    running: dict[int, int] = {}  # pid -> request id
    learned: list[dict[str, Any]] = []  # reports of forks that ended, not yet learned from
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
                if pid in reports:
                    learned.append(_read_report(reports.pop(pid)))
            while learned:  # before the next fork: what these trials imported, the next ones find loaded
                rep = learned.pop(0)
                learner.learn(list(rep.get("roots") or []))
            if req_fd in ready and not eof:
                chunk = os.read(req_fd, 65536)
                if not chunk:
                    eof = True
                    sel.unregister(req_fd)
                    for pid in running:  # the orchestrator is gone or done: no trial outlives it
                        proctree.kill_group(pid)
                    continue
                buf += chunk
                *lines, buf = buf.split(b"\n")
                for line in lines:
                    if not line.strip():
                        continue
                    req = json.loads(line)
                    sys.stdout.flush()
                    sys.stderr.flush()
                    rep_r, rep_w = os.pipe() if learner.enabled else (-1, -1)
                    modules = held.now()
                    gc.freeze()  # what this process holds: no collection in a fork walks it (copy-on-write)
                    pid = os.fork()
                    if pid == 0:
                        others = list(reports.values()) + ([rep_r] if rep_r >= 0 else [])
                        _child(req, entry, [req_fd, out_fd, sig_r, sig_w, *others], learner, rep_w, modules)
                    if rep_w >= 0:
                        os.close(rep_w)
                        reports[pid] = rep_r
                    running[pid] = req["id"]
                    _write(out_fd, {"id": req["id"], "pid": pid})


def _read_report(fd: int) -> dict[str, Any]:
    """What a finished fork wrote on its report pipe: ``roots`` (module names) and its :func:`fork_state` at its
    end; empty when it wrote nothing usable."""
    os.set_blocking(fd, False)
    chunks = []
    with contextlib.suppress(BlockingIOError, OSError):
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    os.close(fd)
    try:
        rep = json.loads(b"".join(chunks))
    except ValueError:
        return {}
    if not isinstance(rep, dict) or not isinstance(rep.get("roots"), list):
        return {}
    return {**rep, "roots": [str(n) for n in rep["roots"]]}


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m ablate.trials.warm.parent SWEEP_DIR [--entry MODULE] [--stdout-fd FD]
    [--preload MODULE ...] [--no-learn]`` (started by :class:`ablate.trials.warm.starter.WarmParent`)."""
    ap = argparse.ArgumentParser(prog="python -m ablate.trials.warm.parent")
    ap.add_argument("sweep_dir", nargs="?")
    ap.add_argument("--entry", choices=ENTRIES, default=ENTRIES[0])
    ap.add_argument("--stdout-fd", type=int, default=None)
    ap.add_argument("--preload", nargs="*", default=[])
    ap.add_argument("--no-learn", action="store_true")
    ap.add_argument("--early", nargs="*", default=None, metavar="MODULE")
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)
    if (args.sweep_dir is None) == (args.early is None):
        ap.error("give SWEEP_DIR, or --early MODULE ... (the sweep dir then comes on stdin)")

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
    done = None
    if args.early is not None:  # started before the sweep dir existed (ablate.trials.warm.early)
        done = import_early(args.early)
        if done["refused"]:
            _write(out_fd, {"ready": None, "error": f"early start refused: {done['refused']}"})
            return 0  # the launcher starts a warm parent the ordinary way, which reports it as it should
        got = _read_line(req_fd)
        if got is None:
            return 0  # planning refused, or the run ended without a launch: nothing to serve
        args.sweep_dir, args.preload, args.no_learn = str(got["sweep"]), list(got["preload"]), not got["learn"]
        args.entry = str(got["entry"]) if got["entry"] in ENTRIES else ENTRIES[0]
        _take_log(str(got["log"]))
    root = str(Path(args.sweep_dir).absolute())  # before preload changes into the code snapshot
    try:
        report = preload(root, args.entry, args.preload, done)
    except Exception as exc:
        _write(out_fd, {"ready": None, "error": f"{type(exc).__name__}: {exc}"})
        return 1
    _write(out_fd, {"ready": report})
    if report["threads"] > 1 or report["cuda"] or report.get("sockets") or report.get("processes") \
            or report["preload_errors"]:
        return 0  # the launcher refuses with the reason
    serve(args.entry, req_fd, out_fd, Learner(report["preloaded"], enabled=not args.no_learn))
    return 0


def leave(run: Callable[[], int]) -> None:
    """Run ``run`` (:func:`main`) and end this process as each fork ends: its ``atexit`` functions (the task
    module's ``weakref.finalize`` callbacks among them), the streams flushed, then ``os._exit``. A warm parent
    holding torch would otherwise spend 1-2 s tearing its modules down, which the launcher waits for
    (:meth:`ablate.trials.warm.starter.WarmParent.close`) before the verdict. Never returns."""
    code = 1
    try:
        code = run()
    except SystemExit as exc:  # Learner.learn: forking is no longer safe
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        traceback.print_exc()
    finally:
        try:
            atexit._run_exitfuncs()
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


if __name__ == "__main__":
    leave(main)
