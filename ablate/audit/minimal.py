"""The minimal ablation that settles a confounded comparison: a ready-to-run ablate config and the command that
runs it as printed.

Control = arm A's full recorded config (every key as an app override); variable = the difference under test,
with arm B's value: a config key, or a data version (A's version of the file fetched beside B's with DVC, the
config key naming the file varied between the two); code pinned to B's commit (the code that would be kept) in
a ``git worktree`` of it, so the team's work tree is left alone; the DVC-tracked files the config names listed
in the task's ``data:`` (and checked out in the worktree from the project's DVC cache); seeds sized for a firm
verdict (:func:`ablate.audit.analysis.advised_seeds`). Its trials carry a tag when the app logs to MLflow or
W&B (``MLFLOW_RUN_CONTEXT``, ``WANDB_TAGS``), so a later audit of the team's store knows them
(:func:`ablate.audit.sources.base.ablate_trial`), and it runs with pyarrow's allocator thread off
(:data:`WARM_ENV`), so the warm parent holds the tracker the app imports instead of each trial importing it.
When ablate cannot vary the difference (a commit; a data version no config key names), it says plainly which
runs to make by hand. The files go to ``<out>/ablation/conf/{task,variable}/audit.yaml``, used through
``--config-dir``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
from pathlib import Path
from typing import Any

from ablate.audit.arms import CHOICE, Arm
from ablate.audit.runs import commit_id
from ablate.audit.versions import dvc_outputs
from ablate.record.sweepdir import write_atomic

#: Set for the minimal ablation's run (the user's own value kept): pyarrow's jemalloc allocator starts no thread
#: (the setting :data:`ablate.trials.warm.hazards.SETTINGS` names), so the warm parent can learn what the app's
#: trials import. An app logging to MLflow imports mlflow, pandas and pyarrow in each trial (about 2-3 s of CPU);
#: with the allocator's thread on, the warm parent refuses to hold any of them and every trial imports them itself.
WARM_ENV = "JE_ARROW_MALLOC_CONF=${JE_ARROW_MALLOC_CONF:-background_thread:false}"


def _value(v: Any) -> str:
    """A value as a Hydra override writes it."""
    if isinstance(v, str):
        return v if v and all(c.isalnum() or c in "._-/:" for c in v) else "'" + v.replace("'", "\\'") + "'"
    return json.dumps(v)


def overrides(arm: Arm, seed_key: str, skip: set[str], variable: str = "") -> list[str]:
    """Every recorded key of ``arm`` as ``key=value``, the variable's control value included (not the seed,
    interpolations, the keys in ``skip`` (derived changes: they must follow the variable) or Hydra's choice
    records): the control is arm A's whole config, whatever the app's defaults are now."""
    out = []
    interpolated = {k for r in arm.runs for k in r.interpolations}
    for k, v in sorted(arm.config.items()):
        if (k == seed_key or k in skip or k in interpolated or (isinstance(v, str) and "${" in v)
                or (k.startswith(CHOICE) and k != variable)):
            continue
        if k.startswith(CHOICE):  # the group under test: the control's option, as Hydra's group=option
            out.append(f"{k.removeprefix(CHOICE)}={v}")
            continue
        if isinstance(v, dict):
            continue
        out.append(f"{k}={_value(v)}")
    return out


def _dvc_files(a: Arm, b: Arm) -> list[str]:
    """The DVC-tracked files the runs' configs name (both sides'), as :mod:`ablate.audit.versions` found them."""
    out = set()
    for r in a.runs + b.runs:
        keys = r.context.get("data_keys") or {}
        out |= {p for p, v in (r.context.get("data") or {}).items() if p in keys and not str(v).startswith("git:")}
    return sorted(out)


def _tag(conf: Path) -> str:
    return hashlib.sha256(str(conf).encode()).hexdigest()[:8]


def _by_hand(var: dict[str, Any], report: dict[str, Any], app: str) -> str:
    seeds = report["seeds_advised"]
    if var["kind"] == "code":
        return (f"ablate varies a config key at one commit, not the code: run the control config at each commit "
                f"({str(var['a'])[:12]} and {str(var['b'])[:12]}) with the same {seeds} seeds, each in a work tree "
                "of its own (`git worktree add --detach DIR COMMIT`), e.g. `python "
                f"{app} -m seed=1,...,{seeds}`, then `ablate audit` both runs' dirs: nothing but the code differs")
    path = var["key"].removeprefix("data:")
    return (f"no config key names `{path}`, so ablate cannot vary its version: run the control config at B's "
            f"commit with {seeds} seeds twice, once with A's version of `{path}` "
            f"(`dvc get REPO {path} --rev {str(report['arms'][0]['commit'] or 'A')[:12]} -o {path} --force`), once "
            "with B's (`dvc checkout`), then `ablate audit` both runs' dirs; or add a config key naming the file")


def _not_overrides(given: list[str]) -> list[str]:
    """The recorded ``key=value`` pairs that are not one Hydra override (Hydra's own parser says: a key such as
    ``-x`` or ``--config-dir``, a space in a key), or that set Hydra's own config (``hydra.``): a record is data, so
    such a key never reaches the app's command line, where Hydra would read it as an option of its own."""
    from hydra.core.override_parser.overrides_parser import OverridesParser  # noqa: PLC0415  # lazy: only a planned minimal ablation needs Hydra's parser

    parser, out = OverridesParser.create(), []
    for ov in given:
        try:
            parsed = parser.parse_override(ov)
        except Exception:  # Hydra's parser raises HydraException (or a grammar error) for what is not an override
            out.append(ov)
            continue
        if parsed.key_or_group.split("/")[0].split(".")[0] == "hydra":
            out.append(ov)
    return out


