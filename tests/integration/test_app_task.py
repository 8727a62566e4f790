"""The ``app`` form: an existing Hydra project ablated as it is (its config is the control, its logs the metrics).

Two apps written for these tests, in the layouts real projects use, are copied into a real git + DVC
project byte for byte; every test checks they were not edited and that no shim file was added:

- tests/fixtures/lit_app: a Lightning-template layout (src/train.py, configs/ with model/ data/ trainer/
  logger/ paths/) that logs CSV and TensorBoard files the way Lightning does and seeds only
  ``if cfg.get("seed")``;
- tests/fixtures/plain_app: a plain @hydra.main app returning a dict, using ``${hydra:runtime.output_dir}``,
  ``${now:}`` and a resolver it registers itself (tests/slurm/test_slurm_pack_warm.py); here its torch-free twin
  tests/fixtures/light_app, the same shape and config keys with pure-Python training: what is checked is how the
  app's config is composed and recorded, not what it trains.

Dry runs and refusals run ablate's CLI entry in this process (:func:`tests.helpers.ablate_in`), on one copy of
the Lightning-style app's project for the module (``lit_dry``), and so does ``repro`` (the trial it re-runs is
its own child process, started as under the console script); runs and the single run the console script. The
Lightning-style app is ablated twice for the module (``lit_sweeps``: warm forks, and fresh processes reading
TensorBoard), and each test that needs a run asserts on those.
"""

from __future__ import annotations

import csv
import hashlib
import json
import shlex
import shutil
from pathlib import Path

import pytest
import yaml

from tests.helpers import REPO, ablate_cli, ablate_in, clean_env, commit_all, only_sweep

pytestmark = pytest.mark.slow
FIXTURES = REPO / "tests" / "fixtures"
LIT_TASK = {"app": "src/train.py", "overrides": ["trainer=cpu", "trainer.max_epochs=2",
                                                 "+trainer.limit_train_batches=6"],
            "metric": "val/acc", "goal": "maximize", "data": ["data/digits.npz"]}
PLAIN_TASK = {"app": "plain/app.py", "metric": "val_acc", "goal": "maximize", "data": ["data/digits.npz"]}


def _digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and "__pycache__" not in p.parts}


def write(root: Path, name: str, task: dict, variables: dict[str, dict]) -> None:
    (root / "conf" / "task" / f"{name}.yaml").write_text(yaml.safe_dump(task, sort_keys=False))
    for vname, var in variables.items():
        (root / "conf" / "variable" / f"{vname}.yaml").write_text(yaml.safe_dump(var, sort_keys=False))
    commit_all(root, f"{name} task")


def _add_lit(project: Path) -> Path:
    for part in ("src", "configs"):
        shutil.copytree(FIXTURES / "lit_app" / part, project / part, ignore=shutil.ignore_patterns("__pycache__"))
    write(project, "lit", LIT_TASK, {"lit_lr": {"key": "model.optimizer.lr", "values": [0.2]},
                                     "lit_model": {"group": "model", "values": ["mlp_wide"]}})
    return project


@pytest.fixture
def lit_project(project: Path) -> Path:
    return _add_lit(project)


