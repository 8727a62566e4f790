"""Pieces of a SLURM submission shared by one-trial-per-job arrays (:mod:`ablate.trials.launchers.slurm.launcher`) and
packed jobs (:mod:`ablate.trials.launchers.slurm.pack`): each array task's environment lines, the cut into
arrays of at most ``MaxArraySize`` tasks, and the submit log line."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Sequence

from ablate.trials import seeding
from ablate.trials.launchers.base import TrialRef


def log(msg: str) -> None:
    """Print one line of the submitter's log to stderr, flushed (the user is waiting on it)."""
    print(msg, file=sys.stderr, flush=True)


def setup_lines(seeds: Sequence[int], *, determinism: str | Sequence[str], cpus_per_task: int,
                user_setup: Sequence[str] = (), threads: int | None = None, hash_seed: str | None = None) -> list[str]:
    """Batch-script lines that give array task ``i`` the environment of the trial at ``seeds[i]``.

    ``determinism`` is one mode for every task, or one per task (when ``determinism`` is the
    ablation's variable, each arm runs under its own mode).

    ``PYTHONHASHSEED`` is ``hash_seed``, the ablation's (:func:`ablate.trials.seeding.ablation_hash_seed`: the
    same in every task and under every launcher); None sets none. Other variables that must be set
    before Python starts (``CUBLAS_WORKSPACE_CONFIG`` under ``determinism=strict``) are picked from a
    bash array by ``SLURM_ARRAY_TASK_ID``; thread counts are the plan's ``threads`` (for plans without
    it: ``cpus_per_task``); the user's own ``setup`` lines come last.
    """
    modes = [determinism] * len(seeds) if isinstance(determinism, str) else list(determinism)
    envs = [{k: v for k, v in seeding.environment_for(m, s).items() if k != "PYTHONHASHSEED"}
            for m, s in zip(modes, seeds, strict=True)]
    lines: list[str] = []
    if hash_seed is not None:
        lines.append(f"export PYTHONHASHSEED={shlex.quote(str(hash_seed))}")
    for key in sorted({k for e in envs for k in e}):
        values = " ".join(shlex.quote(e.get(key, "")) for e in envs)
        lines.append(f'_ablate_v=({values}); export {key}="${{_ablate_v[${{SLURM_ARRAY_TASK_ID:-0}}]}}"')
    for var in seeding.THREAD_ENV_VARS:
        if threads is not None:  # the plan's thread count: the same as under every other launcher
            lines.append(f"export {var}={int(threads)}")
        else:
            lines.append(f"export {var}=${{{var}:-{int(cpus_per_task)}}}")
    lines.extend(str(line) for line in user_setup)
    return lines


def split_arrays(trials: Sequence[TrialRef], max_array_size: int) -> list[list[TrialRef]]:
    """Cut ``trials`` into job arrays of at most ``max_array_size`` tasks (SLURM's ``MaxArraySize``:
    task ids run from 0 to MaxArraySize - 1)."""
    size = max(1, int(max_array_size))
    return [list(trials[i:i + size]) for i in range(0, len(trials), size)]
