"""Seeds and determinism modes, applied inside the trial's process before the task runs.

Modes (``determinism=``):

``off``
    Nothing is seeded from the trial seed: runs differ even at the same seed. Torch's generator is
    reseeded from OS entropy, so an ``off`` trial never continues a stream that an earlier trial in
    the same process left behind (``launcher=inline``); the seed drawn is recorded in the manifest
    (``determinism.torch_seed``), so one such run can still be replayed by hand.
``seeded`` (default)
    Weak reproducibility: python ``random``, numpy's global generator, and torch's CPU and CUDA
    generators are seeded from the trial seed, and ``PYTHONHASHSEED`` is set for child processes.
    The same seed, code and data give the same final metrics on the same hardware and threads.
``strict``
    Strong reproducibility: ``seeded`` plus ``torch.use_deterministic_algorithms(True)``,
    ``CUBLAS_WORKSPACE_CONFIG=:4096:8`` (set before CUDA initialises), ``cudnn.deterministic=True``
    and ``cudnn.benchmark=False``: every step is bitwise identical. Costs 2-5x on some GPU ops
    (scatter/index add, embedding-bag, pooling backward ...); for bisecting a divergence.

Which mode a trial runs under comes from :func:`trial_mode`: the ablation's ``determinism`` setting,
or the arm's own value when ``determinism`` is itself the variable (``ablate -m variable=determinism``).

``seeded`` gives the weak guarantee only when every op the task uses is deterministic on its
hardware; ops on PyTorch's nondeterministic list (atomic adds in ``index_add_``, ``scatter_add_``,
``index_put_(accumulate=True)`` ...) can change the final metrics between two runs at the same seed,
on GPUs and even on a multi-threaded CPU. ``strict`` makes them deterministic or fails the trial.

numpy and torch are never imported here: they are seeded when the task imports them, so a task
without torch pays nothing for it.
"""

from __future__ import annotations

import importlib.util
import linecache
import os
import random
import sys
from collections.abc import Mapping
from typing import Any

from ablate.errors import ConfigError

MODES = ("off", "seeded", "strict")
#: The config key of the determinism mode (a top-level ablate setting; it can be the variable).
MODE_KEY = "determinism"
STRICT_CUBLAS = ":4096:8"
MAX_SEED = 2**32 - 1


def check_mode(mode: Any, where: str = MODE_KEY) -> str:
    """Validate a determinism mode name.

    Parameters
    ----------
    mode : str
        ``off``, ``seeded`` or ``strict`` (``False``, YAML 1.1's reading of an unquoted ``off``, is
        taken as ``off``).
    where : str
        The config key named in the error message.

    Returns
    -------
    str
        The mode name.

    Raises
    ------
    ConfigError
        When ``mode`` is not one of ``off``, ``seeded``, ``strict``.
    """
    if mode is False:  # YAML 1.1 reads an unquoted `off` as false
        mode = "off"
    if mode not in MODES:
        example = "`variable.values=[strict]`" if where.startswith("variable") else "`determinism=seeded`"
        raise ConfigError(f"must be one of {', '.join(MODES)}, got {mode!r}", where=where, fix=f"e.g. {example}")
    return str(mode)


def check_variable_values(variable: Any) -> None:
    """When the ablation's variable is the determinism mode itself, check every treatment value.

    Parameters
    ----------
    variable : mapping or None
        The composed ``variable`` node (``key``, ``values``).

    Raises
    ------
    ConfigError
        Naming ``variable.values[i]`` when a value is not a determinism mode.
    """
    if not isinstance(variable, Mapping) or variable.get("key") != MODE_KEY:
        return
    values = variable.get("values")
    if not isinstance(values, list | tuple):
        return  # the plan reports a malformed values list
    for i, v in enumerate(values):
        if v is False:
            raise ConfigError("is false: YAML read an unquoted `off` as a boolean", where=f"variable.values[{i}]",
                              fix="quote it: values: ['off']")
        check_mode(v, where=f"variable.values[{i}]")


