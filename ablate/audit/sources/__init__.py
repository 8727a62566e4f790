"""Readers of runs ablate did not launch, each through its own library: Hydra run dirs (YAML as Hydra wrote it),
MLflow tracking stores (the ``mlflow`` client, read-only), W&B offline run dirs (``wandb``'s protobuf records),
TensorBoard event dirs (TensorBoard's ``EventAccumulator``, hparams included), DVC experiments (``dvc exp show
--json``) and ablate sweep dirs (:mod:`ablate.record`). :func:`read_source` picks the reader from what is at
the path, keeps the runs a :class:`Selection` names, and leaves out ablate's own trials (saying so).

Everything read is data: a value in a record never becomes an option to a command, is never resolved in the
auditor's environment, and no store or dir is written to.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from ablate.audit.runs import Run
from ablate.audit.sources.base import PROGRESS_EVERY, SELECTS, Selection, ablate_trial, progress
from ablate.errors import ConfigError

__all__ = ["KINDS", "PROGRESS_EVERY", "SELECTS", "Selection", "ablate_trial", "kind_of", "progress", "read_source"]

#: The kinds of source, in the order they are recognised.
KINDS = ("ablate", "hydra", "mlflow", "wandb", "tensorboard", "dvc")
def kind_of(source: str) -> str:
    """Which reader ``source`` (a path or a tracking URI) is for.

    Raises
    ------
    ConfigError
        When nothing readable is there (naming what each source kind looks for).
    """
    if source.startswith(("sqlite:", "file:", "http:", "https:", "databricks")):
        return "mlflow"
    p = Path(source)
    if not p.exists():
        raise ConfigError(f"{source} does not exist", where="ablate audit SOURCE",
                          fix="give a Hydra run or multirun dir, an MLflow store (mlflow.db, mlruns/ or a "
                          "tracking URI), a W&B run dir (wandb/ or wandb/offline-run-*), a TensorBoard log dir, a "
                          "DVC project (its experiments) or an ablate sweep dir")
    if not os.access(p, os.R_OK) or (p.is_dir() and not os.access(p, os.X_OK)):
        raise ConfigError(f"{source} is not readable", where="ablate audit SOURCE",
                          fix=f"make it readable (`chmod -R u+rX {source}`) or run as its owner")
    if p.is_file():
        with open(p, "rb") as fh:
            head = fh.read(16)
        if p.suffix == ".db" or head == b"SQLite format 3\x00":
            return "mlflow"
        if p.suffix == ".wandb":
            return "wandb"
        if p.suffix == ".json":
            return "dvc"
    else:
        if (p / "ablation.yaml").is_file():
            return "ablate"
        if p.name == "wandb" or p.name.startswith(("offline-run-", "run-")) or any(p.glob("run-*.wandb")):
            return "wandb"
        if p.name == "mlruns" or (p / "0" / "meta.yaml").is_file() or (p / ".trash").is_dir():
            return "mlflow"
        if (p / ".dvc").is_dir() and (p / "dvc.yaml").is_file():
            return "dvc"
        if (p / ".hydra").is_dir() or (p / "multirun.yaml").is_file() or any(p.glob("**/.hydra/config.yaml")):
            return "hydra"
        if any(p.glob("**/events.out.tfevents.*")):
            return "tensorboard"
    raise ConfigError(f"{source} is no run source ablate audit reads", where="ablate audit SOURCE",
                      fix="give a Hydra run or multirun dir (with .hydra/), an MLflow store (mlflow.db, mlruns/), "
                      "a W&B run dir (wandb/, with run-*.wandb files), a TensorBoard log dir (events.out.tfevents.*), "
                      "a DVC project or `dvc exp show --json` output, or an ablate sweep dir (with ablation.yaml)")


def _reader(kind: str) -> Callable[..., list[Run]]:
    # lazy: each reader loads its tracker's library (mlflow, wandb, tensorboard, dvc) only for its kind of source
    if kind == "hydra":
        from ablate.audit.sources.hydra import read
    elif kind == "mlflow":
        from ablate.audit.sources.mlflow import read
    elif kind == "wandb":
        from ablate.audit.sources.wandb import read
    elif kind == "tensorboard":
        from ablate.audit.sources.tensorboard import read
    elif kind == "dvc":
        from ablate.audit.sources.dvcexp import read
    else:
        from ablate.audit.sources.sweep import read
    return read


def read_source(source: str, left_out: list[str] | None = None, selection: Selection | None = None) -> list[Run]:
    """The runs at ``source``, read by the reader for its kind (:func:`kind_of`), as ``selection`` selects them;
    runs that did not finish, and trials ablate launched, are named in ``left_out``.

    Raises
    ------
    ConfigError
        When the source cannot be read, holds no run, or ``selection`` asks what its kind does not record.
    """
    kind = kind_of(source)
    selection = selection or Selection()
    selection.check(source, kind)
    mine: list[str] = []
    runs = []
    for r in _reader(kind)(source, mine, selection):
        if not selection.keeps(r):
            continue
        why = ablate_trial(r) if kind != "ablate" else None
        if why:
            mine.append(f"{r.source} run {r.id}: {why}")
            continue
        r.origin = source
        runs.append(r)
    if left_out is not None:
        left_out += mine
    if not runs:
        chosen = " selected" if selection != Selection() else ""
        raise ConfigError(f"{source} ({kind}) holds no finished{chosen} run"
                          + (f" ({len(mine)} left out: {'; '.join(mine[:3])}{' ...' if len(mine) > 3 else ''})"
                             if mine else ""), where="ablate audit SOURCE",
                          fix="give the dir or store the runs were logged to (runs still running or failed are "
                          "left out)" + (", or select runs it holds" if chosen else ""))
    return runs
