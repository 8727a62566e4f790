"""``tracker=mlflow``: one MLflow run per trial, nested under one parent run per ablation.

Each trial run has the trial's resolved config (flattened) as params, its metrics (plus
``ablate.duration_s``), the tags of :class:`~ablate.trackers.base.TrialRecord` (ablation id, arm,
value, seed, attempt, status, commit, dirty, data hashes), and the status FINISHED (ok), KILLED or
FAILED. The parent run carries the ablation's tags, the variable and seeds as params, the verdict
word per treatment as ``ablate.verdict.<arm>`` tags and verdict.md's bottom line as ``ablate.bottom_line.<arm>``
and its Next line as ``ablate.next`` tags, the verdict's numbers as metrics (in the metric's own sign), and
verdict.md, verdict.json, results.csv, per_seed.csv, ablation.yaml and the plots as artifacts.

Logging again (``ablate track DIR``, or after ``ablate resume``) reuses the parent run and adds only
trials not logged yet (matched on arm, seed and attempt); a trial run left unfinished by a failed
attempt is deleted and logged again, so retries never duplicate a trial.

Limits (:mod:`ablate.trackers.limits`): a key MLflow would reject (``acc@1``: characters other than
alphanumerics and ``_-. :/``, or over 250 characters) is logged cleaned up plus ``:<6 hex>`` of its
SHA-256, so ``acc@1`` and ``acc#1`` stay two metrics; a param value over MLflow's length limit is cut
and ends with ``…[cut; sha256 <16 hex>]`` of the full value; two config keys that flatten to one param name
(``opt: {lr}`` beside ``"opt.lr"``) each keep their value, the literal one under its quoted name
(:func:`ablate.trackers.limits.flat_params`), with a warning on the tracker's line. A run with any such change
gets the tag ``ablate.names_changed=true`` and two artifacts: ``ablate/names.json`` (original -> logged names,
the SHA-256 of each cut value, and the names two keys shared) and ``ablate/config.json`` (the full resolved
config).

Uses ``MlflowClient`` only (no global active run); credentials stay where MLflow reads them
(``MLFLOW_TRACKING_TOKEN`` ...), never copied.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar

from ablate.errors import ConfigError
from ablate.trackers.base import AblationRecord, Tracker, TrialRecord, iso_to_ms
from ablate.trackers.limits import MLFLOW_KEY_MAX, NameMap, mlflow_key

#: MLflow's longest tag value (``MAX_TAG_VAL_LENGTH``).
TAG_VALUE_MAX = 8000


def _keys(names: NameMap, kind: str, keys: Iterable[str]) -> dict[str, str]:
    """Unique MLflow keys for ``keys`` (changes recorded in ``names``)."""
    return names.keys(kind, keys, mlflow_key, MLFLOW_KEY_MAX, ":")


def _tags(names: NameMap, tags: dict[str, str]) -> dict[str, str]:
    keys = _keys(names, "tag", tags)
    return {keys[k]: names.value("tag", k, str(v), TAG_VALUE_MAX) for k, v in tags.items()}


def _record_names(client: Any, run_id: str, names: NameMap, config: dict[str, Any] | None) -> None:
    """Attach the original -> logged mapping (and the full config) to a run whose names or values changed."""
    if not names:
        return
    client.log_dict(run_id, names.to_dict(), "ablate/names.json")
    if config is not None:
        client.log_dict(run_id, config, "ablate/config.json")
    client.set_tag(run_id, "ablate.names_changed", "true")


def merged_warning(merged: dict[str, list[str]]) -> str:
    """The warning for config keys that flatten to one param name (each kept under its own name), or ``""``."""
    if not merged:
        return ""
    shown = "; ".join(f"`{k}` and {', '.join(f'`{o}`' for o in others)}" for k, others in sorted(merged.items()))
    return (f"; warning: two config keys flatten to one param name ({shown}): each value is logged, the literal "
            "key with a dot under its quoted name (mapping in the runs' ablate/names.json)")


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
                raise ConfigError(f"must be a string or null, got {v!r}", where=f"tracker.{k}",
                                  fix=f"quote the value (`tracker.{k}='...'`), or remove it")
        if tracking_uri and re.search(r"://[^/@]*:[^/@]*@", tracking_uri):
            raise ConfigError("holds a password, and ablate records its settings in ablation.yaml",
                              where="tracker.tracking_uri",
                              fix="drop it from the URI and set MLFLOW_TRACKING_USERNAME / MLFLOW_TRACKING_PASSWORD "
                              "(or MLFLOW_TRACKING_TOKEN) in the environment, where MLflow reads them")
        if not isinstance(experiment, str) or not experiment:
            raise ConfigError(f"must be a non-empty string, got {experiment!r}", where="tracker.experiment",
                              fix="e.g. `tracker.experiment=ablate`")
        self.tracking_uri = tracking_uri
        self.experiment = experiment
        self.artifact_location = artifact_location

    def log(self, ablation: AblationRecord) -> str:
        try:
            from mlflow.entities import Metric, Param, RunTag  # noqa: PLC0415  # lazy: mlflow is heavy and an optional extra
            from mlflow.tracking import MlflowClient  # noqa: PLC0415  # lazy: mlflow is heavy and an optional extra
        except ImportError as exc:
            raise ConfigError(f"tracker=mlflow needs the mlflow library ({exc})", where="tracker",
                              fix="pip install 'hydra-ablate[mlflow]'") from None
        try:
            from mlflow.utils.validation import MAX_PARAM_VAL_LENGTH as max_param  # noqa: PLC0415  # lazy: mlflow is heavy and an optional extra
        except ImportError:  # pragma: no cover - older MLflow
            max_param = 500
        client = MlflowClient(tracking_uri=self.tracking_uri)
        exp = client.get_experiment_by_name(self.experiment)
        exp_id = exp.experiment_id if exp is not None else client.create_experiment(
            self.experiment, artifact_location=self.artifact_location)
        existing = self._runs_of(client, exp_id, ablation.ablation_id)
        parent = next((r for r in existing if r.data.tags.get("ablate.role") == "ablation"), None)
        names = NameMap()
        if parent is None:
            parent = client.create_run(
                exp_id, start_time=iso_to_ms(ablation.created_at), run_name=f"ablate {ablation.variable.get('name')}",
                tags=_tags(names, {**ablation.tags, "ablate.role": "ablation"}))
            params = {"variable.key": ablation.variable.get("key"), "variable.values": ablation.variable.get("values"),
                      "seeds": ablation.seeds, "metric": ablation.metric, "goal": ablation.goal}
            client.log_batch(parent.info.run_id, params=[Param(k, names.value("param", k, str(v), max_param))
                                                         for k, v in params.items()])
        parent_id = parent.info.run_id
        done: set[tuple[Any, Any, Any]] = set()
        for r in existing:
            if r.data.tags.get("ablate.role") != "trial":
                continue
            if r.info.status == "RUNNING":  # an earlier attempt broke off mid-run: log this trial again
                client.delete_run(r.info.run_id)
                continue
            done.add((r.data.tags.get("ablate.arm"), r.data.tags.get("ablate.seed"), r.data.tags.get("ablate.attempt")))
        new = [t for t in ablation.trials if (t.arm, str(t.seed), str(t.attempt)) not in done]
        changed, merged = 0, dict[str, list[str]]()
        for t in new:
            changed += self._log_trial(client, exp_id, parent_id, t, Metric, Param, RunTag, max_param)
            merged.update(t.merged_params)
        now = int(time.time() * 1000)
        words = ablation.verdict_words
        said = {f"ablate.verdict.{arm}": word for arm, word in words.items()}
        said.update({f"ablate.bottom_line.{arm}": line for arm, line in ablation.bottom_line.items()})  # verdict.md's
        if ablation.next_line:
            said["ablate.next"] = ablation.next_line
        vkeys = _keys(names, "tag", list(said))
        tags = [RunTag(vkeys[k], line) for k, line in said.items()]
        tags.append(RunTag("ablate.invalid", "true" if ablation.verdict.get("invalid") else "false"))
        summary = ablation.summary_metrics()
        mkeys = _keys(names, "metric", summary)
        metrics = [Metric(mkeys[k], v, now, 0) for k, v in summary.items()]
        for chunk in _chunks(metrics, 1000):
            client.log_batch(parent_id, metrics=list(chunk))
        for chunk in _chunks(tags, 100):
            client.log_batch(parent_id, tags=list(chunk))
        _record_names(client, parent_id, names, None)
        for path in ablation.artifacts:
            client.log_artifact(parent_id, str(path))
        client.set_terminated(parent_id, status="FINISHED")
        where = self.tracking_uri or client.tracking_uri
        note = (f"; {changed + bool(names)} run(s) had names or values changed to fit MLflow (mapping in their "
                "ablate/names.json)") if changed or names else ""
        return (f"mlflow: {len(new)} trial run(s) logged ({len(ablation.trials) - len(new)} already there) under "
                f"parent run {parent_id}, experiment {self.experiment!r}, {where}{note}{merged_warning(merged)}")

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
                   RunTag: Any, max_param: int) -> bool:
        """Log one trial run; True when a name or value had to change to fit MLflow."""
        names = NameMap()
        tags = _tags(names, {**t.tags, **({"ablate.error": t.error} if t.error else {})})
        tags["mlflow.parentRunId"] = parent_id
        start = iso_to_ms(t.started_at)
        end = iso_to_ms(t.finished_at) or int(time.time() * 1000)
        run = client.create_run(exp_id, start_time=start, tags=tags, run_name=f"{t.arm} seed={t.seed}")
        rid = run.info.run_id
        flat = t.params
        names.merged.update(t.merged_params)
        pkeys = _keys(names, "param", flat)
        params = [Param(pkeys[k], names.value("param", k, str(v), max_param)) for k, v in flat.items()]
        values = dict(t.metrics)
        if t.duration_s is not None:
            values["ablate.duration_s"] = float(t.duration_s)
        mkeys = _keys(names, "metric", values)
        metrics = [Metric(mkeys[k], v, end, 0) for k, v in values.items()]
        for chunk in _chunks(params, 100):
            client.log_batch(rid, params=list(chunk))
        for chunk in _chunks(metrics, 1000):
            client.log_batch(rid, metrics=list(chunk))
        _record_names(client, rid, names, t.config)
        status = {"ok": "FINISHED", "killed": "KILLED"}.get(t.status, "FAILED")
        client.set_terminated(rid, status=status, end_time=end)
        return bool(names)