def trial_mode(plan: Mapping[str, Any], arm: Mapping[str, Any]) -> str:
    """The determinism mode a trial of ``arm`` runs under.

    The ablation's ``determinism`` setting (``plan["options"]``), except when ``determinism`` is the
    variable: then each arm runs under its own value (the mode is the treatment).

    Parameters
    ----------
    plan : mapping
        The plan record (``ablation.yaml``).
    arm : mapping
        One entry of ``plan["arms"]`` (``name``, ``config``, ``changes`` ...).

    Returns
    -------
    str
        ``off``, ``seeded`` or ``strict``.

    Raises
    ------
    ConfigError
        When the recorded mode is not a valid one.
    """
    if MODE_KEY in (arm.get("changes") or {}):
        return check_mode((arm.get("config") or {}).get(MODE_KEY), where=f"arm {arm.get('name')}: determinism")
    return check_mode((plan.get("options") or {}).get(MODE_KEY, "seeded"))


def environment_for(mode: str, seed: int) -> dict[str, str]:
    """Environment variables a trial process needs for ``mode``, to set before Python or CUDA start.

    Parameters
    ----------
    mode : {"off", "seeded", "strict"}
    seed : int
        The trial seed.

    Returns
    -------
    dict
        Variables to merge into the child's environment: ``PYTHONHASHSEED`` (the seed) for
        ``seeded``/``strict``, plus ``CUBLAS_WORKSPACE_CONFIG`` (``:4096:8`` unless this process
        already has a value) for ``strict``.
    """
    env: dict[str, str] = {}
    if mode in ("seeded", "strict"):
        env["PYTHONHASHSEED"] = str(seed % (MAX_SEED + 1))
    if mode == "strict":
        env["CUBLAS_WORKSPACE_CONFIG"] = os.environ.get("CUBLAS_WORKSPACE_CONFIG") or STRICT_CUBLAS
    return env


#: Variables each trial sets to its own value (:func:`seed_environment`, and the run and trial dirs of an ``fn``
#: trial; a script's too): unset in a warm parent, so an import there that reads one is each trial's own to make.
TRIAL_ENV = ("ABLATE_SEED", "PL_GLOBAL_SEED", "ABLATE_RUN_DIR", "ABLATE_TRIAL_DIR")


def seed_environment(seed: int) -> dict[str, str]:
    """The variables that hand a trial's seed to the task's own code, in every determinism mode and task form:
    ``ABLATE_SEED``, and ``PL_GLOBAL_SEED``, which Lightning's ``seed_everything()`` reads when called with no
    argument (it seeds 0 without it, since Lightning 2.1: every seed of the ablation would be one run).

    Parameters
    ----------
    seed : int
        The trial seed.
    """
    return {"ABLATE_SEED": str(int(seed)), "PL_GLOBAL_SEED": str(int(seed))}


#: Set by ``ablate repro`` when the original app trial ran in a warm fork (under the ablation's hash seed): the
#: re-run's fresh ``python <app>`` takes it as its ``PYTHONHASHSEED`` instead of the trial seed.
APP_HASH_SEED_ENV = "ABLATE_APP_HASH_SEED"


def ablation_hash_seed(plan: Mapping[str, Any]) -> str:
    """The ``PYTHONHASHSEED`` of every trial process of this ablation, under every launcher that starts
    one (``local``, warm or not; ``slurm``, packed or not): one per ablation, recorded in each manifest
    (``environment.env.PYTHONHASHSEED`` and ``determinism.hash_seed``), so ``ablate repro`` replays it.

    It is one per ablation, not one per seed, because the warm parent's forks (``launcher.warm=true``)
    all share the interpreter it started, and the rule must not depend on the launcher: the same trial
    hashes strings the same way under ``local`` and ``slurm``.

    Parameters
    ----------
    plan : mapping
        The plan record (``seeds``, ``arms``, ``options.determinism``).

    Returns
    -------
    str
        The plan's first seed (modulo 2**32), so ``seeded``/``strict`` ablations hash strings the same way
        on every run and resume; a random one, drawn per launch, when every arm runs under ``determinism=off``.
    """
    modes = {trial_mode(plan, a) for a in plan["arms"]}
    if modes <= {"off"}:
        return str(int.from_bytes(os.urandom(4), "little") % (MAX_SEED + 1))
    seeds = plan.get("seeds") or [0]
    return str(int(seeds[0]) % (MAX_SEED + 1))


