"""An ``fn`` task's metric from what it logged, by the sources script tasks use (issue 28, build item 2).

Two function tasks in a real git + DVC project, each returning nothing:

- ``train_csv`` writes a Lightning-style ``metrics.csv`` (``epoch,step,train_loss,val_loss``, validation rows
  apart from training rows, as Lightning's ``CSVLogger`` writes them) into ``$ABLATE_RUN_DIR``, or into
  ``HydraConfig.get().runtime.output_dir`` (``train_csv_hydra``), or into its working dir by a relative path
  (``train_csv_cwd``: the trial's own ``<trial dir>/work``); read with ``reduce: min``;
- ``train_print`` prints ``epoch N val loss X`` lines, the last one written with ``os.write(1, ...)`` (a C-level
  write, which ``contextlib.redirect_stdout`` would miss) and a subprocess's line on stderr; read with
  ``metric_pattern``.

Each runs under ``launcher=inline`` and ``launcher=local`` (warm), and every trial's value is checked against
what the task itself wrote, parsed here independently of ablate.

The ablations, the repro and the csv tasks' single runs are called in this process
(:func:`tests.helpers.ablate_in`): an inline trial, like a single run, is the orchestrator's own process either
way, and a local trial its child, so only the console script's interpreter start and ablate's imports (about
1.1 s of CPU per call) are saved. The print task's inline ablation runs the console script, as this file's proof
of it (its lines go to file descriptors 1 and 2: a C-level write, a subprocess); so does its single run, whose
C-level write must reach the terminal, which a capture in this process would miss.
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest
import yaml

from tests.helpers import ablate_cli, ablate_in, commit_all, results

pytestmark = pytest.mark.slow

TASKS = '''
import math
import os
import subprocess
import sys
from pathlib import Path


def _losses(cfg):
    return [round(1.0 / (1 + cfg.task.lr * e) + 0.01 * math.sin(cfg.seed + e) + 0.02 * (e == 3), 6)
            for e in range(1, 5)]


def _write_csv(run_dir, cfg):
    rows = ["epoch,step,train_loss,val_loss"]
    for e, v in enumerate(_losses(cfg), 1):
        rows.append(f"{e - 1},{e * 10 - 1},{v + 0.1:.6f},")  # a training row (val_loss empty)
        rows.append(f"{e - 1},{e * 10 - 1},,{v:.6f}")        # a validation row (train_loss empty)
    (Path(run_dir) / "metrics.csv").write_text("\\n".join(rows) + "\\n")


def train_csv(cfg):
    _write_csv(os.environ["ABLATE_RUN_DIR"], cfg)


def train_csv_cwd(cfg):
    _write_csv(".", cfg)  # its cwd: the trial's own working dir


def train_csv_hydra(cfg):
    from hydra.core.hydra_config import HydraConfig

    _write_csv(HydraConfig.get().runtime.output_dir, cfg)
    return {"epochs_run": 4}


def train_print(cfg):
    losses = _losses(cfg)
    for e, v in enumerate(losses[:-1], 1):
        print(f"epoch {e} val loss {v:.6f}")
    sys.stdout.flush()
    subprocess.run([sys.executable, "-c", "import sys; print('a child says val loss 9.0', file=sys.stderr)"],
                   check=True)
    os.write(1, f"epoch {len(losses)} val loss {losses[-1]:.6f}\\n".encode())
'''
PATTERN = r"epoch (?P<step>\d+) val loss (?P<val_loss>[0-9.]+)"
CASES = {
    "csv": {"fn": "fnsrc:train_csv", "reduce": "min"},
    "csv_hydra": {"fn": "fnsrc:train_csv_hydra", "reduce": "min"},
    "csv_cwd": {"fn": "fnsrc:train_csv_cwd", "reduce": "min"},
    "print": {"fn": "fnsrc:train_print", "metric_pattern": PATTERN, "metric_source": "stdout"},
}


def setup(dest: Path) -> Path:
    """The tasks of :data:`CASES` (``task=fnsrc_<case>``) and the variable ``fnlr`` in the project, committed."""
    (dest / "fnsrc.py").write_text(TASKS)
    for name, task in CASES.items():
        (dest / "conf" / "task" / f"fnsrc_{name}.yaml").write_text(yaml.safe_dump(
            {**task, "lr": 0.5, "metric": "val_loss", "goal": "minimize"}, sort_keys=False))
    (dest / "conf" / "variable" / "fnlr.yaml").write_text(yaml.safe_dump({"key": "task.lr", "values": [2.0]}))
    commit_all(dest, "fn tasks that log their metric")
    return dest


@pytest.fixture(scope="module")
def proj(project_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    import shutil

    dest = tmp_path_factory.mktemp("fnsrc") / "proj"
    shutil.copytree(project_template, dest, symlinks=True)
    return setup(dest)


def sweep_of(root: Path, *args: str, console: bool = False) -> Path:
    """The sweep dir a new ablation of ``variable=fnlr`` with ``args`` made: run in this process, or by the console
    script where ``console`` (see the module doc)."""
    before = set(root.glob("outputs/ablate/*/*"))
    argv = ("-m", "variable=fnlr", "seeds=3", *args)
    res = ablate_cli(root, *argv) if console else ablate_in(root, *argv)
    assert res.returncode == 0, f"{args}\n{res.stdout}\n{res.stderr}"
    (new,) = set(root.glob("outputs/ablate/*/*")) - before
    return new


def csv_min(path: Path) -> tuple[float, int]:
    """The smallest val_loss the task wrote, and its step (read with the csv module, not pandas)."""
    with path.open() as fh:
        rows = [r for r in csv.DictReader(fh) if r["val_loss"]]
    best = min(rows, key=lambda r: float(r["val_loss"]))
    return float(best["val_loss"]), int(best["step"])


LAUNCHERS = {"inline": ("launcher=inline",), "local-warm": ("launcher=local", "launcher.warm=true")}


@pytest.mark.parametrize("launcher", LAUNCHERS)
@pytest.mark.parametrize("case", ["csv", "csv_hydra", "csv_cwd"])
def test_fn_returning_nothing_read_from_its_metrics_csv(proj: Path, case: str, launcher: str) -> None:
    sd = sweep_of(proj, f"task=fnsrc_{case}", *LAUNCHERS[launcher])
    recs = results(sd)
    assert len(recs) == 6
    verdict = json.loads((sd / "verdict.json").read_text())
    per_seed = {a["arm"]: a["values"] for a in verdict["arms"]}
    for (arm, seed), rec in recs.items():
        assert rec["status"] == "ok", rec
        assert "inline_restored" not in rec, rec  # $ABLATE_RUN_DIR is ablate's setting, not the task's change
        csv_path = sd / "trials" / arm / f"seed={seed}" / ("work" if case == "csv_cwd" else "run") / "metrics.csv"
        want, step = csv_min(csv_path)
        assert rec["metrics"]["val_loss"] == want == per_seed[arm][str(seed)]
        src = rec["metric_source"]
        assert src["kind"] == "csv" and src["path"] == str(csv_path) and src["reduce"] == "min"
        assert src["step"] == step and src["n_logged"] == 4
        assert src["match"] == f"row with step {step}: val_loss = {want!r}"
        if case == "csv_hydra":  # what the function returned is kept beside what it logged
            assert rec["metrics"]["epochs_run"] == 4
    # the treatment really ran with its own lr: its values differ from control's for every seed
    assert all(per_seed["control"][s] != per_seed["lr=2.0"][s] for s in per_seed["control"])


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_fn_printing_its_metric_read_by_pattern(proj: Path, launcher: str) -> None:
    sd = sweep_of(proj, "task=fnsrc_print", *LAUNCHERS[launcher], console=launcher == "inline")  # the proof of it
    check_printed(sd)
    if launcher == "local-warm":  # a re-run reads its own printed lines the same way, to the same value
        again = ablate_in(proj, "repro", str(sd), "--trial", "lr=2.0/1")
        assert again.returncode == 0, again.stdout + again.stderr
        assert "weak reproducibility (final metrics bitwise equal): holds" in again.stdout
        rerun = json.loads((sd / "repro" / "lr=2.0" / "seed=1" / "1" / "result.json").read_text())
        assert rerun["metric_source"]["path"] == str(sd / "repro" / "lr=2.0" / "seed=1" / "1" / "stdout.log")
        assert rerun["metrics"]["val_loss"] == results(sd)["lr=2.0", 1]["metrics"]["val_loss"]


def check_printed(sd: Path) -> None:
    """Every trial of the print task: ok, its value the last matched line of its own stdout.log, recorded so."""
    recs = results(sd)
    assert len(recs) == 6
    for (arm, seed), rec in recs.items():
        assert rec["status"] == "ok", rec
        t = sd / "trials" / arm / f"seed={seed}"
        lines = (t / "stdout.log").read_text().splitlines()
        printed = [m for m in map(re.compile(PATTERN).search, lines) if m]
        assert len(printed) == 4  # every line, the C-level write included, reached the trial's own log
        last = printed[-1]
        assert int(last["step"]) == 4
        assert rec["metrics"]["val_loss"] == float(last["val_loss"])
        src = rec["metric_source"]
        assert src["kind"] == "stdout" and src["path"] == str(t / "stdout.log") and src["reduce"] == "last"
        assert src["pattern"] == [PATTERN] and src["step"] == 4
        assert src["match"] == f"line {lines.index(last.string) + 1}: {last.string}"
        assert "a child says val loss 9.0" in (t / "stderr.log").read_text()  # the task's subprocess too


def test_fn_returning_nothing_and_logging_nothing_stops_with_what_it_found(proj: Path) -> None:
    res = ablate_in(proj, "-m", "variable=fnlr", "seeds=3", "task=fnsrc_print", "launcher=inline",
                    "task.metric_pattern='val acc (?P<val_loss>[0-9.]+)'")
    assert res.returncode == 2, res.stdout + res.stderr
    err = res.stderr.strip().splitlines()[-1]
    assert err.startswith("ablate: error: ") and "the function returned None" in err
    assert "epoch 4 val loss" in err  # the closest printed lines are shown


def test_fn_metric_settings_checked_before_any_trial(proj: Path) -> None:
    before = set(proj.glob("outputs/ablate/*/*"))
    # a refusal before any trial
    res = ablate_in(proj, "-m", "variable=fnlr", "seeds=3", "task=fnsrc_csv", "launcher=inline", "task.reduce=median")
    assert res.returncode == 2
    assert res.stderr.strip().splitlines()[-1] == ("ablate: error: `task.reduce`: must be one of last, min, max, "
                                                   "got 'median'. Fix: e.g. `reduce: min` for the best validation "
                                                   "loss over steps.")
    assert set(proj.glob("outputs/ablate/*/*")) == before, "refused before any sweep dir or trial"


@pytest.mark.parametrize("case", ["csv", "csv_cwd", "print"])
def test_single_run_reads_the_same_sources(proj: Path, case: str) -> None:
    """``ablate`` without ``-m``: one run in Hydra's run dir, which is $ABLATE_RUN_DIR, read the same way."""
    # the print case by the console script: its C-level write must reach the terminal (see the module doc)
    res = ablate_cli(proj, f"task=fnsrc_{case}", "seed=1") if case == "print" else \
        ablate_in(proj, f"task=fnsrc_{case}", "seed=1")
    assert res.returncode == 0, res.stdout + res.stderr
    result_path = Path(res.stdout.strip().splitlines()[-1])
    rec = json.loads(result_path.read_text())
    run = result_path.parent
    if case.startswith("csv"):  # csv_cwd: in the run's own working dir, never the live project
        want, step = csv_min(run / ("work" if case == "csv_cwd" else "") / "metrics.csv")
        assert not (proj / "metrics.csv").exists()
        assert rec["metric_source"]["kind"] == "csv" and rec["metric_source"]["step"] == step
    else:
        lines = (run / "stdout.log").read_text().splitlines()
        want = float(re.search(PATTERN, lines[-1])["val_loss"])  # type: ignore[index]
        assert rec["metric_source"]["kind"] == "stdout" and rec["metric_source"]["step"] == 4
        assert lines[-1] in res.stdout  # still shown on the terminal
    assert rec["metrics"]["val_loss"] == want
    assert f"metric 'val_loss' from {rec['metric_source']['kind']}" in res.stderr
