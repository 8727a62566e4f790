"""Seeds and determinism modes, applied inside the trial's process before the task runs.

Modes (``determinism=``):

``off``
    Nothing is seeded. Runs differ even at the same seed.
``seeded`` (default)
    Weak reproducibility: python ``random``, numpy's global generator, and torch's CPU and CUDA
    generators are seeded from the trial seed, and ``PYTHONHASHSEED`` is set for child processes.
    The same seed, code and data give the same final metrics on the same hardware and threads.
``strict``
    Strong reproducibility: ``seeded`` plus ``torch.use_deterministic_algorithms(True)``,
    ``CUBLAS_WORKSPACE_CONFIG=:4096:8`` (set before CUDA initialises), ``cudnn.deterministic=True``
    and ``cudnn.benchmark=False``: every step is bitwise identical. Costs 2-5x on some GPU ops
    (scatter/index add, embedding-bag, pooling backward ...); for bisecting a divergence.

numpy and torch are never imported here: they are seeded when the task imports them, so a task
without torch pays nothing for it.
"""

from __future__ import annotations

import importlib.util
import os
import random
import sys
from typing import Any

from ablate.errors import ConfigError

MODES = ("off", "seeded", "strict")
#: Environment variables that change numerics; recorded in every manifest.
NUMERIC_ENV_VARS = (
    "CUBLAS_WORKSPACE_CONFIG", "PYTHONHASHSEED", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS", "VECLIB_MAXIMUM_THREADS", "CUDA_VISIBLE_DEVICES",
    "NVIDIA_TF32_OVERRIDE", "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE", "CUDA_LAUNCH_BLOCKING",
    "CUBLAS_WORKSPACE_CONFIG", "XLA_FLAGS", "TF_DETERMINISTIC_OPS", "KMP_DETERMINISTIC_REDUCTION",
)
STRICT_CUBLAS = ":4096:8"
MAX_SEED = 2**32 - 1


def check_mode(mode: Any) -> str:
    """Validate a determinism mode name.

    Raises
    ------
    ConfigError
        When ``mode`` is not one of ``off``, ``seeded``, ``strict``.
    """
    if mode is False:  # YAML 1.1 reads an unquoted `off` as false
        mode = "off"
    if mode not in MODES:
        raise ConfigError(f"must be one of {', '.join(MODES)}, got {mode!r}", where="determinism",
                          fix="e.g. `determinism=seeded`")
    return str(mode)


def environment_for(mode: str, seed: int) -> dict[str, str]:
    """Environment variables a trial process needs for ``mode``, to set before Python or CUDA start.

    Returns a dict to merge into the child's environment (``PYTHONHASHSEED`` for ``seeded``/``strict``,
    plus ``CUBLAS_WORKSPACE_CONFIG`` for ``strict``).
    """
    env: dict[str, str] = {}
    if mode in ("seeded", "strict"):
        env["PYTHONHASHSEED"] = str(seed % (MAX_SEED + 1))
    if mode == "strict":
        env["CUBLAS_WORKSPACE_CONFIG"] = os.environ.get("CUBLAS_WORKSPACE_CONFIG") or STRICT_CUBLAS
    return env


def seed_everything(seed: int, mode: str = "seeded") -> dict[str, Any]:
    """Seed python, numpy and torch from ``seed`` and apply the determinism ``mode``.

    Call it in the trial's process only (it sets process-global state), before the task runs.
    numpy and torch are seeded now when already imported (a task module that imports them at the
    top), and otherwise the moment they are first imported (a post-import hook), so a task that does
    not use torch never pays its 1.6 s import, and a task that imports it lazily is still seeded.

    Parameters
    ----------
    seed : int
        The trial seed, 0 <= seed < 2**32.
    mode : {"off", "seeded", "strict"}

    Returns
    -------
    dict
        What was applied (recorded in the manifest): mode, seed, the generators seeded now
        (``seeded``) and those that will be seeded on import (``on_import``), and the torch flags.

    Raises
    ------
    ConfigError
        For an unknown mode or a seed out of range.
    """
    mode = check_mode(mode)
    if not (0 <= int(seed) <= MAX_SEED):
        raise ConfigError(f"must be in [0, {MAX_SEED}], got {seed}", where="seed")
    seed = int(seed)
    applied: dict[str, Any] = {"mode": mode, "seed": seed, "seeded": [], "on_import": []}
    for k, v in environment_for(mode, seed).items():
        os.environ.setdefault(k, v)
    _hook.clear()
    if mode == "off":
        if "torch" in sys.modules:
            _set_torch_flags(sys.modules["torch"], strict=False, applied=applied)
        return applied
    random.seed(seed)
    applied["seeded"].append("random")

    def seed_numpy(np: Any) -> None:
        np.random.seed(seed)

    def seed_torch(torch: Any) -> None:
        torch.manual_seed(seed)  # seeds the CPU and every CUDA device's generator
        _set_torch_flags(torch, strict=mode == "strict", applied=applied)

    for name, fn in (("numpy", seed_numpy), ("torch", seed_torch)):
        if name in sys.modules:
            fn(sys.modules[name])
            applied["seeded"].append(name)
        elif importlib.util.find_spec(name) is not None:
            _hook.add(name, fn)
            applied["on_import"].append(name)
    return applied


class _PostImportHook:
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


_hook = _PostImportHook()


def clear_import_hooks() -> None:
    """Drop the pending seed-on-import hooks (an in-process trial calls this when it ends)."""
    _hook.clear()


def _set_torch_flags(torch: Any, *, strict: bool, applied: dict[str, Any]) -> None:
    # Set every flag explicitly: a process that ran a strict trial must not leak it into the next.
    # (Only call the setter on a change: its first call imports torch._dynamo, about 5 s.)
    if torch.are_deterministic_algorithms_enabled() != strict:
        torch.use_deterministic_algorithms(strict)
    torch.backends.cudnn.deterministic = strict
    torch.backends.cudnn.benchmark = False
    applied["torch_flags"] = {
        "use_deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
        "cudnn.deterministic": bool(torch.backends.cudnn.deterministic),
        "cudnn.benchmark": bool(torch.backends.cudnn.benchmark),
    }


def worker_init_fn(worker_id: int) -> None:
    """``worker_init_fn`` for ``torch.utils.data.DataLoader``: seed each worker's python and numpy
    generators from torch's per-worker seed, so workers do not repeat one augmentation stream.

    Use together with :func:`dataloader_generator`::

        DataLoader(ds, num_workers=4, worker_init_fn=ablate.seeding.worker_init_fn,
                   generator=ablate.seeding.dataloader_generator(cfg.seed))
    """
    import numpy as np
    import torch

    wseed = torch.initial_seed() % 2**32  # torch already gives each worker base_seed + worker_id
    random.seed(wseed)
    np.random.seed(wseed)


def dataloader_generator(seed: int) -> Any:
    """A ``torch.Generator`` seeded from ``seed`` for a DataLoader's shuffling and worker base seeds."""
    import torch

    g = torch.Generator()
    g.manual_seed(int(seed))
    return g