#: Environment variables that size the CPU thread pools of OpenMP, MKL and OpenBLAS (read at their start).
THREAD_ENV_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def thread_env(threads: int | None) -> dict[str, str]:
    """The environment that fixes a trial's CPU thread pools to ``threads`` (the plan's ``threads``).

    Parameters
    ----------
    threads : int or None
        Threads per trial; None (a plan written before ``threads`` existed) sets nothing.

    Returns
    -------
    dict
        ``OMP_NUM_THREADS``, ``MKL_NUM_THREADS``, ``OPENBLAS_NUM_THREADS`` -> ``str(threads)``. Every
        launcher sets them before the trial's process starts (inline: for the trial's duration), so a
        user's own ``OMP_NUM_THREADS`` cannot make one trial differ from another.
    """
    return {} if threads is None else {var: str(int(threads)) for var in THREAD_ENV_VARS}


def effective_hash_seed() -> str:
    """The string-hash seed in force in this interpreter: ``"0"`` (hash randomisation off), the
    ``PYTHONHASHSEED`` value it started with, or ``"random"``.

    Call it before :func:`seed_everything` (which sets ``PYTHONHASHSEED`` for child processes only:
    an interpreter fixes its string hashing when it starts). Under ``launcher=inline`` every trial
    shares the ablate process's hashing, so ``"random"`` there means the order of sets (and of dicts
    built from them) of strings can differ between two runs at the same seed.
    """
    if not sys.flags.hash_randomization:
        return "0"
    value = os.environ.get("PYTHONHASHSEED", "")
    return value if value.isdigit() else "random"


def inline_hash_warning(modes: Any) -> str | None:
    """The warning for ``launcher=inline`` when a mode in ``modes`` asks for determinism but this
    process's string hashing is randomised; None when there is nothing to warn about."""
    if effective_hash_seed() != "random" or not any(m in ("seeded", "strict") for m in modes):
        return None
    return ("ablate: warning: launcher=inline runs every trial in this process, whose string hashing is "
            "randomised (PYTHONHASHSEED is not set), so a task whose result depends on the order of a set of "
            "strings can give different metrics at the same seed (recorded as determinism.hash_seed: random). "
            "Fix: `PYTHONHASHSEED=0 ablate ...`, or launcher=local (every trial's process starts with the "
            "ablation's one PYTHONHASHSEED, the plan's first seed)")


def seed_everything(seed: int, mode: str = "seeded", threads: int | None = None) -> dict[str, Any]:
    """Seed python, numpy and torch from ``seed`` and apply the determinism ``mode``.

    Call it in the trial's process only (it sets process-global state), before the task runs.
    numpy and torch are seeded now when already imported (a task module that imports them at the
    top), and otherwise the moment they are first imported (a post-import hook), so a task that does
    not use torch never pays its 1.6 s import, and a task that imports it lazily is still seeded.
    ``PYTHONHASHSEED`` set here reaches child processes only (this interpreter's string hashing was
    fixed when it started: the local and SLURM launchers set it before the trial process starts).

    Parameters
    ----------
    seed : int
        The trial seed, 0 <= seed < 2**32.
    mode : {"off", "seeded", "strict"}
        ``off`` seeds nothing from ``seed`` (torch from OS entropy); ``seeded`` seeds python
        ``random``, numpy's global generator and torch's CPU and CUDA generators; ``strict`` adds
        deterministic algorithms (see the module doc).
    threads : int, optional
        torch's intra-op thread count (``torch.set_num_threads``), set with the seed; the plan's
        ``threads``, recorded as ``threads`` (a difference between trials is a confound).

    Returns
    -------
    dict
        What was applied (recorded in the manifest): ``mode``, ``seed``, ``seeded`` (the generators
        seeded now), ``on_import`` (those seeded when first imported), ``torch_flags`` (the flags in
        effect once torch is seeded), for ``off`` the ``torch_seed`` drawn from OS entropy (when torch
        is imported), and for ``strict`` with torch, ``cuda_initialized_before`` (True means
        ``CUBLAS_WORKSPACE_CONFIG`` came too late for cuBLAS in this process).

    Raises
    ------
    ConfigError
        For an unknown mode or a seed out of range.
    """
    mode = check_mode(mode)
    if not (0 <= int(seed) <= MAX_SEED):
        raise ConfigError(f"must be in [0, {MAX_SEED}], got {seed}", where="seed", fix="e.g. `seed=0`")
    seed = int(seed)
    applied: dict[str, Any] = {"mode": mode, "seed": seed, "seeded": [], "on_import": []}
    if threads is not None:
        applied["threads"] = int(threads)
    for k, v in environment_for(mode, seed).items():
        os.environ.setdefault(k, v)
    _hook.clear()
    if mode == "off":
        def unseed_torch(torch: Any) -> None:
            _set_torch_threads(torch, threads)
            applied["torch_seed"] = int(torch.seed())  # fresh entropy, recorded
            _set_torch_flags(torch, strict=False, applied=applied)

        if "torch" in sys.modules:
            unseed_torch(sys.modules["torch"])
        elif installed("torch"):
            _hook.add("torch", unseed_torch)
            applied["on_import"].append("torch")
        return applied
    random.seed(seed)
    applied["seeded"].append("random")

    def seed_numpy(np: Any) -> None:
        np.random.seed(seed)

    def seed_torch(torch: Any) -> None:
        _set_torch_threads(torch, threads)
        torch.manual_seed(seed)  # seeds the CPU generator and every CUDA device's (lazily)
        if mode == "strict":
            applied["cuda_initialized_before"] = bool(torch.cuda.is_initialized())
        _set_torch_flags(torch, strict=mode == "strict", applied=applied)

    for name, fn in (("numpy", seed_numpy), ("torch", seed_torch)):
        if name in sys.modules:
            fn(sys.modules[name])
            applied["seeded"].append(name)
        elif installed(name):
            _hook.add(name, fn)
            applied["on_import"].append(name)
    return applied


