"""``ablate audit``: runs made by a small Hydra app the way its users make them (tests/fixtures/audit_app/
make_runs.py: a git repo, Hydra multiruns, the app logging to MLflow and W&B offline itself; no ablate), read
back from each source, with the confounds, the statistics and the minimal ablation checked against the
fixture's own logs, ablate.stats and scipy."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from scipy import stats as sps

from tests.helpers import REPO, ablate_cli, ablate_in

pytestmark = pytest.mark.slow
MAKE = REPO / "tests" / "fixtures" / "audit_app" / "make_runs.py"
SOURCES = ("multirun", "mlflow.db", "wandb")


def _make(root: Path, *args: str) -> Path:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "WANDB_"))}
    subprocess.run([sys.executable, str(MAKE), str(root), *args], check=True, env=env, timeout=300)
    return root / "repo"


@pytest.fixture(scope="session")
def confounded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Old mix at the first commit, new mix at a commit that also fixes the loader: 3 seeds a side, logged
    to Hydra dirs, an MLflow sqlite store and W&B offline run dirs."""
    return _make(tmp_path_factory.mktemp("audit") / "confounded", "--scenario", "confounded", "--trackers")


@pytest.fixture(scope="session")
def audits(confounded: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, dict]]:
    """``ablate audit`` of each source of the confounded runs, once: source -> (its cwd, audit.json)."""
    out = {}
    for source in SOURCES:
        cwd = tmp_path_factory.mktemp("audit-" + source.replace(".", "-"))
        res, a = _audit(cwd, str(confounded / source))
        assert res.returncode == 0, res.stderr
        assert res.stdout.strip() == str(Path("audit") / "audit.md")
        out[source] = (cwd, a)
    return out


def _own_log(repo: Path, side: str) -> dict[int, float]:
    """The app's own metrics.jsonl in each Hydra run dir of a side: seed -> last val_acc."""
    import yaml

    out = {}
    for d in sorted((repo / "multirun" / side).glob("[0-9]*")):
        seed = yaml.safe_load((d / ".hydra" / "config.yaml").read_text())["seed"]
        lines = (d / "metrics.jsonl").read_text().splitlines()
        out[seed] = json.loads(lines[-1])["val_acc"]
    return out


def _audit(cwd: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], dict | None]:
    """``ablate audit ARGS`` from ``cwd``, in this process (an audit starts no trial: :func:`ablate_in` gives the
    console script's exit code and output; the minimal ablation's run below is the console script's), with
    ``--no-plots``: no test here reads an audit's PNGs (test_audit_exercise does; the docs' commands below run as
    written, plots and all), and each audit's drawing is matplotlib's CPU (issue 34)."""
    res = ablate_in(cwd, "audit", *args, "--no-plots")
    out = cwd / "audit" / "audit.json"
    return res, json.loads(out.read_text()) if out.exists() else None


@pytest.mark.parametrize("source", SOURCES)
def test_audit_names_the_code_confound_and_gives_the_verdicts_statistics(confounded: Path, source: str,
                                                                        audits: dict) -> None:
    cwd, a = audits[source]
    assert a["variable"] == {"key": "data.mix", "a": "old", "b": "new", "how": "proposed", "kind": "config"}
    # data.path = data/${data.mix}.csv: Hydra kept the interpolation, the trackers logged its resolved value
    (derived,) = a["derived"]
    assert (derived["key"], derived["a"], derived["b"]) == ("data.path", "data/old.csv", "data/new.csv")
    assert derived["why"] == ("interpolates the variable: data/${data.mix}.csv" if source == "multirun"
                              else "follows the variable's value (old -> new in it)")
    (code,) = [c for c in a["confounds"] if c["kind"] == "code"]
    assert [c for c in a["confounds"] if c["kind"] == "config"] == []
    commits = subprocess.run(["git", "-C", str(confounded), "log", "--format=%H", "--reverse"], capture_output=True,
                             text=True, check=True).stdout.split()
    assert (code["a"], code["b"]) == (commits[0], commits[1])
    assert code["files"] == ["A data/new.csv", "M loader.py"]  # the new mix and the loader fix
    assert code["inferred"] is (source == "multirun")  # Hydra records no commit: inferred, and said so
    said = [m for m in a["missing"] if m.startswith("no commit recorded")]
    assert said == (["no commit recorded for 6 of 6 runs (Hydra records none): inferred from the repo's git "
                     "history at each run's start, blind to uncommitted edits"] if source == "multirun" else [])
    libs = "no library versions recorded for 6 of 6 runs"
    assert (libs in a["missing"]) is (source != "wandb")  # W&B keeps requirements.txt; Hydra only its own version
    # the values are the app's own last logged val_acc, per seed
    old, new = _own_log(confounded, "a"), _own_log(confounded, "b")
    vals = a["statistics"]["values"]
    assert {int(k): v for k, v in vals["control"].items()} == old
    assert {int(k): v for k, v in vals["treatment"].items()} == new
    # the same statistics as ablate.stats on those numbers, and scipy's Welch test
    import numpy as np

    from ablate.stats import compare

    t, c = [new[s] for s in sorted(new)], [old[s] for s in sorted(old)]
    ref = compare(t, c, rng=np.random.default_rng(0))
    comp = a["statistics"]["verdict"]["comparisons"][0]
    assert comp["verdict"] == ref.verdict == "better"
    assert comp["pvalue"] == pytest.approx(ref.pvalue, rel=1e-12)
    assert comp["pvalue"] == pytest.approx(sps.ttest_ind(t, c, equal_var=False).pvalue, rel=1e-9)
    assert comp["ci"] == pytest.approx(list(ref.ci), rel=1e-12)
    assert comp["effect_size"] == pytest.approx(ref.effect_size, rel=1e-12)
    assert a["post_hoc"] is True
    md = (cwd / "audit" / "audit.md").read_text()
    assert "Post hoc" in md and "**Confounded**" in md and "loader.py" in md
    m = a["minimal"]
    assert m["isolates"] == "data.mix" and m["commit"] == commits[1]
    assert m["variable"] == {"key": "data.mix", "values": ["new"]}
    # the control is A's whole config; the derived data.path is left to follow the variable
    assert m["task"]["overrides"] == ["data.mix=old", "epochs=4", "lr=0.1"]


