"""``tracker=wandb``: one W&B run per trial, grouped by ablation, plus one verdict run in the group.

Each trial run: group = the ablation id, job type ``trial``, name ``<arm> seed=<k>``, the trial's
resolved config as config plus an ``ablate`` section holding the same tags as MLflow's (ablation id,
arm, value, seed, attempt, status, commit, dirty, data hashes), short string tags for the UI
(``arm:<arm>``, ``seed:<k>``, ``status:<s>``, ``commit:<12 hex>``, ``dirty``), its metrics logged
once (plus ``ablate/duration_s``), and exit code 0 (ok) or 1. The verdict run (job type ``verdict``)
carries the verdict word per treatment (``verdict/<arm>``) and the verdict's numbers in its summary,
and verdict.md, verdict.json, results.csv, per_seed.csv, ablation.yaml and the plots as an artifact.

Run ids are derived from the ablation id, arm, seed and attempt, so logging again updates the same
runs once synced; in offline mode a trial whose offline run dir already exists, and a verdict run
whose verdict is unchanged, are not written again, so retrying ``ablate track`` adds no duplicates.
Names stay within W&B's limits (run names, groups and artifact names 128 characters, tags 64): a
longer one is cut and ends with ``~<6 hex of its SHA-256>``; the originals of any changed names are
recorded in the run's config under ``ablate.names``.

Nothing about the orchestrating machine is collected (no git remote, code, system
metrics or console capture: the runs describe trials that ran elsewhere, and a git remote URL can
hold a token). Offline mode (``tracker.mode=offline`` or ``WANDB_MODE=offline``) writes run dirs
that ``wandb sync`` uploads later. The run files go under ``tracker.dir``, else ``$WANDB_DIR``, else
the sweep dir (never the project, where they would dirty the git tree).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, ClassVar

from ablate.errors import ConfigError
from ablate.trackers.base import AblationRecord, Tracker, TrialRecord
from ablate.trackers.limits import WANDB_NAME_MAX, WANDB_TAG_MAX, digest, fit, wandb_artifact_name

MODES = ("online", "offline", "disabled")
_QUIET = {"disable_git": True, "save_code": False, "disable_code": True, "x_disable_stats": True,
          "x_disable_meta": True, "x_disable_machine_info": True, "console": "off", "disable_job_creation": True,
          "silent": True}


def _run_id(*parts: object) -> str:
    return hashlib.sha256("/".join(map(str, parts)).encode()).hexdigest()[:24]


def _tag(text: str) -> str:
    return fit(text, WANDB_TAG_MAX)


def _names(**pairs: str) -> dict[str, str]:
    """``{kind: original}`` -> the fitted names; ``_changed`` added with the originals that had to change."""
    out = {k: fit(v, WANDB_NAME_MAX) for k, v in pairs.items()}
    changed = {k: {"original": v, "logged": out[k]} for k, v in pairs.items() if out[k] != v}
    return {**out, "_changed": changed}  # type: ignore[dict-item]


def _offline_exists(run_dir: str, run_id: str) -> bool:
    """An offline run dir for ``run_id`` was written before (``<dir>/wandb/offline-run-<time>-<id>``)."""
    return any((Path(run_dir) / "wandb").glob(f"offline-run-*-{run_id}"))


class WandbTracker(Tracker):
    """Log ablations to Weights & Biases.

    Parameters
    ----------
    project : str
        The W&B project.
    entity : str or None
        The W&B entity (user or team); None: the logged-in default.
    mode : {"online", "offline", "disabled"} or None
        None: W&B's own default (``WANDB_MODE``, else online).
    dir : str or None
        Where W&B writes run files; None: ``$WANDB_DIR``, else the sweep dir.
    """

    name = "wandb"
    OPTIONS: ClassVar[dict[str, Any]] = {"project": "ablate", "entity": None, "mode": None, "dir": None}

    def __init__(self, project: str = "ablate", entity: str | None = None, mode: str | None = None,
                 dir: str | None = None) -> None:
        if not isinstance(project, str) or not project:
            raise ConfigError(f"must be a non-empty string, got {project!r}", where="tracker.project",
                              fix="e.g. `tracker.project=ablate`")
        if mode is not None and mode not in MODES:
            raise ConfigError(f"must be one of {', '.join(MODES)} or null, got {mode!r}", where="tracker.mode",
                              fix="e.g. `tracker.mode=offline`")
        for k, v in (("entity", entity), ("dir", dir)):
            if v is not None and not isinstance(v, str):
                raise ConfigError(f"must be a string or null, got {v!r}", where=f"tracker.{k}",
                                  fix=f"quote the value (`tracker.{k}='...'`), or remove it")
        self.project, self.entity, self.mode, self.dir = project, entity, mode, dir

    def log(self, ablation: AblationRecord) -> str:
        try:
            import wandb  # noqa: PLC0415  # lazy: wandb is heavy and an optional extra
        except ImportError as exc:
            raise ConfigError(f"tracker=wandb needs the wandb library ({exc})", where="tracker",
                              fix="pip install 'hydra-ablate[wandb]'") from None
        fields = getattr(wandb.Settings, "model_fields", {})
        settings = wandb.Settings(**{k: v for k, v in _QUIET.items() if k in fields})
        run_dir = self.dir or os.environ.get("WANDB_DIR") or str(ablation.sweep_dir)
        os.makedirs(run_dir, exist_ok=True)
        group = fit(ablation.ablation_id, WANDB_NAME_MAX)
        common = {"project": self.project, "entity": self.entity, "mode": self.mode, "dir": run_dir,
                  "group": group, "settings": settings, "reinit": "create_new"}
        mode = self.mode or os.environ.get("WANDB_MODE") or "online"
        offline = mode == "offline"
        logged = 0
        for t in ablation.trials:
            rid = _run_id(ablation.ablation_id, t.arm, t.seed, t.attempt)
            if offline and _offline_exists(run_dir, rid):
                continue  # written by an earlier `ablate track`: never a second offline run for one trial
            self._log_trial(wandb, common, ablation, t, rid)
            logged += 1
        verdict = self._log_verdict(wandb, common, ablation, run_dir if offline else None)
        sync = f"; upload with `wandb sync {run_dir}/wandb`" if offline else ""
        return (f"wandb: {logged} trial run(s) logged ({len(ablation.trials) - logged} already there), verdict run "
                f"{verdict}, in group {group!r}, project {self.project!r} ({mode}){sync}")

    @staticmethod
    def _ablate_section(tags: dict[str, str]) -> dict[str, Any]:
        section: dict[str, Any] = {}
        data: dict[str, str] = {}
        for k, v in tags.items():
            name = k.removeprefix("ablate.")
            if name.startswith("data."):
                data[name.removeprefix("data.")] = v
            else:
                section[name] = v
        section["data"] = data
        return section

    def _short_tags(self, tags: dict[str, str]) -> list[str]:
        out = ["ablate"]
        for key, prefix in (("ablate.arm", "arm"), ("ablate.seed", "seed"), ("ablate.status", "status")):
            if key in tags:
                out.append(_tag(f"{prefix}:{tags[key]}"))
        out.append(_tag(f"commit:{tags.get('ablate.commit', '')[:12]}"))
        if tags.get("ablate.dirty") == "true":
            out.append("dirty")
        return out

    def _log_trial(self, wandb: Any, common: dict[str, Any], ab: AblationRecord, t: TrialRecord, rid: str) -> None:
        names = _names(group=ab.ablation_id, name=f"{t.arm} seed={t.seed}")
        section = self._ablate_section(t.tags)
        if names["_changed"]:
            section["names"] = names["_changed"]
        config = {**t.config, "ablate": section}
        run = wandb.init(**common, job_type="trial", name=names["name"], config=config, id=rid,
                         tags=self._short_tags(t.tags), resume="allow")
        try:
            logged = dict(t.metrics)
            if t.duration_s is not None:
                logged["ablate/duration_s"] = float(t.duration_s)
            run.log(logged)
            run.summary["ablate/status"] = t.status
            if t.error:
                run.summary["ablate/error"] = t.error[:5000]
        finally:
            run.finish(exit_code=0 if t.status == "ok" else 1)

    def _log_verdict(self, wandb: Any, common: dict[str, Any], ab: AblationRecord, offline_dir: str | None) -> str:
        """Log (or update) the verdict run; in offline mode skip it when the same verdict was written before.
        Returns ``logged`` or ``unchanged``."""
        rid = _run_id(ab.ablation_id, "verdict")
        content = digest(json.dumps(ab.verdict, sort_keys=True, default=str), 16)
        marker = Path(offline_dir) / "wandb" / f"ablate-verdict-{rid}.sha256" if offline_dir else None
        if marker is not None and _offline_exists(str(offline_dir), rid) and marker.is_file() \
                and marker.read_text().strip() == content:
            return "unchanged"
        art_name = fit(wandb_artifact_name(f"verdict-{ab.ablation_id}"), WANDB_NAME_MAX, "-")
        names = _names(group=ab.ablation_id, name=f"verdict {ab.variable.get('name')}")
        section = self._ablate_section({**ab.tags, "ablate.role": "verdict"})
        if names["_changed"] or art_name != f"verdict-{ab.ablation_id}":
            section["names"] = {**names["_changed"],
                                "artifact": {"original": f"verdict-{ab.ablation_id}", "logged": art_name}}
        config = {"ablate": section, "variable": ab.variable, "seeds": ab.seeds, "metric": ab.metric, "goal": ab.goal}
        run = wandb.init(**common, job_type="verdict", name=names["name"], config=config, id=rid,
                         tags=[*self._short_tags(ab.tags), "verdict"], resume="allow")
        try:
            summary: dict[str, Any] = {f"verdict/{arm}": word for arm, word in ab.verdict_words.items()}
            summary.update({f"bottom_line/{arm}": line for arm, line in ab.bottom_line.items()})  # verdict.md's words
            if ab.next_line:
                summary["next"] = ab.next_line
            summary.update({f"stats/{k}": v for k, v in ab.summary_metrics().items()})
            summary["verdict/invalid"] = bool(ab.verdict.get("invalid"))
            run.summary.update(summary)
            if ab.artifacts:
                art = wandb.Artifact(name=art_name, type="ablate-verdict")
                for path in ab.artifacts:
                    art.add_file(str(path))
                run.log_artifact(art)
        finally:
            run.finish()
        if marker is not None:
            marker.write_text(content + "\n")
        return "logged"
