"""``tracker=mlflow``: one MLflow run per trial, nested under one parent run per ablation.

Each trial run has the trial's resolved config (flattened) as params, its metrics (plus
``ablate.duration_s``), the tags of :class:`~ablate.trackers.base.TrialRecord` (ablation id, arm,
value, seed, attempt, status, commit, dirty, data hashes), and the status FINISHED (ok), KILLED or
FAILED. The parent run carries the ablation's tags, the variable and seeds as params, the verdict
word per treatment as ``ablate.verdict.<arm>`` tags, the verdict's numbers as metrics, and
verdict.md, verdict.json, results.csv, per_seed.csv, ablation.yaml and the plots as artifacts.

Logging again (``ablate track DIR``, or after ``ablate resume``) reuses the parent run and adds only
trials not logged yet (matched on arm, seed and attempt). Uses ``MlflowClient`` only (no global
active run); credentials stay where MLflow reads them (``MLFLOW_TRACKING_TOKEN`` ...), never copied.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar

from ablate.errors import ConfigError
from ablate.trackers.base import AblationRecord, Tracker, TrialRecord, iso_to_ms

_BAD_KEY_CHARS = re.compile(r"[^A-Za-z0-9_\-. :/]")


def _key(k: str) -> str:
    """A name MLflow accepts for a param, metric or tag (alphanumerics, ``_-. :/``)."""
    return _BAD_KEY_CHARS.sub("_", k)[:250]


def _chunks(items: Sequence[Any], n: int) -> Iterable[Sequence[Any]]:
    for i in range(0, len(items), n):
        yield items[i:i + n]


class MlflowTracker(Tracker):
    """Log ablations to MLflow.

    Parameters
    ----------
    tracking_uri : str or None
        Where MLflow stores runs (``sqlite:///mlflow.db``, ``http://host:5000`` ...); None uses
        MLflow's default (``MLFLOW_TRACKING_URI``, else its local default).
    experiment : str
        The MLflow experiment, created when missing.
    artifact_location : str or None
        Artifact root for a newly created experiment (None: the store's default; a local store puts
        it under the current directory, so keep it git-ignored).
    """

    name = "mlflow"
    OPTIONS: ClassVar[dict[str, Any]] = {"tracking_uri": None, "experiment": "ablate", "artifact_location": None}

    def __init__(self, tracking_uri: str | None = None, experiment: str = "ablate",
                 artifact_location: str | None = None) -> None:
        for k, v in (("tracking_uri", tracking_uri), ("artifact_location", artifact_location)):
            if v is not None and not isinstance(v, str):
                raise ConfigError(f"must be a string or null, got {v!r}", where=f"tracker.{k}")
        if tracking_uri and re.search(r"://[^/@]*:[^/@]*@", tracking_uri):
            raise ConfigError("holds a password, and ablate records its settings in ablation.yaml",
                              where="tracker.tracking_uri",
                              fix="drop it from the URI and set MLFLOW_TRACKING_USERNAME / MLFLOW_TRACKING_PASSWORD "
                              "(or MLFLOW_TRACKING_TOKEN) in the environment, where MLflow reads them")
        if not isinstance(experiment, str) or not experiment:
            raise ConfigError(f"must be a non-empty string, got {experiment!r}", where="tracker.experiment")
        self.tracking_uri = tracking_uri
        self.experiment = experiment
        self.artifact_location = artifact_location

    def log(self, ablation: AblationRecord) -> str:
        try:
            from mlflow.entities import Metric, Param, RunTag
            from mlflow.tracking import MlflowClient
        except ImportError as exc:
            raise ConfigError(f"tracker=mlflow needs the mlflow library ({exc})", where="tracker",
                              fix="pip install 'ablate[mlflow]'") from None
        try:
            from mlflow.utils.validation import MAX_PARAM_VAL_LENGTH as max_param
        except ImportError:  # pragma: no cover - older MLflow
            max_param = 500
        client = MlflowClient(tracking_uri=self.tracking_uri)
        exp = client.get_experiment_by_name(self.experiment)
        exp_id = exp.experiment_id if exp is not None else client.create_experiment(
            self.experiment, artifact_location=self.artifact_location)
        existing = self._runs_of(client, exp_id, ablation.ablation_id)
        parent = next((r for r in existing if r.data.tags.get("ablate.role") == "ablation"), None)
        if parent is None:
            parent = client.create_run(
                exp_id, start_time=iso_to_ms(ablation.created_at), run_name=f"ablate {ablation.variable.get('name')}",
                tags={_key(k): v for k, v in {**ablation.tags, "ablate.role": "ablation"}.items()})
            params = {"variable.key": ablation.variable.get("key"), "variable.values": ablation.variable.get("values"),
                      "seeds": ablation.seeds, "metric": ablation.metric, "goal": ablation.goal}
            client.log_batch(parent.info.run_id, params=[Param(k, str(v)[:max_param]) for k, v in params.items()])
        parent_id = parent.info.run_id
        done = {(r.data.tags.get("ablate.arm"), r.data.tags.get("ablate.seed"), r.data.tags.get("ablate.attempt"))
                for r in existing if r.data.tags.get("ablate.role") == "trial"}
        new = [t for t in ablation.trials if (t.arm, str(t.seed), str(t.attempt)) not in done]
        for t in new:
            self._log_trial(client, exp_id, parent_id, t, Metric, Param, RunTag, max_param)
        now = int(time.time() * 1000)
        tags = [RunTag(_key(f"ablate.verdict.{arm}"), word) for arm, word in ablation.verdict_words.items()]
        tags.append(RunTag("ablate.invalid", "true" if ablation.verdict.get("invalid") else "false"))
        metrics = [Metric(_key(k), v, now, 0) for k, v in ablation.summary_metrics().items()]
        client.log_batch(parent_id, metrics=metrics[:1000], tags=tags[:100])
        for path in ablation.artifacts:
            client.log_artifact(parent_id, str(path))
        client.set_terminated(parent_id, status="FINISHED")
        where = self.tracking_uri or client.tracking_uri
        return (f"mlflow: {len(new)} trial run(s) logged ({len(ablation.trials) - len(new)} already there) under "
                f"parent run {parent_id}, experiment {self.experiment!r}, {where}")

    @staticmethod
    def _runs_of(client: Any, exp_id: str, ablation_id: str) -> list[Any]:
        runs: list[Any] = []
        token = None
        while True:
            page = client.search_runs([exp_id], filter_string=f"tags.`ablate.ablation_id` = '{ablation_id}'",
                                      max_results=1000, page_token=token)
            runs.extend(page)
            token = page.token
            if not token:
                return runs

    @staticmethod
    def _log_trial(client: Any, exp_id: str, parent_id: str, t: TrialRecord, Metric: Any, Param: Any,
                   RunTag: Any, max_param: int) -> None:
        tags = {_key(k): v for k, v in t.tags.items()}
        tags["mlflow.parentRunId"] = parent_id
        if t.error:
            tags["ablate.error"] = t.error[:5000]
        start = iso_to_ms(t.started_at)
        end = iso_to_ms(t.finished_at) or int(time.time() * 1000)
        run = client.create_run(exp_id, start_time=start, tags=tags, run_name=f"{t.arm} seed={t.seed}")
        rid = run.info.run_id
        params = [Param(_key(k), str(v)[:max_param]) for k, v in t.params.items()]
        metrics = [Metric(_key(k), v, end, 0) for k, v in t.metrics.items()]
        if t.duration_s is not None:
            metrics.append(Metric("ablate.duration_s", float(t.duration_s), end, 0))
        for chunk in _chunks(params, 100):
            client.log_batch(rid, params=list(chunk))
        for chunk in _chunks(metrics, 1000):
            client.log_batch(rid, metrics=list(chunk))
        status = {"ok": "FINISHED", "killed": "KILLED"}.get(t.status, "FAILED")
        client.set_terminated(rid, status=status, end_time=end)
