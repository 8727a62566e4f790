"""A suite's per-arm confound check compares a value that names the trial's own run as equal across arms (issue 35,
item 1), whatever other arm brings the key into play, and still finds a real difference. Manifests in the shape
the trials write them (an app's config as it saw it, with ``seen.hydra``), checked by the real function."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ablate.judge.suite import suite_confounds

KEY = "task.params.callbacks.model_checkpoint.dirpath"


def _plan(changed: dict[str, Any]) -> dict[str, Any]:
    """A suite: `lr` (its own key) and `callbacks` (a group whose arm changes the keys ``changed``)."""
    return {"suite": {"variables": [{"name": "lr"}, {"name": "callbacks"}]}, "seeds": [1, 2],
            "arms": [{"name": "control", "changes": {}, "resolved": {"task": {"params": {
                        k.removeprefix("task.params."): v for k, v in changed.items()}}}},
                     {"name": "lr=0.5", "variable": "lr", "changes": {"task.params.model.optimizer.lr": [0.05, 0.5]}},
                     {"name": "callbacks=none", "variable": "callbacks",
                      "changes": {k: [v, None] for k, v in changed.items()}}]}


def _manifest(root: Path, arm: str, seed: int, values: dict[str, Any], overrides: str) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for dotted, v in values.items():
        node = params
        *head, last = dotted.removeprefix("task.params.").split(".")
        for part in head:
            node = node.setdefault(part, {})
        node[last] = v(root / "trials" / arm / f"seed={seed}", overrides) if callable(v) else v
    return {"config": {"task": {"params": params}, "seed": seed},
            "seen": {"hydra": {"runtime.output_dir": str(root / "trials" / arm / f"seed={seed}" / "run"),
                               "job.override_dirname": overrides}}}


# each key as the plan recorded it (`<trial dir>` for the run dir) and as a trial's app saw it
KINDS = {
    KEY: ("<trial dir>/run/checkpoints", lambda t, o: f"{t}/run/checkpoints"),
    "task.params.paths.output_dir": ("<trial dir>/run", lambda t, o: f"{t}/run"),
    "task.params.paths.work_dir": ("/live/project", lambda t, o: f"{t}/work"),  # ${hydra:runtime.cwd}
    "task.params.logger.csv.save_dir": ("<trial dir>/run", lambda t, o: f"{t}/run/"),
    "task.params.callbacks.paths": (["<trial dir>/run/a", "x"], lambda t, o: [f"{t}/run/a", "x"]),
    "task.params.run_name": ("train_seed=1", lambda t, o: f"train_{o}"),  # ${hydra:job.override_dirname}
    "task.params.callbacks.model_checkpoint.monitor": ("val/acc", lambda t, o: "val/acc"),
}


def _used_and_manifests(root: Path, keys: list[str], tweak: dict[tuple[str, int, str], Any] | None = None
                        ) -> tuple[list[tuple[str, int]], dict[tuple[str, int], dict[str, Any]]]:
    used, manifests = [], {}
    for arm, extra in (("control", ""), ("lr=0.5", "model.optimizer.lr=0.5,"), ("callbacks=none", "callbacks=none,")):
        for seed in (1, 2):
            values = {} if arm == "callbacks=none" else {k: KINDS[k][1] for k in keys}
            for (a, s, k), v in (tweak or {}).items():
                if (a, s) == (arm, seed):
                    values[k] = v
            manifests[arm, seed] = _manifest(root, arm, seed, values, f"{extra}seed={seed}")
            used.append((arm, seed))
    return used, manifests


@pytest.mark.parametrize("key", list(KINDS))
def test_a_value_naming_the_trials_own_run_compares_equal(tmp_path: Path, key: str) -> None:
    used, manifests = _used_and_manifests(tmp_path / "sweep", [key])
    assert suite_confounds(_plan({key: KINDS[key][0]}), manifests, used, tmp_path / "sweep") == []


def test_the_control_trial_is_compared_even_when_the_sweep_dir_moved(tmp_path: Path) -> None:
    used, manifests = _used_and_manifests(tmp_path / "ran_here", list(KINDS))
    assert suite_confounds(_plan({k: v[0] for k, v in KINDS.items()}), manifests, used, tmp_path / "moved") == []


@pytest.mark.parametrize(("value", "shown"), [
    (lambda t, o: f"{t.parent / 'seed=1'}/run/checkpoints", "seed=1/run/checkpoints"),  # another trial's dir
    (lambda t, o: "/tmp/shared/checkpoints", "/tmp/shared/checkpoints"),  # one dir shared by the trials
])
def test_a_real_difference_is_still_a_confound(tmp_path: Path, value: Any, shown: str) -> None:
    root = tmp_path / "sweep"
    used, manifests = _used_and_manifests(root, [KEY])
    t = root / "trials" / "lr=0.5" / "seed=2"
    manifests["lr=0.5", 2]["config"]["task"]["params"]["callbacks"]["model_checkpoint"]["dirpath"] = value(t, "")
    (finding,) = suite_confounds(_plan({KEY: KINDS[KEY][0]}), manifests, used, root)
    assert finding["field"] == KEY and finding["severity"] == "invalid"
    assert finding["message"].startswith(f"config `{KEY}` is ") and shown in finding["message"]
    assert "in lr=0.5/seed=2, but that arm ablates lr only (control: <trial dir>/run/checkpoints)" in finding["message"]
