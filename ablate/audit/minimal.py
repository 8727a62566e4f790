"""The minimal ablation that settles a confounded comparison: a ready-to-run ablate config and its command.

Control = arm A's full recorded config (every key as an app override); variable = the key under test, with
arm B's value; code pinned to one side's commit (B's: the code that would be kept); seeds as advised. The
files go to ``<out>/ablation/conf/{task,variable}/audit.yaml``, used through ``--config-dir``.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from ablate.audit.arms import CHOICE, Arm


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


def plan(a: Arm, b: Arm, report: dict[str, Any], *, app: str, out: Path, repo: str | None) -> dict[str, Any]:
    """The minimal ablation: ``task`` and ``variable`` configs, the commit, the command (not yet written)."""
    var = report["variable"]
    derived = {d["key"] for d in report["derived"]}
    task = {"app": app, "overrides": overrides(a, report["seed_key"], derived, var["key"]), "metric": report["metric"],
            "goal": report["goal"], "reduce": report["reduce"], "seed_key": report["seed_key"]}
    key = var["key"]
    variable = ({"group": key.removeprefix(CHOICE), "values": [var["b"]]} if key.startswith(CHOICE)
                else {"key": key, "values": [var["b"]]})
    commit = next((x["commit"] for x in report["arms"] if x["role"] == "treatment" and x["commit"]), None)
    conf = out.absolute() / "ablation" / "conf"
    cmd = ["ablate", "--config-dir", str(conf), "-m", "task=audit", "variable=audit",
           f"seeds={report['seeds_advised']}"]
    steps = []
    if repo:
        steps.append(f"cd {shlex.quote(repo)}")
    if commit:
        steps.append(f"git checkout {commit[:12]}")
    steps.append(shlex.join(cmd))
    return {"task": task, "variable": variable, "commit": commit, "config_dir": str(conf),
            "command": " && ".join(steps),
            "isolates": var["key"], "pinned_to": "B's commit (the code that would be kept)" if commit else
            "the commit checked out when it runs (no commit was recorded)"}


def write(minimal: dict[str, Any]) -> list[Path]:
    """Write the task and variable configs (atomically); returns their paths."""
    import yaml

    from ablate.record.sweepdir import write_atomic

    conf = Path(minimal["config_dir"])
    paths = []
    for group, body in (("task", minimal["task"]), ("variable", minimal["variable"])):
        p = conf / group / "audit.yaml"
        p.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(p, yaml.safe_dump(body, sort_keys=False))
        paths.append(p)
    return paths
