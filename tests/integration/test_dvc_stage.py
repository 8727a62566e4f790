"""The example ablation as a DVC pipeline stage: `dvc repro ablate_lr` runs it, `dvc metrics show` prints its
numbers (summary.json, the one metrics file) as a short table and `dvc plots show` its per-seed values, and it
leaves the git tree clean but for dvc.lock; DVC's dvc_plots/ never makes the tree dirty for ablate."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest
import yaml

from ablate.record.sweepdir import PLOTS_HOLDER
from tests.helpers import ablate_in, commit_all, git, run

pytestmark = pytest.mark.slow


def dvc(project: Path, *args: str) -> str:
    env = {**os.environ, "DVC_NO_ANALYTICS": "1",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}  # `ablate` in the stage
    env.pop("PYTHONPATH", None)
    return run([sys.executable, "-m", "dvc", *args], project, env=env).stdout


def dvc_in(project: Path, *args: str) -> str:
    """What ``dvc ARGS`` prints, DVC's CLI entry (:func:`dvc.cli.main`) called in this process: no interpreter
    start and DVC imports (about 1.3 s of CPU a call). For the commands whose output is plain lines (``status``)
    or a file (``plots show``); ``repro`` (which starts ``ablate``) and the JSON and table output (written by a
    console DVC binds to the real stdout) stay with :func:`dvc`. The loggers DVC sets up are put back after it."""
    import contextlib
    import io

    from dvc.cli import main

    from tests.helpers import _loggers, _restore_loggers

    out, env, loggers = io.StringIO(), dict(os.environ), _loggers()
    os.environ["DVC_NO_ANALYTICS"] = "1"
    try:
        with contextlib.chdir(project), contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            code = main(list(args))
    finally:
        os.environ.clear()
        os.environ.update(env)
        _restore_loggers(loggers)
    assert code == 0, f"dvc {' '.join(args)} exited {code}"
    return out.getvalue()


def test_dvc_repro_runs_the_ablation_stage_and_dvc_reads_its_verdict(project: Path) -> None:
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["ablate_lr"].update(seeds=3, epochs=1, launcher="inline")
    (project / "params.yaml").write_text(yaml.safe_dump(params))
    commit_all(project, "small ablation for the test")

    dvc(project, "repro", "ablate_lr")
    sd = project / "outputs" / "dvc" / "lr"
    verdict = json.loads((sd / "verdict.json").read_text())
    # inside a DVC stage ($DVC_STAGE) the plots are drawn before ablate exits, not by a detached drawer: DVC
    # hashes verdict.json as the command ends, and a later rewrite would show the stage as modified
    assert verdict["plots"]["values"] == "verdict_values.png" and (sd / "verdict_values.png").is_file()
    assert PLOTS_HOLDER not in (sd / ".lock").read_text()
    assert [c["arm"] for c in verdict["comparisons"]] == ["lr=0.005", "lr=0.2"]
    assert git(project, "status", "--porcelain").split() == ["M", "dvc.lock"]  # outputs are git-ignored

    (workspace,) = json.loads(dvc(project, "metrics", "show", "--json")).values()  # keyed "" or "workspace"
    metrics = workspace["data"]
    assert list(metrics) == [str(Path("outputs/dvc/lr/summary.json"))]  # verdict.json is an output, not a metric
    summary = metrics[str(Path("outputs/dvc/lr/summary.json"))]["data"]
    assert summary == json.loads((sd / "summary.json").read_text())
    assert summary["control"] == {"n": 3, "mean": pytest.approx(verdict["arms"][0]["mean"]),
                                  "sd": pytest.approx(verdict["arms"][0]["sd"])}
    c = verdict["comparisons"][1]
    assert summary["lr=0.2"] == {"n": 3, "mean": pytest.approx(verdict["arms"][2]["mean"]),
                                 "sd": pytest.approx(verdict["arms"][2]["sd"]), "diff": pytest.approx(c["diff"]),
                                 "ci_low": pytest.approx(c["ci"][0]), "ci_high": pytest.approx(c["ci"][1]),
                                 "p_adj": pytest.approx(c["pvalue_adjusted"])}
    leaves = [v for row in summary.values() for v in row.values()]
    assert len(leaves) == 3 + 2 * 7 and all(type(v) in (int, float) for v in leaves)  # numbers only
    # the table a person reads: Path and one column per number (3 for the control, 7 per treatment), one row
    table = [ln for ln in dvc(project, "metrics", "show").splitlines() if ln.strip()]
    assert len(table) == 2, table
    header, row = (re.split(r"\s{2,}", ln.strip()) for ln in table)
    assert header[0] == "Path" and len(header) == 1 + 17 == len(row), table
    assert "control.mean" in header and "lr=0.2.p_adj" in header
    assert row[header.index("control.n")] == "3" and float(row[header.index("lr=0.2.diff")]) == pytest.approx(
        c["diff"], abs=1e-4)

    dvc_in(project, "plots", "show")  # writes dvc_plots/index.html: DVC's working file, never a change for ablate
    assert (project / "dvc_plots" / "index.html").is_file()
    plots = json.loads(dvc(project, "plots", "show", "--json"))["data"]["per-seed val_acc"][0]["content"]
    points = {(p["field"], p["seed"]): float(p["dvc_inferred_y_value"]) for p in plots["data"]["values"]}
    for arm in ("control", "lr=0.005", "lr=0.2"):
        for seed in (0, 1, 2):
            result = json.loads((sd / "trials" / arm / f"seed={seed}" / "result.json").read_text())
            assert points[arm, str(seed)] == pytest.approx(result["metrics"]["val_acc"])

    git(project, "add", "dvc.lock")
    git(project, "commit", "-q", "-m", "ablate_lr results")  # as after any `dvc repro`
    res = ablate_in(project, "-m", "variable=lr", "dry_run=true")
    assert res.returncode == 0, res.stderr
    assert "dirty" not in res.stdout and "dvc_plots" not in res.stdout  # neither a change nor an untracked file
    assert "up to date" in dvc_in(project, "status", "ablate_lr")
    # `dvc metrics diff`: one row per number, the committed run against a new one
    params["ablate_lr"].update(epochs=2)
    (project / "params.yaml").write_text(yaml.safe_dump(params))
    commit_all(project, "two epochs")
    dvc(project, "repro", "ablate_lr")
    diff = [re.split(r"\s{2,}", ln.strip()) for ln in dvc(project, "metrics", "diff", "--all").splitlines()
            if ln.strip()]
    assert diff[0] == ["Path", "Metric", "HEAD", "workspace", "Change"]
    assert sorted(r[1] for r in diff[1:]) == sorted(f"{arm}.{k}" for arm, row in summary.items() for k in row)
    assert all(len(r) == 5 for r in diff[1:]), diff
    commit_all(project, "ablate_lr at two epochs")
    task = project / "examples" / "digits" / "task.py"
    task.write_text(task.read_text() + "\n# a code change\n")
    commit_all(project, "edit the task")
    assert "modified:" in dvc_in(project, "status", "ablate_lr")  # so `dvc repro` would run the ablation again
