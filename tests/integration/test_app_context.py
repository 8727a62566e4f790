"""An app composed by Hydra with the app's own context, run in its own trial dirs, recorded as it saw itself.

tests/fixtures/store_app is laid out like the public Lightning + Hydra templates and uses what real
apps use and a plain config-dir composition misses: a dataclass / Enum schema its module stores in
ConfigStore, ``hydra.searchpath: [pkg://store_app_configs]`` (``model/small`` lives only there), a
resolver registered inside ``main()``, ``hydra.mode: MULTIRUN``, ``hydra.job.chdir: false`` with
``metrics.json`` and ``checkpoints/last.pt`` written to the working dir, ``PROJECT_ROOT`` set when
imported, ``${hydra:job.override_dirname}`` in its config, and torch imported at module top. It is
copied into a real git + DVC project byte for byte and never edited (checked).
"""

from __future__ import annotations

import hashlib
import json
import shlex
import shutil
import textwrap
from pathlib import Path

import pytest
import yaml

from tests.helpers import REPO, ablate_cli, ablate_in, clean_env, commit_all, run

pytestmark = pytest.mark.slow
FIXTURE = REPO / "tests" / "fixtures" / "store_app"
TASK = {"app": "src/train.py", "metric": "val_acc", "goal": "maximize", "data": ["data/digits.npz"]}
#: The suite and transfer runs' launcher: forks of a warm parent that imported the app (and torch, at its top) once
#: per sweep, each calling the app's main (checked in :func:`check_store_sweep`), not 9 and 12 fresh interpreters
#: each importing torch. Until the warm parent put the app's module in ``sys.modules``, this app's dataclass
#: schema failed to import there and every trial silently started afresh.
WARM = ("launcher=local", "launcher.max_parallel=2", "launcher.warm=true")
VARIABLES = {"store_lr": {"key": "optim.lr", "values": [0.2]}, "store_model": {"group": "model", "values": ["small"]},
             "store_opt": {"key": "optim.name", "values": ["adam"]}}


def _digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and "__pycache__" not in p.parts}


def _add_store_app(project: Path) -> Path:
    for part in ("src", "configs"):
        shutil.copytree(FIXTURE / part, project / part, ignore=shutil.ignore_patterns("__pycache__"))
    (project / "conf" / "task" / "store.yaml").write_text(yaml.safe_dump(TASK, sort_keys=False))
    for name, var in VARIABLES.items():
        (project / "conf" / "variable" / f"{name}.yaml").write_text(yaml.safe_dump(var, sort_keys=False))
    commit_all(project, "store app")
    return project


@pytest.fixture
def store_project(project: Path) -> Path:
    return _add_store_app(project)