def test_every_source_names_the_same_confounds(audits: dict) -> None:
    seen = [[(c["kind"], c["field"], c["a"], c["b"]) for c in audits[s][1]["confounds"]] for s in SOURCES]
    assert seen[0] == seen[1] == seen[2] and len(seen[0]) == 1


def _prepare(command: str, cwd: Path) -> tuple[Path, list[str]]:
    """Run the printed command's steps before ``ablate`` (cd, the worktree, DVC) as printed; returns the dir they
    leave and the ``ablate`` step's words (without the env that tags its trials)."""
    steps = command.split(" && ")
    where = cwd
    for step in steps[:-1]:
        words = shlex.split(step)
        if words[0] == "cd":
            where = Path(words[1])
            continue
        subprocess.run(words, cwd=where, check=True, capture_output=True)
    last = shlex.split(steps[-1])
    return where, last[last.index("ablate"):]


def test_the_minimal_ablation_runs_to_a_valid_verdict(confounded: Path, audits: dict) -> None:
    a = audits["wandb"][1]
    command = a["minimal"]["command"]
    assert f"git worktree add --detach {a['minimal']['config_dir'].rsplit('/ablation/', 1)[0]}/worktree-" in command
    assert "git checkout" not in command  # the team's work tree is left alone
    steps = [shlex.split(s) for s in command.split(" && ")]
    assert steps[0] == ["cd", str(confounded)] and "ablate" in steps[-1]
    head = subprocess.run(["git", "-C", str(confounded), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    where, ablate = _prepare(command, confounded)
    assert where != confounded
    run = ablate_cli(where, *ablate[1:], "seeds=3", "launcher=inline")  # seeds small for the test
    assert run.returncode == 0, run.stderr
    assert subprocess.run(["git", "-C", str(confounded), "rev-parse", "HEAD"], capture_output=True,
                          text=True).stdout == head
    verdict_md = Path(run.stdout.strip().splitlines()[-1])
    verdict = json.loads(verdict_md.with_name("verdict.json").read_text())
    assert verdict["invalid"] is False, verdict["invalid_reasons"]
    assert verdict["confounds"]["findings"] == []
    plan_commit = verdict["pins"]["code"]["commit"]
    assert plan_commit == a["minimal"]["commit"]  # pinned to B's commit: the mix alone varies
    (comp,) = verdict["comparisons"]
    assert comp["verdict"] in ("better", "worse", "equivalent", "inconclusive")
    # the control is A's mix at B's code: the app's own log in the trial dirs says so
    ctrl = json.loads((verdict_md.parent / "trials" / "control" / "seed=1" / "manifest.json").read_text())
    assert ctrl["config"]["task"]["params"]["data"]["mix"] == "old"
    # that sweep dir, audited as runs: no confound, and exactly the verdict's own numbers
    cwd = verdict_md.parent.parent / "audit-of-sweep"
    cwd.mkdir()
    res, again = _audit(cwd, str(verdict_md.parent))
    assert res.returncode == 0, res.stderr
    assert again["confounds"] == [] and again["variable"]["key"] == "data.mix"
    mine = again["statistics"]["verdict"]["comparisons"][0]
    for k in ("verdict", "pvalue", "ci", "effect_size", "diff"):
        assert mine[k] == comp[k], k
    # a sweep dir judges its metric by its goal: another direction given is refused, and nothing written
    res = ablate_in(cwd, "audit", str(verdict_md.parent), "--goal", "minimize", "--out", "other")  # a refusal
    assert res.returncode == 2 and "mixed directions: maximize and minimize" in res.stderr, res.stderr
    assert not (cwd / "other").exists()


def test_no_confound_and_three_replicates_give_a_plain_post_hoc_verdict(tmp_path: Path) -> None:
    repo = _make(tmp_path / "clean", "--scenario", "clean")
    res, a = _audit(tmp_path, str(repo / "multirun"))
    assert res.returncode == 0, res.stderr
    assert a["variable"]["key"] == "lr" and a["variable"]["how"] == "proposed"
    assert a["confounds"] == [] and a["minimal"] is None
    comp = a["statistics"]["verdict"]["comparisons"][0]
    t = [float(x) for x in a["statistics"]["values"]["treatment"].values()]
    c = [float(x) for x in a["statistics"]["values"]["control"].values()]
    assert comp["pvalue"] == pytest.approx(sps.ttest_ind(t, c, equal_var=False).pvalue, rel=1e-9)
    md = (tmp_path / "audit" / "audit.md").read_text()
    assert "No confound found" in md and "Post-hoc verdict" in md


def test_an_indicative_post_hoc_verdict_is_the_verdict_ablate_gives(tmp_path: Path) -> None:
    """Hydra multiruns whose values give a better verdict at p between 0.005 and 0.05 with 4 seeds: the audit says
    what ablate says on the same numbers, `better (indicative)` and the 20 seeds per arm that make it firm (it said
    a plain **better** and "needs 8 seeds per arm" before), and the same seed advice."""
    from ablate.judge.verdict import write_verdict
    from ablate.record.sweepdir import SweepDir
    from ablate.stats import compare
    from tests.helpers import make_sweep

    repo = _make(tmp_path / "indicative", "--scenario", "indicative")
    res, a = _audit(tmp_path, str(repo / "multirun"), "--metric", "val_acc")
    assert res.returncode == 0, res.stderr
    assert a["variable"]["key"] == "epochs" and a["confounds"] == []
    old, new = _own_log(repo, "a"), _own_log(repo, "b")
    t, c = [new[s] for s in sorted(new)], [old[s] for s in sorted(old)]
    comp = a["statistics"]["verdict"]["comparisons"][0]
    assert comp["paired"] is False
    p = sps.ttest_ind(t, c, equal_var=False).pvalue
    assert 0.005 < p < 0.05 and comp["pvalue"] == pytest.approx(p, rel=1e-9)  # significant, not 10 times under α
    ref = compare(t, c)
    assert (ref.verdict, ref.firm, ref.firm_from) == ("better", False, 20)
    assert (comp["verdict"], comp["firm"], comp["firm_from"]) == (ref.verdict, ref.firm, ref.firm_from)
    # ablate's own verdict on the same values: its bottom line's words and seed advice are the audit's
    sd = make_sweep(tmp_path / "sw", {"control": c, "epochs=5": t}, key="epochs", options={"pairing": "unpaired"})
    v = write_verdict(SweepDir.open(sd), {"plots": False})
    (mine,) = v["comparisons"]
    assert (mine["verdict"], mine["firm"], mine["pvalue"]) == (comp["verdict"], comp["firm"], comp["pvalue"])
    assert mine["seed_advice"]["message"] == comp["seed_advice"]["message"] == ref.seeds.message()
    vmd = (sd / "verdict.md").read_text()
    bottom = next(x for x in vmd.splitlines() if x.startswith("- **epochs=5**"))
    said = bottom[bottom.index(" changed val_acc by "):]  # Δ, its CI, the word and how firm, in verdict.md's words
    assert said.endswith(": **better (indicative)**, not yet firm (a lead to confirm).")
    md = (tmp_path / "audit" / "audit.md").read_text()
    line = next(x for x in md.splitlines() if x.startswith("- Post-hoc verdict"))
    assert line.startswith("- Post-hoc verdict for B against A: **treatment** changed val_acc by ")
    assert said in line and "**better**" not in md
    # the Seed recommendation's words: with 4 seeds per arm, below 8 no verdict on a continuous metric is firm
    assert "a verdict on a continuous metric is never firm" in md
    assert "at 20 seeds per arm it is firm if its p is then below the level" in md
    seeds = next(x for x in vmd[vmd.index("## Seed recommendation"):].splitlines() if x.startswith("- **epochs=5**"))
    assert f"- Seeds: {seeds.removeprefix('- **epochs=5**: ')}" in md.splitlines()
    assert a["seeds_advised"] == 20  # the ablation that settles it runs the seeds that make it firm
    assert ref.seeds.n_needed < 20
    assert "run the ablation that settles it (20 seeds per arm, its command below)" in line
    # ... and it does: its command, run as printed, gives a firm better
    steps = [shlex.split(s) for s in a["minimal"]["command"].split(" && ")]
    assert steps[-1][-1] == "seeds=20"
    run = subprocess.run(["bash", "-c", a["minimal"]["command"]], cwd=tmp_path, capture_output=True, text=True,
                         env={**os.environ, "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]})
    assert run.returncode == 0, run.stderr[-3000:]
    (settled,) = json.loads(Path(run.stdout.strip().splitlines()[-1]).with_name("verdict.json").read_text())[
        "comparisons"]
    assert (settled["verdict"], settled["firm"], settled["n_treatment"]) == ("better", True, 20)


def test_one_replicate_per_side_says_one_seed_is_a_sample_size_of_one(confounded: Path, tmp_path: Path) -> None:
    """Seed 1's run dir of each side of the confounded runs (make_runs.py's ``single`` scenario is these two runs:
    two more Hydra processes for the same records, issue 34)."""
    one = [confounded / "multirun" / side / "0" for side in ("a", "b")]
    assert [(d / ".hydra" / "overrides.yaml").read_text().count("seed=1") for d in one] == [1, 1]
    res, a = _audit(tmp_path, *map(str, one))
    assert res.returncode == 0, res.stderr
    st = a["statistics"]
    assert st["verdict"] is None and st["sample_size"]["n"] == 1
    assert st["sample_size"]["seeds_needed"] == a["seeds_advised"] == 20  # ablate's firm threshold
    assert "one seed is a sample size of one" in st["sample_size"]["message"]
    assert "run 20 seeds per arm" in (tmp_path / "audit" / "audit.md").read_text()
    assert a["minimal"]["command"].endswith("seeds=20")


def test_bad_input_is_one_line_and_writes_nothing(confounded: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    # the console script's exit code and output, in this process (a refusal starts no trial: ablate_in; the
    # console script itself runs the minimal ablation above)
    res = ablate_in(tmp_path, "audit", str(tmp_path / "nowhere"))
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "does not exist" in res.stderr, res.stderr
    from mlflow.tracking import MlflowClient

    from ablate.cli.main import main

    db = tmp_path / "empty.db"  # a store with no runs: made by the mlflow client, one experiment, no run
    client = MlflowClient(tracking_uri=f"sqlite:///{db}")
    failed = client.create_run(client.create_experiment("nothing-yet")).info.run_id
    client.set_terminated(failed, "FAILED")  # a run that failed is left out, and named
    capsys.readouterr()  # mlflow's own log lines while it made the store
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0)
    (tmp_path / "a-file").write_text("")
    cases = [([str(confounded / "multirun"), "--metric", "val_loss"], "did not log 'val_loss'"),
             ([str(confounded / "multirun"), "--variable", "lr"], "do not differ in 'lr'"),
             ([str(confounded / "multirun" / "a")], "share one config"),
             ([str(confounded / "conf")], "no run source"),
             ([str(db)], f"holds no finished run (1 left out: MLflow run {failed}: failed)"),
             ([str(confounded / "multirun"), "--out", str(tmp_path / "a-file" / "audit")], "is not a dir"),
             ([str(confounded / "multirun"), "--metric", "A=val_acc"], "neither one name nor each side's"),
             ([str(confounded / "multirun"), "--since", "last week"], "is not a date")]
    if os.geteuid() != 0:  # root reads any dir
        cases.append(([str(locked)], "is not readable"))
    monkeypatch.chdir(tmp_path)
    try:
        for args, words in cases:
            assert main(["audit", *args]) == 2, args
            err = capsys.readouterr().err
            assert err.count("\n") == 1 and words in err and "Fix:" in err, (args, err)
            assert not (tmp_path / "audit").exists()
    finally:
        locked.chmod(0o700)


def test_the_docs_audit_commands_run_on_runs_users_made(confounded: Path, tmp_path: Path) -> None:
    """Every `ablate audit` line of the docs, run as written from a copy of the fixture project (which holds
    multirun/, mlflow.db and wandb/ where the docs put them), through the console script's ``main`` in this process
    (an audit runs no trial: :func:`ablate_in`; the console script itself runs in the tests above)."""
    import shutil

    from tests.integration.test_doc_commands import COMMANDS

    cmds = sorted({c for _, _, c in COMMANDS if c.split()[1] == "audit"})
    assert len(cmds) >= 3
    for cmd in cmds:
        project = tmp_path / f"p{cmds.index(cmd)}"
        shutil.copytree(confounded, project, symlinks=True)
        res = ablate_in(project, *shlex.split(cmd)[1:])
        assert res.returncode == 0, f"{cmd}: {res.stderr}"
        a = json.loads((project / "audit" / "audit.json").read_text())
        assert "confounds" in json.dumps(a) and (project / "audit" / "audit.md").is_file(), cmd