@pytest.fixture(scope="module")
def lit_dry(project_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """:func:`lit_project` built once for the module's dry runs and refusals (in this process, :func:`ablate_in`):
    none of them writes into the project (each checks that no sweep dir appeared), so they share one copy and
    its commit."""
    project = tmp_path_factory.mktemp("lit_dry") / "proj"
    shutil.copytree(project_template, project, symlinks=True)
    with pytest.MonkeyPatch.context() as mp:
        clean_env(mp)
        return _add_lit(project)


@pytest.fixture(scope="module")
def lit_sweeps(project_template: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """The Lightning-style app ablated twice for the module: ``(project, warm, fresh)``. ``warm``: the default
    launcher (local, warm forks); ``fresh``: ``launcher=inline``, each trial a fresh ``python src/train.py`` the
    ablate process starts itself (``launcher.warm=false`` would wrap each in a ``python -m ablate.trials.trial``
    process too: ablate's imports again, six times; the threads are the plan's under every launcher), with its
    metric read from the app's TensorBoard events, reduced by max. Each run starts torch in every trial process of
    a fresh run: run once, asserted on by every test that needs it (issue 34)."""
    project = tmp_path_factory.mktemp("lit_sweeps") / "proj"
    shutil.copytree(project_template, project, symlinks=True)
    with pytest.MonkeyPatch.context() as mp:
        clean_env(mp)
        for part in ("src", "configs"):
            shutil.copytree(FIXTURES / "lit_app" / part, project / part, ignore=shutil.ignore_patterns("__pycache__"))
        write(project, "lit", LIT_TASK, {"lit_lr": {"key": "model.optimizer.lr", "values": [0.2]}})
        common = ("-m", "task=lit", "variable=lit_lr", "seeds=3")
        # one fork at a time: the app imports torch, numpy and TensorBoard's writer inside main(), and a fork that
        # starts before the warm parent learned an import pays for it itself (learned in two rounds here: side by
        # side, 2 forks imported all of them and 2 more TensorBoard's lazy parts; one at a time, 1 and 1)
        warm = ablate_in(project, *common, "launcher.max_parallel=1", "hydra.sweep.dir=outputs/warm")
        assert warm.returncode == 0, warm.stderr
        assert "starts a fresh" not in warm.stderr, warm.stderr  # no fallback was needed
        fresh = ablate_in(project, *common, "launcher=inline", "+task.metric_source=tensorboard",
                          "+task.reduce=max", "hydra.sweep.dir=outputs/fresh")
        assert fresh.returncode == 0, fresh.stderr
    return project, project / "outputs" / "warm", project / "outputs" / "fresh"


@pytest.fixture
def plain_project(project: Path) -> Path:
    shutil.copytree(FIXTURES / "light_app", project / "plain", ignore=shutil.ignore_patterns("__pycache__"))
    write(project, "plain", PLAIN_TASK, {"plain_lr": {"key": "lr", "values": [0.2]}})
    return project


def untouched(project: Path, fixture: str, parts: tuple[str, ...]) -> None:
    for part, dest in parts:
        assert _digest(project / dest) == _digest(FIXTURES / fixture / part)


def csv_series(path: Path, column: str) -> list[tuple[int, float]]:
    with open(path, newline="") as fh:
        return [(int(r["step"]), float(r[column])) for r in csv.DictReader(fh) if r[column]]


def test_dry_run_composes_the_apps_config_and_prints_each_arms_argv(lit_dry: Path) -> None:
    lit_project = lit_dry
    res = ablate_in(lit_project, "-m", "task=lit", "variable=lit_lr", "seeds=3", "dry_run=true",
                    "app.trainer.log_every_n_steps=2")
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert "task.params.model.optimizer.lr: 0.05 -> 0.2" in out, out
    lines = [x for x in out.splitlines() if x.strip().startswith("argv ")]
    assert len(lines) == 2, out
    # the exact argv, shell-quoted: it parses back to the arguments the trial passes
    control, treat = (shlex.split(x.split(": ", 1)[1]) for x in lines)
    app = ["python", "src/train.py", "trainer=cpu", "trainer.max_epochs=2", "+trainer.limit_train_batches=6",
           "trainer.log_every_n_steps=2"]  # the task's overrides, then the command line's app. override
    tail = ["seed=1",  # seeds=3 for a script task means 1..3: the first seed is 1, never 0
            "hydra.mode=RUN",  # one job per trial, whatever hydra.mode the app's config sets
            "hydra.run.dir='<trial dir>/run'",
            "+hydra.callbacks.ablate_return._target_=ablate.trials.tasks.hydra_callback.SaveReturn"]
    assert control == [*app, *tail]
    assert treat == [*app, "model.optimizer.lr=0.2", *tail]
    assert not list(lit_project.glob("outputs/ablate/*"))


def test_lightning_style_app_ablated_as_it_is(lit_sweeps: tuple[Path, Path, Path]) -> None:
    lit_project, sd, _ = lit_sweeps  # the default launcher (local, warm forks)
    untouched(lit_project, "lit_app", (("src", "src"), ("configs", "configs")))
    assert not (lit_project / "logs").exists()  # the app's own hydra.run.dir (logs/...) was replaced by the trial's
    verdict = json.loads((sd / "verdict.json").read_text())
    per_seed = {a["arm"]: a["values"] for a in verdict["arms"]}
    for arm, lr in (("control", 0.05), ("lr=0.2", 0.2)):
        for seed in (1, 2, 3):  # seeds=3 means 1..3 for a script task
            t = sd / "trials" / arm / f"seed={seed}"
            result = json.loads((t / "result.json").read_text())
            assert result["status"] == "ok", result
            # the app's own CSVLogger file: the verdict's value is its last val/acc (main returned it)
            (metrics_csv,) = (t / "run").glob("csv/version_0/metrics.csv")
            series = csv_series(metrics_csv, "val/acc")
            assert per_seed[arm][str(seed)] == result["metrics"]["val/acc"] == series[-1][1]
            assert result["metric_source"] == {"kind": "return", "path": str(t / "run" / "ablate_return.json"),
                                               "step": None, "reduce": "last", "n_logged": 1,
                                               "match": "key 'val/acc'"}
            # the app composed exactly the planned config: its seed, its lr, its own run dir
            seen = yaml.safe_load((t / "run" / ".hydra" / "config.yaml").read_text())
            assert seen["seed"] == seed and seen["model"]["optimizer"]["lr"] == lr
            assert seen["paths"]["output_dir"] == "${hydra:runtime.output_dir}"
            manifest = json.loads((t / "manifest.json").read_text())
            assert manifest["config"]["task"]["params"]["paths"]["output_dir"] == str(t / "run")
            # PROJECT_ROOT as the app set it in its own process: the code snapshot it ran, not the live tree
            assert manifest["config"]["task"]["params"]["paths"]["root_dir"] == str(sd / "code")
    assert verdict["confounds"]["findings"] == [], verdict["confounds"]
    setup = (sd / "verdict.md").read_text()
    assert "seeds start at 1" in setup and "each trial passes its seed as `seed=<seed>` and in $ABLATE_SEED" in setup
    assert "seeds itself" not in setup  # what the app does with its seed is not observed, so never claimed
    pinned = yaml.safe_load((sd / "ablation.yaml").read_text())["pins"]["config_files"]
    assert str(lit_project / "configs" / "model" / "mlp.yaml") in pinned  # the app's configs are hashed too
    for seed in (1, 2):  # weak reproducibility holds on the seeds tried, the first one included
        rep = ablate_in(lit_project, "repro", str(sd), "--trial", f"control/{seed}")  # its child re-runs it
        assert rep.returncode == 0, rep.stdout + rep.stderr
        assert "weak reproducibility (final metrics bitwise equal): holds" in rep.stdout
        # compared as the app saw them: its output dirs differ only by naming each run's own dir, said so
        assert "manifests differ" not in rep.stdout and "paths only (" in rep.stdout, rep.stdout
        assert "task.params.paths.output_dir" in rep.stdout.split("paths only (", 1)[1]


def test_plain_app_returning_a_dict_with_hydra_now_and_its_own_resolver(plain_project: Path) -> None:
    res = ablate_in(plain_project, "-m", "task=plain", "variable=plain_lr", "seeds=3", "launcher=inline")
    assert res.returncode == 0, res.stderr
    untouched(plain_project, "light_app", (("", "plain"),))
    assert not (plain_project / "None").exists() and not (plain_project / "outputs" / "None").exists()
    sd = only_sweep(plain_project)
    verdict = json.loads((sd / "verdict.json").read_text())
    per_seed = {a["arm"]: a["values"] for a in verdict["arms"]}
    run_ids = set()
    for arm in ("control", "lr=0.2"):
        for seed in (1, 2, 3):
            t = sd / "trials" / arm / f"seed={seed}"
            result = json.loads((t / "result.json").read_text())
            assert result["status"] == "ok", result
            assert result["metric_source"]["kind"] == "return"
            # ${hydra:runtime.output_dir} is the trial's own run dir, under launcher=inline too
            history = [json.loads(x) for x in (t / "run" / "history.jsonl").read_text().splitlines()]
            assert per_seed[arm][str(seed)] == result["metrics"]["val_acc"] == history[-1]["val_acc"]
            assert result["metrics"]["val_loss"] == history[-1]["val_loss"]
            run_ids.add((t / "run" / "run.txt").read_text())
            cfg = json.loads((t / "manifest.json").read_text())["config"]["task"]["params"]
            assert cfg["hidden"] == 32  # ${times:${width},2}: the app's own resolver, available to ablate
            assert cfg["out_dir"] == str(t / "run")
    # ${now:} resolved once for the ablation and frozen into every arm: one run_id, no confound
    assert len(run_ids) == 1 and next(iter(run_ids)).startswith("light_"), run_ids
    assert verdict["confounds"]["findings"] == [], verdict["confounds"]
    rep = ablate_in(plain_project, "repro", str(sd), "--trial", "lr=0.2/1")  # its child re-runs the trial
    assert rep.returncode == 0 and "weak reproducibility (final metrics bitwise equal): holds" in rep.stdout, rep.stdout


def test_group_swap_of_the_apps_own_config_group(lit_dry: Path) -> None:
    res = ablate_in(lit_dry, "-m", "task=lit", "variable=lit_model", "seeds=[4,5,6]", "dry_run=true")
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert "arms (2): control, model=mlp_wide" in out
    assert "task.params.model.hidden: 32 -> 128" in out and "task.params.model.name: mlp -> mlp_wide" in out
    treat = next(x for x in out.splitlines() if x.strip().startswith("argv model=mlp_wide"))
    assert "model=mlp_wide" in shlex.split(treat.split(": ", 1)[1]) and "seed=4" in treat


@pytest.mark.parametrize(("args", "where", "words"), [
    (("app.trainer.max_epoch=1",), "task.overrides", ["'trainer.max_epoch' is not a key of the app's config",
                                                       "Close matches: trainer.max_epochs"]),
    (("app.model=mlp_wid",), "task.overrides", ["the app has no model option 'mlp_wid'", "Close matches: mlp_wide"]),
    (("app.model.optimizer.lr=???",), "model.optimizer.lr", ["model.optimizer.lr unset (???",
                                                             "`app.model.optimizer.lr=<value>`"]),
    (("seeds=[0,1,2]",), "seeds", ["lists seed 0", "seeds=[1,2,3]"]),
    (("variable.key=model",), "variable=lit_lr", ["is a mapping", "`group: model`"]),  # the app's own group name
    (("variable.key=model.optimizer.lrr",), "variable=lit_lr", ["Close matches: task.params.model.optimizer.lr"]),
    (("+task.reduce=median",), "task.reduce", ["must be one of last, min, max"]),
    (("+task.params={lr: 1}",), "task.params", ["filled by ablate", "`overrides:`"]),
    (("+task.epochs=3",), "task.epochs", ["not a setting of an app task", "`overrides:`"]),
    (("+task.metric_source=csvs",), "task.metric_source", ["must be one of auto, return, csv"]),
])
def test_bad_app_input_is_one_line_naming_where_and_the_fix(lit_dry: Path, args: tuple[str, ...], where: str,
                                                            words: list[str]) -> None:
    lit_project = lit_dry
    res = ablate_in(lit_project, "-m", "task=lit", "variable=lit_lr", "dry_run=true", *args)
    assert res.returncode == 2, res.stderr
    (line,) = res.stderr.strip().splitlines()
    assert f"`{where}`" in line, line
    for w in words:
        assert w in line, line
    assert not list(lit_project.glob("outputs/ablate/*"))


def test_single_run_of_the_apps_control(lit_project: Path) -> None:
    zero = ablate_in(lit_project, "task=lit")
    assert zero.returncode == 2 and "`seed`: is 0" in zero.stderr and "seed=1" in zero.stderr, zero.stderr
    # the console script (the proof of it in this file; the sweeps run ablate's CLI entry in this process)
    res = ablate_cli(lit_project, "task=lit", "seed=3", "app.trainer.max_epochs=1", "hydra.run.dir=outputs/single")
    assert res.returncode == 0, res.stderr
    out = lit_project / "outputs" / "single"
    result = json.loads((out / "result.json").read_text())
    (metrics_csv,) = (out / "run").glob("csv/version_0/metrics.csv")
    assert result["metrics"]["val/acc"] == csv_series(metrics_csv, "val/acc")[-1][1]
    with open(metrics_csv, newline="") as fh:
        assert [r["epoch"] for r in csv.DictReader(fh) if r["val/acc"]] == ["0"]  # app.trainer.max_epochs=1
    assert yaml.safe_load((out / "run" / ".hydra" / "config.yaml").read_text())["seed"] == 3


def test_python_api_takes_app_overrides(lit_project: Path, capsys: pytest.CaptureFixture[str],
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    import ablate
    from ablate.errors import UserError
    from ablate.trials.tasks import app

    # ablate imports an app once per process, keyed by its path in the project (src/train.py): left in this
    # worker, the next file's app at the same path (tests/integration/test_app_context.py's store_app) was taken
    # as imported and its dry runs failed ("path=store_app_configs is not available"); ablate_in undoes it too
    monkeypatch.setattr(app, "_IMPORTED", set(app._IMPORTED))

    with pytest.raises(UserError, match=r"overrides \(trainer\.max_epochs=1\) are for an `app:` task"):
        ablate.run(variable="lit_lr", seeds=3, dry_run=True, overrides={"app.trainer.max_epochs": 1})  # task: digits
    assert ablate.run(variable="lit_lr", seeds=3, dry_run=True,
                      overrides=["task=lit", "app.trainer.max_epochs=1"]) is None
    lines = [x for x in capsys.readouterr().out.splitlines() if x.strip().startswith("argv ")]
    assert len(lines) == 2 and all("trainer.max_epochs=1" in shlex.split(x.split(": ", 1)[1]) for x in lines)


def test_metric_from_tensorboard_events_reduced_by_max(lit_sweeps: tuple[Path, Path, Path]) -> None:
    # fresh app processes (launcher=inline), the module's second run: where the metric is read from does not depend
    # on the launcher (tests/integration/test_fn_metric_sources.py runs both), and the same run is the fresh side
    # of test_a_lightning_style_warm_app_imports_once_and_logs_as_a_fresh_run
    _, _, sd = lit_sweeps
    for arm in ("control", "lr=0.2"):
        for seed in (1, 2, 3):
            t = sd / "trials" / arm / f"seed={seed}"
            result = json.loads((t / "result.json").read_text())
            (metrics_csv,) = (t / "run").glob("csv/version_0/metrics.csv")
            series = csv_series(metrics_csv, "val/acc")  # the same values the app logged to TensorBoard
            best_step, best = max(series, key=lambda sv: sv[1])
            assert result["metrics"]["val/acc"] == pytest.approx(best, abs=1e-7)  # event files hold float32
            src = result["metric_source"]
            assert (src["kind"], src["reduce"], src["n_logged"]) == ("tensorboard", "max", 2)  # max_epochs=2
            assert src["step"] == min(s for s, v in series if v == best) == best_step
            assert src["path"] == str(t / "run" / "tensorboard" / "version_0")


def test_a_lightning_style_warm_app_imports_once_and_logs_as_a_fresh_run(lit_sweeps: tuple[Path, Path, Path]) -> None:
    """Warm apps (issue 22.4; moved here from tests/integration/test_warm_app.py to share this module's two runs):
    each warm trial called the app's main in its fork and logged, value for value, what a fresh process logged
    for the same trial. The fresh run reads its metric from TensorBoard (the test above), so the two are compared
    on the app's own CSV log, every row of it (each epoch's val/acc and val/loss, the train loss every
    ``log_every_n_steps``), written with ``repr`` floats: byte-equal files are bit-equal values; the warm
    trial's value is that log's last val/acc, as before."""
    _, warm, fresh = lit_sweeps
    wt = {(d.parent.name, int(d.name.split("=")[1])): d for d in warm.glob("trials/*/seed=*")}
    ft = {(d.parent.name, int(d.name.split("=")[1])): d for d in fresh.glob("trials/*/seed=*")}
    assert set(wt) == set(ft) and len(wt) == 6
    for key, d in wt.items():
        result = json.loads((d / "result.json").read_text())
        assert "in_process" in json.loads((d / "command.json").read_text())
        assert "in_process" not in json.loads((ft[key] / "command.json").read_text())
        (csv_file,) = (d / "run").rglob("metrics.csv")
        (fresh_csv,) = (ft[key] / "run").rglob("metrics.csv")
        assert result["metrics"]["val/acc"] == csv_series(csv_file, "val/acc")[-1][1]  # the app's own CSV
        assert len(csv_series(csv_file, "val/acc")) == 2  # trainer.max_epochs=2: the whole run is compared
        assert csv_file.read_bytes() == fresh_csv.read_bytes(), key  # what a fresh process logged, bit for bit
