"""The Python API, as a notebook uses it: ablate.run -> Verdict, ablate.load -> tidy DataFrame."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import yaml

import ablate
from ablate.errors import ConfigError, SweepDirError
from tests.helpers import PURE_CONF, PURE_TASK, ablate_cli, add_pure_task, commit_all, run

pytestmark = pytest.mark.slow

#: :data:`tests.helpers.PURE_TASK` reporting the digits task's timing metrics too (fixed values), so that
#: ``ablate.load`` gives the columns docs/api.md shows.
API_TASK = PURE_TASK.replace(
    'return {"val_acc": 0.9 - off + noise, "val_loss": 0.3 + off - noise}',
    'return {"val_acc": 0.9 - off + noise, "val_loss": 0.3 + off - noise, "samples_per_s": 68278.0,\n'
    '            "samples_per_cpu_s": 92911.0, "train_s": 0.285}')


def test_run_returns_verdict_and_load_gives_one_row_per_trial(project: Path) -> None:
    """The API's return values and the call's record are under test, not training: a pure-Python task with the
    digits task's config keys and the five metrics it reports (:data:`API_TASK`; test_end_to_end checks the
    digits task reports those five), so the test process never imports torch (it trained 6 digits trials in
    it before: about 2.4 s more CPU for the file)."""
    (project / "pure_task.py").write_text(API_TASK)
    (project / "conf" / "task" / "pure.yaml").write_text(PURE_CONF)
    commit_all(project, "the pure-Python task, with the digits task's metrics")
    verdict = ablate.run(project / "conf", variable="lr", values=[0.5], seeds=[0, 1, 2], launcher="inline",
                         overrides={"task": "pure", "task.epochs": 1}, alpha=0.1,
                         sweep_dir=project / "outputs" / "api")
    assert isinstance(verdict, ablate.Verdict) and isinstance(verdict, dict)
    assert verdict.sweep_dir == project / "outputs" / "api"
    on_disk = json.loads((verdict.sweep_dir / "verdict.json").read_text())
    assert {k: v for k, v in verdict.items() if k != "sweep_dir"} == json.loads(json.dumps(on_disk))
    assert verdict["sweep_dir"] == str(verdict.sweep_dir)  # dict access, as before
    assert verdict["alpha"] == 0.1
    assert list(verdict.words) == ["lr=0.5"]
    c = verdict["comparisons"][0]
    assert verdict.words["lr=0.5"] == c["verdict"] + (" (indicative)" if c["firm"] is False else "")
    assert verdict.firm == {"lr=0.5": c["firm"]}
    assert verdict.invalid is False
    assert "task.optim.lr" in verdict.markdown and verdict._repr_markdown_() == verdict.markdown
    assert repr(verdict).startswith(f"Verdict(val_acc, higher is better; {verdict.sweep_dir}\n  lr=0.5 (task.optim.lr "
                                    "0.05 → 0.5) changed val_acc by ")
    plan = yaml.safe_load((verdict.sweep_dir / "ablation.yaml").read_text())  # the call, as the CLI line it equals
    assert plan["command"] == {"overrides": ["variable=lr", "variable.values=[0.5]", "seeds=[0,1,2]",
                                             "launcher=inline", "alpha=0.1", "task='pure'", "task.epochs=1",
                                             f"hydra.sweep.dir='{project / 'outputs' / 'api'}'"],
                               "config_path": None, "config_dirs": [], "config_name": None, "via": "api"}
    assert ablate.Verdict.open(verdict.sweep_dir) == verdict

    df = ablate.load(verdict.sweep_dir)
    assert len(df) == 6
    assert list(df.columns[:7]) == ["arm", "value", "seed", "status", "attempt", "duration_s", "error"]
    assert {"val_acc", "val_loss"} <= set(df.columns)
    example = (Path(__file__).resolve().parents[2] / "docs" / "api.md").read_text().split("df.head()\n", 1)[1]
    assert example.splitlines()[0].lstrip("# ").split() == list(df.columns)  # docs/api.md shows every column
    assert df.groupby("arm")["seed"].apply(list).to_dict() == {"control": [0, 1, 2], "lr=0.5": [0, 1, 2]}
    assert (df["status"] == "ok").all() and (df["duration_s"] > 0).all()
    assert df["val_acc"].between(0, 1).all()
    assert df.equals(ablate.load(verdict)) and df.equals(verdict.results())


def test_run_accepts_override_strings_and_dry_run(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert ablate.run(project / "conf", variable="lr", overrides=["task.epochs=1", "variable.values=[0.3]"],
                      dry_run=True) is None
    out = capsys.readouterr().out
    assert "task.optim.lr: 0.05 -> 0.3" in out and "dry run: nothing launched" in out


def test_api_errors_are_user_errors(project: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"'task\.epoch' is not a key of the config"):
        ablate.run(project / "conf", variable="lr", overrides={"task.epoch": 1})
    with pytest.raises(ConfigError, match="`on_failure`: must be one of report, retry, abort"):
        ablate.run(project / "conf", variable="lr", on_failure="explode")
    with pytest.raises(SweepDirError, match="is not an ablate sweep dir"):
        ablate.load(tmp_path)


@pytest.mark.parametrize(("kwargs", "said"), [
    ({"variable": "lr", "seeds": 2}, "`seeds`: 2 seeds per arm is below the minimum of 3"),
    ({"variable": "lr", "seeds": (5, 9)}, "`seeds`: lists 2 seeds [5, 9], below the minimum of 3 per arm"),
    ({"variable": "lr", "seeds": 1, "dry_run": True}, "`seeds`: 1 seed per arm is below the minimum of 3"),
    ({"variable": ["lr", "momentum"], "seeds": 2}, "`seeds`: 2 seeds per arm is below the minimum of 3"),
])
def test_api_refuses_too_few_seeds_before_any_trial(project: Path, kwargs: dict, said: str) -> None:
    with pytest.raises(ConfigError) as exc:
        ablate.run(project / "conf", launcher="inline", **kwargs)
    assert str(exc.value).startswith(said)
    assert "a verdict needs at least 3 seeds per arm for a mean, a spread and a test" in str(exc.value)
    assert not (project / "outputs").exists()


def test_run_from_a_subdirectory_runs_in_the_project_of_its_config_dir(project: Path) -> None:
    """A notebook in `notebooks/` calls `ablate.run("../conf", ...)`: the ablation runs in the project (its data,
    task module and sweep dir relative to the root, as `ablate --config-path ../conf` does), says so once, and
    the caller's working dir is its own again afterwards; the verdict's sweep dir is absolute."""
    import subprocess
    import sys

    nb = project / "notebooks"
    nb.mkdir()
    (nb / ".gitkeep").write_text("")
    add_pure_task(project)  # where the run happens is under test, not training: no torch in the notebook's process
    code = ("import os, ablate; v = ablate.run('../conf', variable='lr', values=[0.2], seeds=3, launcher='inline', "
            "overrides=['task=pure']); print(v.sweep_dir); print(os.getcwd()); print(sorted(v.words))")
    res = subprocess.run([sys.executable, "-c", code], cwd=nb, capture_output=True, text=True, timeout=900,
                         env={**__import__("os").environ, "PYTHONHASHSEED": "0"})
    assert res.returncode == 0, res.stderr[-3000:]
    sweep, cwd, arms = res.stdout.strip().splitlines()[-3:]
    assert Path(sweep).is_absolute() and Path(sweep).parent.parent == project / "outputs" / "ablate"
    assert cwd == str(nb) and arms == "['lr=0.2']"
    assert f"ablate: running in {project}, the project of config_dir ../conf" in res.stderr
    rows = ablate.load(sweep)
    assert len(rows) == 6 and set(rows["status"]) == {"ok"}


def test_a_notebook_holding_torch_then_extend_from_a_shell_finds_no_confound(project: Path) -> None:
    """A torch-free task run inline from a process that imported torch (a notebook) records torch's flags and
    threads (torch is loaded there); seeds added by ``ablate extend`` from a shell, whose process never imports
    torch, record none. The task never ran on torch, so that is no confound. It was one: ``determinism
    `flags_after.cudnn.benchmark` differs: control: False (3), null (2)`` and two more, ``ablate extend`` exiting
    1; and the thread variables were recorded only where torch was loaded (a warning). torch's own numbers are
    compared only between trials that recorded them (tests/unit/test_confounds_observed.py holds a real one)."""
    add_pure_task(project)
    notebook = ("import torch, ablate; ablate.run('conf', variable='lr', values=[0.5], seeds=[0, 1, 2], "
                "launcher='inline', overrides={'task': 'pure', 'task.epochs': 1}, sweep_dir='outputs/nb')")
    run([sys.executable, "-c", notebook], project, env={**os.environ, "DVC_NO_ANALYTICS": "1"})
    sd = project / "outputs" / "nb"
    held = json.loads((sd / "trials" / "control" / "seed=0" / "manifest.json").read_text())
    assert held["determinism"]["torch_flags"]["use_deterministic_algorithms"] is False  # recorded in the notebook
    out = ablate_cli(project, "extend", str(sd), "seeds=5")
    assert out.returncode == 0, out.stderr
    added = json.loads((sd / "trials" / "control" / "seed=3" / "manifest.json").read_text())
    assert added["determinism"].get("torch_flags") is None and "flags_after" not in added["determinism"]
    # the plan's thread variables are recorded as the trial ran with them, whether or not torch was loaded
    # (less PYTHONHASHSEED, per trial by design and exempt from the check)
    threads = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    for m in (added, held):
        assert {k: v for k, v in m["environment"]["env"].items() if k != "PYTHONHASHSEED"} == threads
    verdict = json.loads((sd / "verdict.json").read_text())
    assert verdict["confounds"]["checked"] == 10 and verdict["confounds"]["findings"] == [], verdict["confounds"]
    assert verdict["invalid"] is False