#: Why a strict trial's metric may be NaN: torch fills the memory it allocates without initialising with NaN.
NAN_FILL = ("under determinism=strict torch fills memory it allocates without initialising (torch.empty, "
            "empty_like, new_empty) with NaN (`torch.utils.deterministic.fill_uninitialized_memory`), so a task that "
            "reads memory it never wrote gets NaN")


def nan_fill_note(mode: str) -> str:
    """``"; " + NAN_FILL`` for a trial whose metric is NaN or inf under ``strict`` while torch filled uninitialised
    memory with NaN in this process (a fn task's), else ``""``."""
    torch = sys.modules.get("torch")
    if mode != "strict" or torch is None:
        return ""
    try:
        on = torch.are_deterministic_algorithms_enabled() and torch.utils.deterministic.fill_uninitialized_memory
    except AttributeError:  # a torch before 2.1: no such fill
        return ""
    return f"; {NAN_FILL}" if on else ""


def prime_torch_seeding() -> None:
    """In a warm parent holding torch: seed torch once here, so the source files its seeding reads are read for
    every fork. ``torch.seed`` and ``torch.manual_seed`` record the caller's stack for their lazy CUDA (and XPU,
    MTIA) seeding (``traceback.format_stack``), which reads each file on that stack into :mod:`linecache`: in each
    fork, about 1.2 ms and 240 copy-on-write page faults when read there. The stack of a trial's seeding runs
    through ablate's trial modules, so their files are read too. Each fork seeds torch again (from OS entropy,
    then from its trial seed), so nothing of this seed reaches a trial."""
    torch = sys.modules.get("torch")
    if torch is None:
        return

    torch.seed()
    for name, mod in list(sys.modules.items()):
        path = getattr(mod, "__file__", None)
        if name.startswith("ablate.trials") and isinstance(path, str) and path.endswith(".py"):
            linecache.getlines(path)
    main = getattr(sys.modules.get("__main__"), "__file__", None)  # the warm parent runs as `python -m ...`
    if isinstance(main, str) and main.endswith(".py"):
        linecache.getlines(main)


_INSTALLED: dict[str, bool] = {}


def installed(name: str) -> bool:
    """Whether ``name`` can be imported here (``importlib.util.find_spec``, looked up once per process: the
    path search costs more than the rest of seeding, and what is installed does not change during a run)."""
    if name not in _INSTALLED:
        _INSTALLED[name] = importlib.util.find_spec(name) is not None
    return _INSTALLED[name]


