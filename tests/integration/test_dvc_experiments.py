"""DVC's own experiment workflow (issue 17, item 7): `dvc exp run -S ...` of the example stage writes a verdict,
`dvc exp show` lists its metrics, and the params change DVC makes is pinned by content, not refused as dirty."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.helpers import commit_all, git, run


def dvc(project: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DVC_NO_ANALYTICS": "1",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}  # `ablate` in the stage
    env.pop("PYTHONPATH", None)
    return run([sys.executable, "-m", "dvc", *args], project, env=env, check=check)

pytestmark = pytest.mark.slow


def small_params(project: Path) -> None:
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["ablate_lr"].update(seeds=4, epochs=1, launcher="inline")  # each test sets seeds=3 with `-S`
    (project / "params.yaml").write_text(yaml.safe_dump(params))
    commit_all(project, "small ablation for the test")


def test_dvc_exp_run_writes_a_verdict_that_exp_show_lists(project: Path) -> None:
    small_params(project)
    baseline = git(project, "rev-parse", "HEAD").strip()
    dvc(project, "exp", "run", "-S", "ablate_lr.seeds=3", "-n", "three-seeds", "ablate_lr")
    sd = project / "outputs" / "dvc" / "lr"
    verdict = json.loads((sd / "verdict.json").read_text())
    assert [a["n"] for a in verdict["arms"]] == [3, 3, 3]  # the -S value reached the ablation
    plan = yaml.safe_load((sd / "ablation.yaml").read_text())
    code = plan["pins"]["code"]
    assert code["dirty"] is False and code["commit"] == baseline
    pinned = hashlib.sha256((project / "params.yaml").read_bytes()).hexdigest()
    assert code["dvc_params"] == {"params.yaml": pinned}  # the params file as DVC set it
    assert code["dvc_experiment"] == {"stage": "ablate_lr", "baseline": baseline, "name": "three-seeds"}
    assert yaml.safe_load((sd / "code" / "params.yaml").read_text())["ablate_lr"]["seeds"] == 3  # the snapshot too
    md = (sd / "verdict.md").read_text()
    assert "params: `params.yaml` changed from the commit by DVC" in md and "name `three-seeds`" in md
    rows = json.loads(dvc(project, "exp", "show", "--json").stdout)
    exps = [e for row in rows for e in (row.get("experiments") or []) if e.get("name") == "three-seeds"]
    assert exps, rows
    (rev,) = [r for e in exps for r in e["revs"]]
    metrics = rev["data"]["metrics"]
    assert "data" in metrics.get(str(Path("outputs/dvc/lr/summary.json")), {}), metrics
    summary = metrics[str(Path("outputs/dvc/lr/summary.json"))]["data"]
    assert summary == json.loads((sd / "summary.json").read_text())
    assert sum(len(row) for row in summary.values()) == 17  # 3 numbers for the control, 7 per treatment
    # `dvc exp show`'s table: the metrics are those 17 numbers, no string or list among them
    header = dvc(project, "exp", "show", "--csv").stdout.splitlines()[0].split(",")
    metric_cols = [h for h in header if h.startswith(("control.", "lr=0.005.", "lr=0.2."))]
    assert len(metric_cols) == 17 and "lr=0.2.p_adj" in metric_cols, header
    assert not [h for h in header if h.startswith(("arms.", "comparisons.", "metric", "pins", "goal"))]
    assert rev["data"]["params"]["params.yaml"]["data"]["ablate_lr"]["seeds"] == 3


@pytest.mark.parametrize(("stage", "accepted"), [(None, False), ("ablate_lr", True), ("prepare", False),
                                              ("no_such_stage", False)])
def test_params_change_is_pinned_only_for_the_stage_that_tracks_it(project: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   stage: str | None, accepted: bool) -> None:
    from ablate.errors import PinError
    from ablate.pin.pins import pin_code

    params = yaml.safe_load((project / "params.yaml").read_text())
    params["ablate_lr"]["seeds"] = 4
    (project / "params.yaml").write_text(yaml.safe_dump(params))
    for var in ("DVC_STAGE", "DVC_ROOT", "DVC_EXP_BASELINE_REV", "DVC_EXP_NAME"):
        monkeypatch.delenv(var, raising=False)
    if stage:
        monkeypatch.setenv("DVC_STAGE", stage)
    if not accepted:
        with pytest.raises(PinError, match=r"uncommitted changes \(params\.yaml\)"):
            pin_code(project, allow_dirty=False)
        return
    pin = pin_code(project, allow_dirty=False)
    assert pin["dirty"] is False and pin["dvc_experiment"] == {"stage": stage}
    assert pin["dvc_params"] == {"params.yaml": hashlib.sha256((project / "params.yaml").read_bytes()).hexdigest()}


def test_other_changes_inside_a_dvc_stage_are_still_refused(project: Path) -> None:
    small_params(project)
    with open(project / "examples" / "digits" / "task.py", "a") as fh:
        fh.write("\n# edited\n")
    res = dvc(project, "exp", "run", "-S", "ablate_lr.seeds=3", "ablate_lr", check=False)
    out = res.stdout + res.stderr
    assert res.returncode != 0 and "uncommitted changes" in out and "task.py" in out, out
