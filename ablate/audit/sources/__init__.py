"""Readers of runs ablate did not launch, each through its own library: Hydra run dirs (OmegaConf), MLflow
tracking stores (the ``mlflow`` client), W&B offline run dirs (``wandb``'s protobuf records) and ablate sweep
dirs (:mod:`ablate.record`). :func:`read_source` picks the reader from what is at the path.

Not read (yet): TensorBoard hparams and ``dvc exp show --json``; such a path is refused with a line saying so.
"""

from __future__ import annotations

import os
from pathlib import Path

from ablate.audit.runs import Run
from ablate.errors import ConfigError

#: The kinds of source, in the order they are recognised.
KINDS = ("ablate", "hydra", "mlflow", "wandb")


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
                          "tracking URI), a W&B run dir (wandb/ or wandb/offline-run-*) or an ablate sweep dir")
    if not os.access(p, os.R_OK) or (p.is_dir() and not os.access(p, os.X_OK)):
        raise ConfigError(f"{source} is not readable", where="ablate audit SOURCE",
                          fix=f"make it readable (`chmod -R u+rX {source}`) or run as its owner")
    if p.is_file():
        if p.suffix == ".db" or p.read_bytes()[:16] == b"SQLite format 3\x00":
            return "mlflow"
        if p.suffix == ".wandb":
            return "wandb"
    else:
        if (p / "ablation.yaml").is_file():
            return "ablate"
        if p.name == "wandb" or p.name.startswith(("offline-run-", "run-")) or any(p.glob("run-*.wandb")):
            return "wandb"
        if p.name == "mlruns" or (p / "0" / "meta.yaml").is_file() or (p / ".trash").is_dir():
            return "mlflow"
        if (p / ".hydra").is_dir() or (p / "multirun.yaml").is_file() or any(p.glob("**/.hydra/config.yaml")):
            return "hydra"
        if any(p.glob("**/events.out.tfevents.*")):
            raise ConfigError(f"{source} holds TensorBoard event files, which ablate audit does not read yet",
                              where="ablate audit SOURCE",
                              fix="give the Hydra run dirs the runs wrote them in, or the MLflow / W&B runs they "
                              "logged to")
    raise ConfigError(f"{source} is no run source ablate audit reads", where="ablate audit SOURCE",
                      fix="give a Hydra run or multirun dir (with .hydra/), an MLflow store (mlflow.db, mlruns/), "
                      "a W&B run dir (wandb/, with run-*.wandb files) or an ablate sweep dir (with ablation.yaml)")


def read_source(source: str, left_out: list[str] | None = None) -> list[Run]:
    """The runs at ``source``, read by the reader for its kind (:func:`kind_of`); runs that did not finish
    are named in ``left_out`` (a source kind that records no status, Hydra, has none).

    Raises
    ------
    ConfigError
        When the source cannot be read or holds no run.
    """
    kind = kind_of(source)
    if kind == "hydra":
        from ablate.audit.sources.hydra import read
    elif kind == "mlflow":
        from ablate.audit.sources.mlflow import read
    elif kind == "wandb":
        from ablate.audit.sources.wandb import read
    else:
        from ablate.audit.sources.sweep import read
    mine: list[str] = []
    runs = read(source, mine)
    if left_out is not None:
        left_out += mine
    if not runs:
        raise ConfigError(f"{source} ({kind}) holds no finished run"
                          + (f" ({len(mine)} left out: {'; '.join(mine[:3])}{' ...' if len(mine) > 3 else ''})"
                             if mine else ""), where="ablate audit SOURCE",
                          fix="give the dir or store the runs were logged to (runs still running or failed are "
                          "left out)")
    return runs