def torch_flags() -> dict[str, bool] | None:
    """The determinism flags of torch in this process, or None when torch is not imported.

    Returns
    -------
    dict or None
        ``use_deterministic_algorithms``, ``warn_only``, ``cudnn.deterministic``, ``cudnn.benchmark``.
    """
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    return {
        "use_deterministic_algorithms": bool(torch.are_deterministic_algorithms_enabled()),
        "warn_only": bool(torch.is_deterministic_algorithms_warn_only_enabled()),
        "cudnn.deterministic": bool(torch.backends.cudnn.deterministic),
        "cudnn.benchmark": bool(torch.backends.cudnn.benchmark),
    }


class PostImportHook:
    """A ``sys.meta_path`` finder that runs a callback right after a module is first imported."""

    def __init__(self) -> None:
        self.callbacks: dict[str, Any] = {}

    def add(self, name: str, fn: Any) -> None:
        self.callbacks[name] = fn
        if self not in sys.meta_path:
            sys.meta_path.insert(0, self)

    def clear(self) -> None:
        self.callbacks.clear()
        if self in sys.meta_path:
            sys.meta_path.remove(self)

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        fn = self.callbacks.pop(fullname, None)
        if fn is None:
            return None
        if not self.callbacks:
            self.clear()
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
                loader = spec.loader
                original = loader.exec_module

                def exec_module(module: Any, _orig: Any = original, _fn: Any = fn, _loader: Any = loader) -> None:
                    _loader.exec_module = _orig
                    _orig(module)
                    _fn(module)

                loader.exec_module = exec_module
                return spec
        return None


_hook = PostImportHook()


def clear_import_hooks() -> None:
    """Drop the pending seed-on-import hooks (an in-process trial calls this when it ends)."""
    _hook.clear()


def _set_torch_threads(torch: Any, threads: int | None) -> None:
    if threads is not None and torch.get_num_threads() != int(threads):
        torch.set_num_threads(int(threads))


def _set_torch_flags(torch: Any, *, strict: bool, applied: dict[str, Any]) -> None:
    # Set every flag explicitly: a process that ran a strict trial must not leak it into the next.
    # (Only call the setter on a change: its first call imports torch._dynamo, about 5 s.)
    if torch.are_deterministic_algorithms_enabled() != strict:
        torch.use_deterministic_algorithms(strict)
    torch.backends.cudnn.deterministic = strict
    torch.backends.cudnn.benchmark = False
    applied["torch_flags"] = torch_flags()


def worker_init_fn(worker_id: int) -> None:
    """``worker_init_fn`` for ``torch.utils.data.DataLoader``: give each worker its own python and
    numpy streams, derived from the loader's base seed and the worker id.

    Without per-worker seeds, workers forked from one process repeat the same random augmentation
    stream. PyTorch gives worker ``i`` the torch seed ``base_seed + i``; this derives python's and
    numpy's seeds from ``(base_seed, i)`` with :class:`numpy.random.SeedSequence`, so the streams are
    decorrelated, and the same ``base_seed`` (see :func:`dataloader_generator`) gives the same streams
    on a rerun. Use both together::

        DataLoader(ds, num_workers=4, worker_init_fn=ablate.trials.seeding.worker_init_fn,
                   generator=ablate.trials.seeding.dataloader_generator(cfg.seed))

    Parameters
    ----------
    worker_id : int
        Passed by the DataLoader (0 .. num_workers-1).
    """
    import numpy as np  # noqa: PLC0415  # lazy: numpy off this module's import
    import torch  # noqa: PLC0415  # lazy: torch only in a trial that uses it

    base_seed = (torch.initial_seed() - worker_id) % 2**64  # torch gives each worker base_seed + worker_id
    py_seed, np_seed = np.random.SeedSequence([base_seed, worker_id]).generate_state(2, dtype=np.uint64)
    random.seed(int(py_seed))
    np.random.seed(int(np_seed) % 2**32)


def dataloader_generator(seed: int) -> Any:
    """A ``torch.Generator`` seeded from ``seed``, for a DataLoader's shuffling and worker base seed.

    A dedicated generator keeps the data order independent of how many random numbers the model
    drew before (a wider layer draws more at initialisation): arms that differ in the model still
    see the same batches at the same seed.

    Parameters
    ----------
    seed : int
        The trial seed (``cfg.seed``).

    Returns
    -------
    torch.Generator
    """
    import torch  # noqa: PLC0415  # lazy: torch only in a trial that uses it

    g = torch.Generator()
    g.manual_seed(int(seed))
    return g
