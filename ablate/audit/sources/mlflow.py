"""MLflow tracking stores (a sqlite ``mlflow.db``, a file store ``mlruns/``, or a tracking URI), through the
``mlflow`` client, read-only: params (the config), tags (``mlflow.source.git.commit``, ``mlflow.source.name``),
each metric's full history, and the run's status.

The client writes into a store it opens (it creates MLflow's tables in a sqlite file that lacks them, migrates an
older schema, adds the default experiment; a file store gets a ``.trash`` dir), so a sqlite file is first checked
for MLflow's tables with sqlite itself, opened read-only, and handed to the client as a read-only URI
(``mode=ro``): the audit never modifies its input. A file store lacking what the client would create is refused.

MLflow records the commit when the run started from a script in a git repo; not the libraries, the hardware,
or the data unless the app logged them (``mlflow.log_input`` datasets are read as data versions).
"""

from __future__ import annotations

import ast
import json
import logging
import os
import re
import sqlite3
from pathlib import Path
from typing import Any
from urllib.parse import quote

from ablate.audit.runs import Run, commit_id, git_toplevel
from ablate.audit.sources.base import Selection, progress
from ablate.errors import ConfigError

#: Tables every MLflow store has (its schema since MLflow 1.x); a sqlite file without them is no MLflow store.
TABLES = {"experiments", "runs", "metrics", "params", "tags", "alembic_version"}
_WHERE = "ablate audit SOURCE"


def _sqlite_path(source: str) -> Path | None:
    """The sqlite file ``source`` names (a path, or a ``sqlite:///`` URI), or None for another kind of store."""
    if source.startswith("sqlite:"):
        rest = source.split(":///", 1)[1] if ":///" in source else ""
        return Path(rest.split("?", 1)[0]) if rest else None
    if "://" in source or source.startswith("file:"):
        return None
    p = Path(source)
    return p if p.is_file() else None