@pytest.fixture(scope="module")
def store_dry(project_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """:func:`store_project` built once for the module's dry runs and refusals (in this process,
    :func:`ablate_in`): none of them writes into the project (the dry run checks that no sweep dir appeared), so
    they share one copy and its commit."""
    dest = tmp_path_factory.mktemp("store_dry") / "proj"
    shutil.copytree(project_template, dest, symlinks=True)
    with pytest.MonkeyPatch.context() as mp:
        clean_env(mp)
        return _add_store_app(dest)


@pytest.fixture(scope="module")
def shared_store(project_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One store_app project for the suite, transfer and repro cases (each runs its own sweep in it)."""
    dest = tmp_path_factory.mktemp("store_shared") / "proj"
    shutil.copytree(project_template, dest, symlinks=True)
    return _add_store_app(dest)


def untouched(project: Path) -> None:
    for part in ("src", "configs"):
        assert _digest(project / part) == _digest(FIXTURE / part)


def argv_lines(out: str) -> dict[str, str]:
    return {x.split()[1]: x.split(": ", 1)[1] for x in out.splitlines() if x.strip().startswith("argv ")}


def test_dry_run_composes_with_the_apps_schema_search_path_and_run_mode(store_dry: Path) -> None:
    store_project = store_dry
    res = ablate_in(store_project, "-m", "task=store", "variable=store_model", "seeds=3", "dry_run=true")
    assert res.returncode == 0, res.stderr
    out = res.stdout
    # model/small exists only on the app's pkg:// search path; its values come from there
    assert "task.params.model.hidden: 32 -> 8" in out and "task.params.model.name: mlp -> small" in out, out
    argv = argv_lines(out)
    assert set(argv) == {"control", "model=small"}
    assert all(" hydra.mode=RUN " in a for a in argv.values())  # forced: the app's config says MULTIRUN
    assert "the app's config sets MULTIRUN; each trial runs it with hydra.mode=RUN" in out
    assert "resolved only in the trial: trainer.steps_per_epoch" in out  # `batches` is registered in main()
    # the schema's Enum field, ablated by name, as Hydra takes it on the command line
    enum = ablate_in(store_project, "-m", "task=store", "variable=store_opt", "seeds=3", "dry_run=true")
    assert enum.returncode == 0, enum.stderr
    assert "task.params.optim.name: sgd -> adam" in enum.stdout
    assert "optim.name='adam'" in shlex.split(argv_lines(enum.stdout)["name=adam"])  # a string, Hydra converts it
    assert not list(store_project.glob("outputs/ablate/*"))


@pytest.mark.parametrize(("args", "where", "words"), [
    # (a key whose value only main()'s resolver gives, depending on the variable, is run and proved from the
    # trials' records since issue 35, item 8: tests/integration/test_trial_resolved_proof.py)
    # Hydra's own list of options, the search path's included
    (("variable=store_lr", "app.model=smal"), "task.overrides", ["no model option 'smal'", "Close matches: small"]),
    # the ConfigStore schema's Enum refuses a name it lacks, with Hydra's reason
    (("variable=store_lr", "app.optim.name=adamw"), "task.overrides", ["Invalid value 'adamw'"]),
    # a treatment value the schema refuses, caught when Hydra composes the treatment at plan time
    (("variable=store_opt", "variable.values=[adamw]"), "variable.values", ["treatment name=adamw",
                                                                             "Invalid value 'adamw'"]),
])
def test_what_the_app_context_refuses_is_one_line(store_dry: Path, args: tuple[str, ...], where: str,
                                                  words: list[str]) -> None:
    res = ablate_in(store_dry, "-m", "task=store", "seeds=3", "dry_run=true", *args)
    assert res.returncode == 2, res.stdout + res.stderr
    (line,) = res.stderr.strip().splitlines()
    assert f"`{where}`" in line, line
    for w in words:
        assert w in line, line


def test_store_app_ablated_as_it_is(shared_store: Path, store_suite: Path) -> None:
    """The control and the key arm (``store_lr``) of :func:`store_suite`, a key-and-group suite run with the default
    launcher: the same trials a run of ``variable=store_lr`` alone makes, which this test ran until issue 34 (6
    more trials of a torch app); the group arm is checked by the suite's own test."""
    store_project, sd = shared_store, store_suite
    untouched(store_project)
    verdict = json.loads((sd / "verdict.json").read_text())
    assert not verdict["invalid"] and verdict["confounds"]["findings"] == [], verdict["confounds"]
    per_seed = {a["arm"]: a["values"] for a in verdict["arms"]}
    seen: dict[tuple[str, int], dict] = {}
    for arm in ("control", "lr=0.2"):
        for seed in (1, 2, 3):
            t = sd / "trials" / arm / f"seed={seed}"
            assert json.loads((t / "result.json").read_text())["status"] == "ok"
            # chdir=false: the app's metrics file and checkpoint are in this trial's own working dir
            own = json.loads((t / "work" / "metrics.json").read_text())
            assert per_seed[arm][str(seed)] == own["history"][-1]["val_acc"]  # the app's own log
            assert (t / "work" / "checkpoints" / "last.pt").stat().st_size > 0
            assert (t / "run" / ".hydra" / "config.yaml").is_file() and not (t / "work" / "multirun").exists()
            manifest = json.loads((t / "manifest.json").read_text())
            params = manifest["config"]["task"]["params"]
            # recorded as the app saw it: its override_dirname, its own resolver's value, its PROJECT_ROOT
            overrides = f"optim.lr=0.2,seed={seed}" if arm != "control" else f"seed={seed}"
            assert params["run_name"] == own["run_name"] == f"train_{overrides}"
            assert manifest["seen"]["hydra"]["job.override_dirname"] == overrides
            assert manifest["seen"]["hydra"]["mode"] == "RUN"
            assert params["trainer"]["steps_per_epoch"] == 8 and params["root_dir"] == str(sd / "code")
            seen[arm, seed] = params
    for seed in (1, 2, 3):  # each treatment trial's config differs from control's in exactly its own key
        a, b = seen["control", seed], seen["lr=0.2", seed]
        differ = {f"{k}.{k2}" for k in a for k2 in (a[k] if isinstance(a[k], dict) else {"": 0})
                  if (a[k].get(k2) if isinstance(a[k], dict) else a[k]) != (b[k].get(k2) if isinstance(b[k], dict)
                                                                            else b[k])}
        assert differ == {"optim.lr", "run_name."}, differ  # run_name reads ${hydra:job.override_dirname}
    for root in (sd / "code", store_project):  # nothing the trials wrote reached the shared snapshot or the project
        assert not (root / "metrics.json").exists() and not (root / "checkpoints").exists()
        assert not (root / "multirun").exists()
    md = (sd / "verdict.md").read_text()
    assert "| resolved only in the trial | `task.params.trainer.steps_per_epoch`" in md
    assert "the app's config sets hydra.mode=MULTIRUN; each trial ran it with hydra.mode=RUN" in md
    rep = ablate_in(store_project, "repro", str(sd), "--trial", "lr=0.2/2")
    assert rep.returncode == 0, rep.stdout + rep.stderr
    assert "weak reproducibility (final metrics bitwise equal): holds" in rep.stdout
    assert "manifests differ" not in rep.stdout, rep.stdout


def test_a_single_run_of_the_store_app_writes_into_its_run_dir_never_the_live_project(store_project: Path) -> None:
    status = run(["git", "status", "--porcelain"], store_project).stdout
    res = ablate_in(store_project, "task=store", "seed=2", "hydra.run.dir=outputs/single")
    assert res.returncode == 0, res.stderr
    out = store_project / "outputs" / "single"
    result = json.loads((out / "result.json").read_text())
    # chdir=false: its metrics file and checkpoint are in the run's own working dir, and the value is the app's log
    own = json.loads((out / "work" / "metrics.json").read_text())
    assert own["seed"] == 2 and result["metrics"]["val_acc"] == own["history"][-1]["val_acc"]
    assert (out / "work" / "checkpoints" / "last.pt").stat().st_size > 0
    assert (out / "work" / "src" / "train.py").resolve() == store_project / "src" / "train.py"  # the live code
    assert not (store_project / "metrics.json").exists() and not (store_project / "checkpoints").exists()
    assert run(["git", "status", "--porcelain"], store_project).stdout == status
    untouched(store_project)


SCRIPT = textwrap.dedent("""\
    import json, os, sys
    from pathlib import Path

    args = dict(a.split("=", 1) for a in sys.argv[1:])
    Path("checkpoint.pt").write_text(args["lr"])  # into its working dir
    if args.get("into_code") == "true":
        (Path(__file__).resolve().parent / "last.ckpt").write_text("x")  # into the code it runs from
    score = float(args["lr"]) + int(os.environ["ABLATE_SEED"]) / 1000  # seeded by the seed it is handed
    Path(os.environ["ABLATE_METRICS_FILE"]).write_text(json.dumps({"val_acc": score}))
""")


@pytest.mark.parametrize("into_code", [False, True])
def test_a_command_writes_into_its_own_trial_dir_and_a_write_into_the_snapshot_is_named(
        project: Path, into_code: bool) -> None:
    (project / "ckpt.py").write_text(SCRIPT)
    task = {"command": "python ckpt.py", "params": {"lr": 0.1, "into_code": into_code}, "seed_key": None,
            "output_dir_key": None, "metric": "val_acc"}
    (project / "conf" / "task" / "ckpt.yaml").write_text(yaml.safe_dump(task))
    (project / "conf" / "variable" / "ckpt_lr.yaml").write_text(yaml.safe_dump({"key": "task.params.lr",
                                                                                "values": [0.2]}))
    commit_all(project, "ckpt script")
    # the console script, as this file's proof of it (its cheapest ablation); the others run in this process
    res = ablate_cli(project, "-m", "task=ckpt", "variable=ckpt_lr", "seeds=3", "launcher=inline")
    (sd,) = sorted(p.parent for p in project.glob("outputs/ablate/*/*/ablation.yaml"))
    if not into_code:
        assert res.returncode == 0, res.stderr
        for arm, lr in (("control", "0.1"), ("lr=0.2", "0.2")):
            for seed in (1, 2, 3):
                t = sd / "trials" / arm / f"seed={seed}"
                assert (t / "work" / "checkpoint.pt").read_text() == lr
                assert json.loads((t / "command.json").read_text())["cwd"] == str(t / "work")
        assert not (sd / "code" / "checkpoint.pt").exists() and not (project / "checkpoint.pt").exists()
        return
    assert res.returncode != 0
    written = sd / "code" / "last.ckpt"
    assert f"wrote into the shared code snapshot, which every trial of the ablation reads: {written}" in res.stderr, \
        res.stderr
    result = json.loads((sd / "trials" / "control" / "seed=1" / "result.json").read_text())
    assert result["status"] == "failed" and str(sd / "code" / "last.ckpt") in result["error"]


def _flat(d: dict, prefix: str = "") -> dict[str, object]:
    out: dict[str, object] = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def check_store_sweep(sd: Path, own_keys: dict[str, set[str]]) -> dict[str, dict[int, dict[str, object]]]:
    """A valid verdict; each trial's value is the app's own log; each treatment differs from control in its own keys.

    ``own_keys`` maps each treatment arm to the keys of the app's config its variable changes. ``run_name`` reads
    ``${hydra:job.override_dirname}`` (the trial's own overrides), so it differs too, as the app saw it.
    Returns the composed config each trial's app saw (its manifest's params, flattened), by arm and seed.
    """
    verdict = json.loads((sd / "verdict.json").read_text())
    assert not verdict["invalid"] and verdict["confounds"]["findings"] == [], verdict
    plan = yaml.safe_load((sd / "ablation.yaml").read_text())
    arms = [a["name"] for a in plan["arms"]]
    assert arms == ["control", *own_keys], arms
    per_seed = {a["arm"]: a["values"] for a in verdict["arms"]}
    seen: dict[str, dict[int, dict[str, object]]] = {}
    for arm in arms:
        for seed in (1, 2, 3):
            t = sd / "trials" / arm / f"seed={seed}"
            assert json.loads((t / "result.json").read_text())["status"] == "ok"
            own = json.loads((t / "work" / "metrics.json").read_text())
            assert per_seed[arm][str(seed)] == own["history"][-1]["val_acc"]  # the app's own log
            manifest = json.loads((t / "manifest.json").read_text())
            # a fork of the warm parent that called the app's main (WARM), never a fresh `python src/train.py`
            assert json.loads((t / "command.json").read_text())["in_process"]["function"] == "main"
            # torch's threads and flags as the app's own process had them (ablate's process imported the app
            # module to compose it, so its own torch is not what the trial ran with): the plan's threads
            assert manifest["determinism"]["threads"] == manifest["determinism"]["threads_after"] == 1, manifest
            assert manifest["environment"]["torch_threads"] == 1
            assert manifest["determinism"]["flags_after"]["use_deterministic_algorithms"] is False
            params = manifest["config"]["task"]["params"]
            assert params["run_name"] == own["run_name"] and params["seed"] == own["seed"] == seed
            seen.setdefault(arm, {})[seed] = _flat(params)
    for seed in (1, 2, 3):
        control = seen["control"][seed]
        for arm, keys in own_keys.items():
            got = seen[arm][seed]
            assert set(got) == set(control), (arm, set(got) ^ set(control))
            differ = {k for k in got if got[k] != control[k]}
            assert differ == keys | {"run_name"}, (arm, seed, differ)
    return seen


@pytest.fixture(scope="module")
def store_suite(shared_store: Path) -> Path:
    """The sweep dir of a key-and-group suite of the store app (``variable=store_lr,store_model``, :data:`WARM`, the
    default launcher), run once for the module: its own test and :func:`test_store_app_ablated_as_it_is` read it."""
    with pytest.MonkeyPatch.context() as mp:
        clean_env(mp)
        res = ablate_in(shared_store, "-m", "task=store", "variable=store_lr,store_model", "seeds=3", *WARM,
                        "hydra.sweep.dir=outputs/suite")
    assert res.returncode == 0, res.stdout + res.stderr
    return shared_store / "outputs" / "suite"


def test_store_app_suite_of_a_key_and_a_group(shared_store: Path, store_suite: Path) -> None:
    sd = store_suite
    untouched(shared_store)
    seen = check_store_sweep(sd, {"lr=0.2": {"optim.lr"}, "model=small": {"model.name", "model.hidden"}})
    for seed in (1, 2, 3):  # the values each arm's app saw: its own override, from the app's own configs
        assert seen["lr=0.2"][seed]["optim.lr"] == 0.2 and seen["control"][seed]["optim.lr"] == 0.05
        assert (seen["model=small"][seed]["model.name"], seen["model=small"][seed]["model.hidden"]) == ("small", 8)
        assert seen["model=small"][seed]["run_name"] == f"train_model=small,seed={seed}"
    plan = yaml.safe_load((sd / "ablation.yaml").read_text())
    assert [a.get("variable") for a in plan["arms"]] == [None, "store_lr", "store_model"]
    # repro of a suite treatment trial (the group arm) holds; its only manifest differences are paths, named so
    rep = ablate_in(shared_store, "repro", str(sd), "--trial", "model=small/2")
    assert rep.returncode == 0, rep.stdout + rep.stderr
    assert "weak reproducibility (final metrics bitwise equal): holds" in rep.stdout, rep.stdout
    assert "manifests differ" not in rep.stdout, rep.stdout


def test_store_app_transfer_run_over_two_scales(shared_store: Path) -> None:
    before = set(shared_store.glob("outputs/ablate/*/*"))
    res = ablate_in(shared_store, "-m", "task=store", "variable=store_lr", "seeds=3", *WARM,
                    "scale.key=trainer.max_epochs", "scale.values=[1,2]")
    assert res.returncode == 0, res.stdout + res.stderr
    untouched(shared_store)
    (parent,) = set(shared_store.glob("outputs/ablate/*/*")) - before
    children = yaml.safe_load((parent / "transfer.yaml").read_text())["children"]
    assert children == ["max_epochs=1", "max_epochs=2"], children
    for child, epochs in zip(children, (1, 2), strict=True):
        seen = check_store_sweep(parent / child, {"lr=0.2": {"optim.lr"}})
        for seed in (1, 2, 3):
            assert seen["control"][seed]["trainer.max_epochs"] == seen["lr=0.2"][seed]["trainer.max_epochs"] == epochs
            own = json.loads((parent / child / "trials" / "control" / f"seed={seed}" / "work" / "metrics.json")
                             .read_text())
            assert len(own["history"]) == epochs  # the app trained for the scale's epochs
    assert json.loads((parent / "transfer.json").read_text())["scale"]["key"] == "task.params.trainer.max_epochs"