def _unpassable(refused: list[str], report: dict[str, Any]) -> str:
    shown = ", ".join(f"`{ov.split('=', 1)[0][:80]}`" for ov in refused[:5]) + (" ..." if len(refused) > 5 else "")
    return (f"arm A's runs recorded config keys that are not Hydra overrides of the app's config ({shown}), so "
            "ablate will not pass them to the app as they are (a record never becomes an option): run the control "
            f"config at B's commit with {report['seeds_advised']} seeds twice, once with A's value of "
            f"`{report['variable']['key']}` and once with B's, setting those keys as your config names them, then "
            "`ablate audit` both runs' dirs")


def _interpolated(var: dict[str, Any], report: dict[str, Any]) -> str:
    shown = var["b"] if isinstance(var["b"], str) else json.dumps(var["b"], default=str)
    return (f"B's value of `{var['key']}` is recorded as an interpolation ({shown[:200]}), which ablate would "
            "resolve in this environment, not the runs': run the control config at B's commit with "
            f"{report['seeds_advised']} seeds twice, once with A's value of `{var['key']}` and once with the value "
            "the interpolation had in B's runs, then `ablate audit` both runs' dirs")


def plan(a: Arm, b: Arm, report: dict[str, Any], *, app: str, out: Path, repo: str | None) -> dict[str, Any]:
    """The minimal ablation: ``task`` and ``variable`` configs, the commit, the command (not yet written); or,
    when ablate cannot vary the difference, ``command`` None and ``by_hand`` saying what to run."""
    var = report["variable"]
    commit = commit_id(report["arms"][1]["commit"])
    if var["kind"] == "code" or (var["kind"] == "data" and (not var.get("config_key") or "," in var["key"])):
        return {"task": None, "variable": None, "commit": commit, "config_dir": None, "command": None,
                "isolates": var["key"], "by_hand": _by_hand(var, report, app), "pinned_to": None}
    if var["kind"] == "config" and "${" in json.dumps(var["b"], default=str):  # a record is never resolved here
        return {"task": None, "variable": None, "commit": commit, "config_dir": None, "command": None,
                "isolates": var["key"], "by_hand": _interpolated(var, report), "pinned_to": None}
    derived = {d["key"] for d in report["derived"]}
    key = var["key"] if var["kind"] == "config" else var["config_key"]
    seed_key = report["seed_key"] if isinstance(report["seed_key"], str) else report["seed_key"]["B"]
    skip = derived | ({key} if var["kind"] == "data" else set())  # a data version: the key names A's copy instead
    given = overrides(a, seed_key, skip, key)
    refused = _not_overrides(given)
    if refused:
        return {"task": None, "variable": None, "commit": commit, "config_dir": None, "command": None,
                "isolates": var["key"], "by_hand": _unpassable(refused, report), "pinned_to": None}
    task = {"app": app, "overrides": given, "metric": report["metrics"]["B"],
            "goal": report["goal"], "reduce": report["reduce"], "seed_key": seed_key}
    conf = out.absolute() / "ablation" / "conf"
    data = _dvc_files(a, b)
    fetch: list[str] = []
    if var["kind"] == "data":  # A's version of the file, fetched with DVC beside B's, named by the config key
        path = var["key"].removeprefix("data:")
        copy = os.path.join(os.path.dirname(path), f"audit-{str(var['a']).split(':')[-1][:10]}", os.path.basename(path))
        task["overrides"].append(f"{key}={_value(copy)}")
        data = sorted({*data, copy, path})
        a_commit = commit_id(report["arms"][0]["commit"])
        # the recorded path is data: after `--` (and the copy as --out's value), never an option of dvc's
        fetch = [f"dvc get --rev {a_commit} --out={shlex.quote(copy)} -- {shlex.quote(str(repo))} {shlex.quote(path)}",
                 f"dvc add -q -- {shlex.quote(copy)}"] if repo and a_commit else []
        values = [path]
    else:
        values = [var["b"]]
    if data:
        task["data"] = data
    variable = ({"group": key.removeprefix(CHOICE), "values": values} if key.startswith(CHOICE)
                else {"key": key, "values": values})
    steps = _steps(repo, commit, out, data, fetch)
    tag = _tag(conf)
    env = (f"MLFLOW_RUN_CONTEXT={shlex.quote(json.dumps({'ablate.audit': tag}))} "
           f"WANDB_TAGS={shlex.quote('ablate-audit-' + tag)} {WARM_ENV} ")
    steps.append(env + shlex.join(["ablate", "--config-dir", str(conf), "-m", "task=audit", "variable=audit",
                                   f"seeds={report['seeds_advised']}"]))
    return {"task": task, "variable": variable, "commit": commit, "config_dir": str(conf), "tag": tag,
            "command": " && ".join(steps), "steps": steps, "isolates": var["key"],
            "pinned_to": "B's commit (the code that would be kept), in a git worktree of it" if commit else
            "the commit checked out when it runs (no commit was recorded)"}