def _check_sqlite(path: Path) -> None:
    """Refuse a sqlite file that is not an MLflow store, reading it with sqlite itself, read-only."""
    try:
        con = sqlite3.connect(f"file:{quote(str(path.absolute()))}?mode=ro", uri=True)
        try:
            tables = {t for (t,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        finally:
            con.close()
    except sqlite3.Error as exc:
        raise ConfigError(f"{path} could not be read as an MLflow store (sqlite: {exc})", where=_WHERE,
                          fix="give the store the runs were logged to (the MLFLOW_TRACKING_URI they used)") from None
    lacking = sorted(TABLES - tables)
    if lacking:
        raise ConfigError(f"{path} is a sqlite file but no MLflow store (it lacks MLflow's tables: "
                          f"{', '.join(lacking)}); ablate audit does not let MLflow's client create them in it",
                          where=_WHERE, fix="give the store the runs were logged to (the MLFLOW_TRACKING_URI they "
                          "used)")


def tracking_uri(source: str) -> str:
    """A read-only tracking URI for ``source`` (a sqlite file or URI: checked for MLflow's tables first; a file
    store: checked to hold what the client would create; a server URI as it is).

    Raises
    ------
    ConfigError
        A sqlite file that is no MLflow store; a file store the client would write into.
    """
    db = _sqlite_path(source)
    if db is not None:
        if not db.is_file():
            raise ConfigError(f"{db} does not exist", where=_WHERE, fix="give the store the runs were logged to")
        _check_sqlite(db)
        return f"sqlite+pysqlite:///file:{quote(str(db.absolute()))}?mode=ro&uri=true"
    if "://" in source or source.startswith("file:"):
        return source
    p = Path(source).absolute()
    if not (p / ".trash").is_dir():
        raise ConfigError(f"{source} lacks the .trash/ dir every MLflow file store has (MLflow's client would "
                          "create it: ablate audit writes nothing into a store)", where=_WHERE,
                          fix=f"audit a copy (`cp -r {source} /tmp/store && ablate audit /tmp/store`), or give the "
                          "store the runs were logged to")
    return p.as_uri()


#: The text ``str()`` gives an int or a float (``repr``: ``1e-05``, ``0.1``, ``inf``, ``nan``); an int never has a
#: leading 0 (``0777`` is text, as MLflow logged it).
_INT = re.compile(r"[-+]?(?:0|[1-9][0-9]*)")
_FLOAT = re.compile(r"[-+]?(?:(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?|[0-9]+[eE][-+]?[0-9]+|inf|nan)")
_WORDS = {"True": True, "False": False, "None": None, "true": True, "false": False, "null": None}


def _value(text: str) -> Any:
    """A param's value from the text MLflow keeps (``str(value)`` of what was logged): a number's or a bool's text
    is that number or bool, a list's or dict's (JSON or Python's repr) that list or dict; any other text stays as
    logged. Never YAML, which changed recorded text: ``1:30`` to 90 (base 60), ``0777`` to 511 (octal),
    ``2026-01-01`` to a date, ``x\\n# a`` to ``x`` (the rest a comment)."""
    if text in _WORDS:
        return _WORDS[text]
    if _INT.fullmatch(text):
        return int(text)
    if _FLOAT.fullmatch(text):
        return float(text)
    if text[:1] in ("[", "{") and len(text) <= 100_000:
        try:
            v = json.loads(text)
        except ValueError:
            try:
                v = ast.literal_eval(text)  # Python's repr of a list or dict: literals only, nothing run
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                return text
        try:
            json.dumps(v, allow_nan=True)
        except (TypeError, ValueError, RecursionError):  # a set, bytes or complex inside: keep the text
            return text
        return v if isinstance(v, list | dict) else text
    return text


def _client(source: str) -> tuple[Any, list[Any]]:
    logging.getLogger("mlflow").setLevel(logging.ERROR)
    logging.getLogger("alembic").setLevel(logging.ERROR)
    try:
        from mlflow.tracking import MlflowClient  # noqa: PLC0415  # lazy: mlflow is heavy and an optional extra
    except ImportError:
        raise ConfigError("reading an MLflow store needs the mlflow package", where=_WHERE,
                          fix="pip install 'hydra-ablate[mlflow]'") from None
    uri = tracking_uri(source)
    allow = os.environ.get("MLFLOW_ALLOW_FILE_STORE")
    try:
        if uri.startswith("file:"):  # a file store, read only: MLflow 3 refuses one unless this is set
            os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"
        client = MlflowClient(tracking_uri=uri)
        return client, client.search_experiments()
    except Exception as exc:  # a newer or older schema (the client would migrate it), a server that does not answer
        first = (str(exc).splitlines() or [""])[0][:200]
        fix = ("give the store the runs were logged to (the MLFLOW_TRACKING_URI they used)" if "readonly" not in first
               else "the store's schema is another MLflow version's, which the client would migrate: audit a copy "
               f"with this MLflow (`cp {source} /tmp/copy.db && ablate audit /tmp/copy.db`)")
        raise ConfigError(f"{source} could not be read as an MLflow store ({type(exc).__name__}: {first})",
                          where=_WHERE, fix=fix) from None
    finally:
        if allow is None:
            os.environ.pop("MLFLOW_ALLOW_FILE_STORE", None)
        else:
            os.environ["MLFLOW_ALLOW_FILE_STORE"] = allow


def _run(client: Any, r: Any, experiment: str, here: Path | None, store_repo: str | None) -> Run:
    tags = dict(r.data.tags)
    metrics = {k: [(m.step, float(m.value)) for m in sorted(client.get_metric_history(r.info.run_id, k),
                                                              key=lambda m: (m.step, m.timestamp))]
               for k in r.data.metrics}
    context: dict[str, Any] = {}
    data = {ds.dataset.name: ds.dataset.digest
            for ds in getattr(getattr(r, "inputs", None), "dataset_inputs", None) or []}
    if data:
        context["data"] = data
    source_name = tags.get("mlflow.source.name")
    if source_name:
        context["program"] = source_name
    repo = git_toplevel(os.path.dirname(source_name)) if source_name and os.path.isabs(source_name) else None
    recorded = tags.get("mlflow.source.git.commit")
    commit = commit_id(recorded)
    if recorded and commit is None:
        context["notes"] = [f"MLflow run {r.info.run_id} records the commit {recorded[:60]!r}, which is not a commit "
                            "id: taken as not recorded"]
    name = r.info.run_name or tags.get("mlflow.runName")
    return Run(source="mlflow", id=r.info.run_id, config={k: _value(v) for k, v in r.data.params.items()},
               metrics=metrics, commit=commit, commit_how="recorded by MLflow" if commit else "", context=context,
               started=r.info.start_time / 1000 if r.info.start_time else None, repo=repo or store_repo,
               status="finished", names={name} if name else set(), tags=tags, experiment=experiment)


def read(source: str, left_out: list[str] | None = None, selection: Selection | None = None) -> list[Run]:
    """Every finished run of the store's experiments (those ``selection`` names); the others are named in
    ``left_out``. Runs outside the selection are left before their metric history is read."""
    client, experiments = _client(source)
    selection = selection or Selection()
    if selection.experiments:
        experiments = [e for e in experiments if e.name in selection.experiments
                       or e.experiment_id in selection.experiments]
    names = {e.experiment_id: e.name for e in experiments}
    try:
        found = [r for e in experiments for r in client.search_runs([e.experiment_id], max_results=50000)]
    except Exception as exc:
        raise ConfigError(f"{source} could not be read as an MLflow store ({type(exc).__name__}: "
                          f"{(str(exc).splitlines() or [''])[0][:200]})", where=_WHERE,
                          fix="give the store the runs were logged to (the MLFLOW_TRACKING_URI they used)") from None
    here = None if "://" in source or source.startswith(("file:", "sqlite:")) else Path(source).absolute()
    store_repo = git_toplevel(here if here.is_dir() else here.parent) if here else None  # a store kept in the repo
    say = progress(source)
    runs = []
    for i, r in enumerate(found, 1):
        say(i, len(found))
        head = Run(source="mlflow", id=r.info.run_id, config={}, metrics={}, experiment=names[r.info.experiment_id],
                   names={r.info.run_name} if r.info.run_name else set(), tags=dict(r.data.tags),
                   started=r.info.start_time / 1000 if r.info.start_time else None)
        if not selection.keeps(head):
            continue
        if r.info.status != "FINISHED":
            if left_out is not None:
                left_out.append(f"MLflow run {r.info.run_id}: {r.info.status.lower()}")
            continue
        runs.append(_run(client, r, names[r.info.experiment_id], here, store_repo))
    return runs
