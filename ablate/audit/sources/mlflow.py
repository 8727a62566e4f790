"""MLflow tracking stores (a sqlite ``mlflow.db``, a file store ``mlruns/``, or a tracking URI), through the
``mlflow`` client: params (the config), tags (``mlflow.source.git.commit``, ``mlflow.source.name``), and each
metric's full history.

MLflow records the commit when the run started from a script in a git repo; not the libraries, the hardware,
or the data unless the app logged them (``mlflow.log_input`` datasets are read as data versions).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ablate.audit.runs import Run, git_toplevel
from ablate.errors import ConfigError


def tracking_uri(source: str) -> str:
    """The tracking URI for ``source`` (a path to ``mlflow.db`` or ``mlruns/``, or a URI given as it is)."""
    if "://" in source or source.startswith("file:"):
        return source
    p = Path(source).absolute()
    return f"sqlite:///{p}" if p.is_file() else p.as_uri()


def _value(text: str) -> Any:
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def read(source: str, left_out: list[str] | None = None) -> list[Run]:
    """Every finished run of every experiment in the store; the others are named in ``left_out``."""
    import logging

    logging.getLogger("mlflow").setLevel(logging.ERROR)
    logging.getLogger("alembic").setLevel(logging.ERROR)
    try:
        from mlflow.tracking import MlflowClient
    except ImportError:
        raise ConfigError("reading an MLflow store needs the mlflow package", where="ablate audit SOURCE",
                          fix="pip install 'hydra-ablate[mlflow]'") from None
    uri = tracking_uri(source)
    try:
        client = MlflowClient(tracking_uri=uri)
        experiments = client.search_experiments()
        found = [r for e in experiments for r in client.search_runs([e.experiment_id], max_results=50000)]
    except Exception as exc:  # not an MLflow store, a newer schema, a server that does not answer
        raise ConfigError(f"{source} could not be read as an MLflow store ({type(exc).__name__}: "
                          f"{str(exc).splitlines()[0][:200]})", where="ablate audit SOURCE",
                          fix="give the store the runs were logged to (the MLFLOW_TRACKING_URI they used)") from None
    here = None if "://" in source or source.startswith("file:") else Path(source).absolute()
    store_repo = git_toplevel(here if here.is_dir() else here.parent) if here else None  # a store kept in the repo
    runs = []
    for r in found:
        if r.info.status != "FINISHED":
            if left_out is not None:
                left_out.append(f"MLflow run {r.info.run_id}: {r.info.status.lower()}")
            continue
        tags = dict(r.data.tags)
        metrics = {k: [(m.step, float(m.value)) for m in sorted(client.get_metric_history(r.info.run_id, k),
                                                                  key=lambda m: (m.step, m.timestamp))]
                   for k in r.data.metrics}
        context: dict[str, Any] = {}
        data = {}
        for ds in getattr(getattr(r, "inputs", None), "dataset_inputs", None) or []:
            data[ds.dataset.name] = ds.dataset.digest
        if data:
            context["data"] = data
        if tags.get("mlflow.source.name"):
            context["program"] = tags["mlflow.source.name"]
        source_name = tags.get("mlflow.source.name")
        repo = git_toplevel(os.path.dirname(source_name)) if source_name and os.path.isabs(source_name) else None
        repo = repo or store_repo
        commit = tags.get("mlflow.source.git.commit")
        runs.append(Run(source="mlflow", id=r.info.run_id, config={k: _value(v) for k, v in r.data.params.items()},
                        metrics=metrics, commit=commit, commit_how="recorded by MLflow" if commit else "",
                        context=context, started=r.info.start_time / 1000 if r.info.start_time else None,
                        repo=repo))
    return runs