def _steps(repo: str | None, commit: str | None, out: Path, data: list[str], fetch: list[str]) -> list[str]:
    """cd to the repo; a worktree of B's commit (the team's work tree left alone); the DVC-tracked files checked
    out there from the project's own DVC cache; A's data version fetched beside B's."""
    if not repo:
        return []
    steps = [f"cd {shlex.quote(repo)}"]
    if commit:
        wt = out.absolute() / f"worktree-{commit[:12]}"
        steps += [f"git worktree add --detach {shlex.quote(str(wt))} {commit}", f"cd {shlex.quote(str(wt))}"]
    if data and commit:
        outs = dvc_outputs(repo, [commit]).get(commit, {})
        targets = sorted({o for p in data for o in outs if p == o or p.startswith(o.rstrip("/") + "/")})
        cache = Path(repo) / ".dvc" / "cache"
        steps.append(f"dvc config --local cache.dir {shlex.quote(str(_cache_dir(repo) or cache))}")
        if targets:
            steps.append("dvc checkout -q -- " + " ".join(shlex.quote(t) for t in targets))
    return steps + fetch


def _cache_dir(repo: str) -> str | None:
    """The project's DVC cache dir (its config may put it elsewhere), through DVC."""
    try:
        from dvc.repo import Repo  # noqa: PLC0415  # lazy: DVC is heavy, and only a DVC project needs it

        with Repo(repo) as r:
            return str(r.cache.local_cache_dir)
    except Exception:  # not a DVC project, another DVC version
        return None


def write(minimal: dict[str, Any]) -> list[Path]:
    """Write the task and variable configs (atomically); returns their paths (none for runs to make by hand)."""
    import yaml  # noqa: PLC0415  # lazy: only when there is an ablation to write

    if not minimal.get("config_dir"):
        return []
    conf = Path(minimal["config_dir"])
    paths = []
    for group, body in (("task", minimal["task"]), ("variable", minimal["variable"])):
        p = conf / group / "audit.yaml"
        p.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(p, yaml.safe_dump(body, sort_keys=False))
        paths.append(p)
    return paths
