"""``tracker=wandb``: one W&B run per trial, grouped by ablation, plus one verdict run in the group.

Each trial run: group = the ablation id, job type ``trial``, name ``<arm> seed=<k>``, the trial's
resolved config as config plus an ``ablate`` section holding the same tags as MLflow's (ablation id,
arm, value, seed, attempt, status, commit, dirty, data hashes), short string tags for the UI
(``arm:<arm>``, ``seed:<k>``, ``status:<s>``, ``commit:<12 hex>``, ``dirty``), its metrics logged
once (plus ``ablate/duration_s``), and exit code 0 (ok) or 1. The verdict run (job type ``verdict``)
carries the verdict word per treatment (``verdict/<arm>``) and the verdict's numbers in its summary,
and verdict.md, verdict.json, results.csv, per_seed.csv, ablation.yaml and the plots as an artifact.

Run ids are derived from the ablation id, arm, seed and attempt, so logging again updates the same
runs once synced. Nothing about the orchestrating machine is collected (no git remote, code, system
metrics or console capture: the runs describe trials that ran elsewhere, and a git remote URL can
hold a token). Offline mode (``tracker.mode=offline`` or ``WANDB_MODE=offline``) writes run dirs
that ``wandb sync`` uploads later. The run files go under ``tracker.dir``, else ``$WANDB_DIR``, else
the sweep dir (never the project, where they would dirty the git tree).
"""

from __future__ import annotations

import hashlib
import os
import re
from typing import Any, ClassVar

from ablate.errors import ConfigError
from ablate.trackers.base import AblationRecord, Tracker, TrialRecord

MODES = ("online", "offline", "disabled")
_QUIET = {"disable_git": True, "save_code": False, "disable_code": True, "x_disable_stats": True,
          "x_disable_meta": True, "x_disable_machine_info": True, "console": "off", "disable_job_creation": True,
          "silent": True}


def _run_id(*parts: object) -> str:
    return hashlib.sha256("/".join(map(str, parts)).encode()).hexdigest()[:24]


def _tag(text: str) -> str:
    return text[:64]


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
            raise ConfigError(f"must be a non-empty string, got {project!r}", where="tracker.project")
        if mode is not None and mode not in MODES:
            raise ConfigError(f"must be one of {', '.join(MODES)} or null, got {mode!r}", where="tracker.mode")
        for k, v in (("entity", entity), ("dir", dir)):
            if v is not None and not isinstance(v, str):
                raise ConfigError(f"must be a string or null, got {v!r}", where=f"tracker.{k}")
        self.project, self.entity, self.mode, self.dir = project, entity, mode, dir

    def log(self, ablation: AblationRecord) -> str:
        try:
            import wandb
        except ImportError as exc:
            raise ConfigError(f"tracker=wandb needs the wandb library ({exc})", where="tracker",
                              fix="pip install 'ablate[wandb]'") from None
        fields = getattr(wandb.Settings, "model_fields", {})
        settings = wandb.Settings(**{k: v for k, v in _QUIET.items() if k in fields})
        run_dir = self.dir or os.environ.get("WANDB_DIR") or str(ablation.sweep_dir)
        os.makedirs(run_dir, exist_ok=True)
        common = {"project": self.project, "entity": self.entity, "mode": self.mode, "dir": run_dir,
                  "group": ablation.ablation_id, "settings": settings, "reinit": "create_new"}
        for t in ablation.trials:
            self._log_trial(wandb, common, ablation, t)
        self._log_verdict(wandb, common, ablation)
        mode = self.mode or os.environ.get("WANDB_MODE") or "online"
        sync = f"; upload with `wandb sync {run_dir}/wandb`" if mode == "offline" else ""
        return (f"wandb: {len(ablation.trials)} trial run(s) and a verdict run logged in group "
                f"{ablation.ablation_id!r}, project {self.project!r} ({mode}){sync}")

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

    def _log_trial(self, wandb: Any, common: dict[str, Any], ab: AblationRecord, t: TrialRecord) -> None:
        config = {**t.config, "ablate": self._ablate_section(t.tags)}
        run = wandb.init(**common, job_type="trial", name=f"{t.arm} seed={t.seed}", config=config,
                         id=_run_id(ab.ablation_id, t.arm, t.seed, t.attempt), tags=self._short_tags(t.tags),
                         resume="allow")
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

    def _log_verdict(self, wandb: Any, common: dict[str, Any], ab: AblationRecord) -> None:
        config = {"ablate": self._ablate_section({**ab.tags, "ablate.role": "verdict"}),
                  "variable": ab.variable, "seeds": ab.seeds, "metric": ab.metric, "goal": ab.goal}
        run = wandb.init(**common, job_type="verdict", name=f"verdict {ab.variable.get('name')}", config=config,
                         id=_run_id(ab.ablation_id, "verdict"), tags=[*self._short_tags(ab.tags), "verdict"],
                         resume="allow")
        try:
            summary: dict[str, Any] = {f"verdict/{arm}": word for arm, word in ab.verdict_words.items()}
            summary.update({f"stats/{k}": v for k, v in ab.summary_metrics().items()})
            summary["verdict/invalid"] = bool(ab.verdict.get("invalid"))
            run.summary.update(summary)
            if ab.artifacts:
                name = re.sub(r"[^A-Za-z0-9_.-]", "-", f"verdict-{ab.ablation_id}")
                art = wandb.Artifact(name=name, type="ablate-verdict")
                for path in ab.artifacts:
                    art.add_file(str(path))
                run.log_artifact(art)
        finally:
            run.finish()
