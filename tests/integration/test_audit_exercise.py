"""The founding document's exercise, audited as a team would, in both of its forms, on a DVC project whose app
logs each run at once to Hydra dirs, an MLflow sqlite store and W&B offline dirs (tests/fixtures/audit_app/
make_runs.py, no ablate involved):

- ``mix``: the data mix as a config key (``data.mix`` old -> new; both mixes tracked by DVC), the second commit
  also fixing a loader bug;
- ``snapshot``: last week's data snapshot against this week's with no config key for it (both sides run the same
  config, ``data.path: data/train.csv``; DVC's record of that file and the loader changed in the second commit).

From each source and from all three at once: 5 + 5 runs (the same run seen through three records counted
once), the same variable and confounds, values equal to the app's own logs, and the printed minimal ablation,
run as printed, gives a firm verdict on the mix's own effect (the loader fixed on both sides)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from scipy import stats as sps

from tests.helpers import REPO

pytestmark = pytest.mark.slow
MAKE = REPO / "tests" / "fixtures" / "audit_app" / "make_runs.py"
FORMS = ("mix", "snapshot")
SOURCES = {"hydra": ("multirun",), "mlflow": ("mlflow.db",), "wandb": ("wandb",),
           "all": ("multirun", "mlflow.db", "wandb")}
#: The mixes' means (tests/fixtures/audit_app/data): the app's ceiling; its curve reaches 1 - 0.5**4 of it.
OLD, NEW = 0.72, 0.79
REACHED = 1 - 0.5 ** 4


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "WANDB_", "AUDIT_APP_"))}
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env.pop("PYTHONPATH", None)
    return env


@pytest.fixture(scope="module")
def projects(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Both forms, made at once (two processes): form -> the app's repo."""
    root = tmp_path_factory.mktemp("exercise")
    procs = {form: subprocess.Popen([sys.executable, str(MAKE), str(root / form), "--scenario", form, "--trackers"],
                                    env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for form in FORMS}
    for form, p in procs.items():
        out, _ = p.communicate(timeout=900)
        assert p.returncode == 0, f"{form}: {out}"
    return {form: root / form / "repo" for form in FORMS}


@pytest.fixture(scope="module")
def audits(projects: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Any]:
    """``ablate audit`` of each source set of each form, in-process: (form, sources) -> (out dir, audit.json)."""
    from ablate.audit import run_audit

    out = {}
    for form, repo in projects.items():
        for name, sources in SOURCES.items():
            where = tmp_path_factory.mktemp(f"audit-{form}-{name}") / "audit"
            # plots drawn where a test reads them (all three sources at once); each other audit's tests read
            # its audit.json and audit.md, which are the same without them (issue 34: 6 audits' matplotlib time)
            a = run_audit([str(repo / s) for s in sources], out=where, plots=name == "all")
            out[form, name] = (where, a)
    return out


def _commits(repo: Path) -> list[str]:
    return subprocess.run(["git", "-C", str(repo), "log", "--format=%H", "--reverse"], capture_output=True,
                          text=True, check=True).stdout.split()


def _dvc_md5(repo: Path, commit: str, path: str) -> str:
    """What DVC recorded for ``path`` at ``commit`` (its ``.dvc`` file, read from git)."""
    text = subprocess.run(["git", "-C", str(repo), "show", f"{commit}:{path}.dvc"], capture_output=True, text=True,
                          check=True).stdout
    return "md5:" + yaml.safe_load(text)["outs"][0]["md5"]


def _own_log(repo: Path, side: str) -> dict[int, float]:
    """The app's own metrics.jsonl in each Hydra run dir of a side: seed -> last val_acc."""
    out = {}
    for d in sorted((repo / "multirun" / side).glob("[0-9]*")):
        seed = yaml.safe_load((d / ".hydra" / "config.yaml").read_text())["seed"]
        out[seed] = json.loads((d / "metrics.jsonl").read_text().splitlines()[-1])["val_acc"]
    return out


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("name", list(SOURCES))
def test_each_source_and_all_at_once_count_five_and_five_and_name_the_same_confounds(
        projects: dict[str, Path], audits: dict, form: str, name: str) -> None:
    repo = projects[form]
    where, a = audits[form, name]
    first, second = _commits(repo)
    assert [(x["name"], x["n"]) for x in a["arms"]] == [("A", 5), ("B", 5)]
    if form == "mix":
        assert a["variable"] == {"key": "data.mix", "a": "old", "b": "new", "how": "proposed", "kind": "config"}
    else:  # no config key for the snapshot: the data version DVC recorded is the variable
        assert a["variable"] == {"key": "data:data/train.csv", "kind": "data", "how": "proposed",
                                 "a": _dvc_md5(repo, first, "data/train.csv"),
                                 "b": _dvc_md5(repo, second, "data/train.csv"), "config_key": "data.path"}
    (code,) = a["confounds"]
    assert (code["kind"], code["a"], code["b"]) == ("code", first, second)
    record = "data/new.csv.dvc" if form == "mix" else "data/train.csv.dvc"
    assert "M loader.py" in code["files"] and any(f.endswith(record) for f in code["files"])
    # the values are the app's own last logged val_acc, per seed, and the test is scipy's Welch test on them
    old, new = _own_log(repo, "a"), _own_log(repo, "b")
    vals = a["statistics"]["values"]
    assert {int(k): v for k, v in vals["control"].items()} == old
    assert {int(k): v for k, v in vals["treatment"].items()} == new
    comp = a["statistics"]["verdict"]["comparisons"][0]
    t, c = [new[s] for s in sorted(new)], [old[s] for s in sorted(old)]
    assert comp["pvalue"] == pytest.approx(sps.ttest_ind(t, c, equal_var=False).pvalue, rel=1e-9)
    if name == "all":  # the same ten runs through three records each: counted once, and said
        assert a["merged"]["runs"] == 10 and a["merged"]["records"] == 30
        md = (where / "audit.md").read_text()
        assert "10 runs were each seen through 3 records (hydra, mlflow, wandb): counted once" in md
        # the two sides' curves and the per-run values, drawn and shown (a row per run: the app's own values)
        assert a["plots"] == ["curves.png", "values.png", "curve_verdict.png"]
        assert all((where / p).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and f"]({p})" in md for p in a["plots"])
        rows = [x for x in md[md.index("Per-run values:"):].splitlines() if x.startswith(("| A | ", "| B | "))]
        assert [float(x.split(" | ")[-1].rstrip(" |")) for x in rows] == pytest.approx(
            [old[s] for s in sorted(old)] + [new[s] for s in sorted(new)], rel=1e-5)
    # a confounded comparison is never worded as one to act on
    md = (where / "audit.md").read_text()
    assert "adopt it" not in md and "cannot be credited to the variable" in md


def _own_curves(repo: Path, side: str) -> dict[int, list[float]]:
    """The app's own metrics.jsonl in each Hydra run dir of a side: seed -> val_acc at every epoch."""
    out = {}
    for d in sorted((repo / "multirun" / side).glob("[0-9]*")):
        seed = yaml.safe_load((d / ".hydra" / "config.yaml").read_text())["seed"]
        out[seed] = [json.loads(x)["val_acc"] for x in (d / "metrics.jsonl").read_text().splitlines()]
    return out


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("name", list(SOURCES))
def test_each_source_compares_the_runs_curves_as_a_curve_verdict(projects: dict[str, Path], audits: dict, form: str,
                                                                 name: str) -> None:
    """The runs' logged epochs, from whichever record, compared with the curve verdict's band: the per-epoch means
    are the app's own logs, the final value is the post-hoc verdict's, and audit.md has the section and plot."""
    where, a = audits[form, name]
    cv = a["statistics"]["curves"]
    assert cv["asked"] == "by the audit" and cv["sources"] == {"A": 5, "B": 5} and cv["trial_errors"] == {}
    (cc,) = cv["comparisons"]
    old, new = _own_curves(projects[form], "a"), _own_curves(projects[form], "b")
    epochs = len(next(iter(old.values())))
    assert cc["x"] == [float(e) for e in range(epochs)] and not cc["paired"] and cc["n"] == [5, 5]
    for key, own in (("mean_control", old), ("mean_treatment", new)):
        assert cc[key] == pytest.approx([sum(c) / 5 for c in zip(*own.values(), strict=True)], rel=1e-9)
    final = cc["summaries"]["final"]
    assert final["agrees"] and final["diff"] == pytest.approx(a["statistics"]["verdict"]["comparisons"][0]["diff_raw"])
    md = (where / "audit.md").read_text()
    assert "## Curves (post hoc)" in md
    assert f"- Curves (post hoc, B against A, simultaneous band): {cc['sentence']}." in md
    if name == "all":
        assert "](curve_verdict.png)" in md and (where / "curve_verdict.png").read_bytes()[:4] == b"\x89PNG"
        same = [audits[form, n][1]["statistics"]["curves"]["comparisons"][0] for n in SOURCES]
        assert all(c["regions"] == cc["regions"] and c["critical"] == cc["critical"] for c in same)


@pytest.mark.parametrize("form", FORMS)
def test_every_source_proposes_the_same_minimal_ablation(audits: dict, form: str) -> None:
    seen = [(audits[form, n][1]["minimal"]["task"], audits[form, n][1]["minimal"]["variable"],
             audits[form, n][1]["minimal"]["commit"], audits[form, n][1]["seeds_advised"]) for n in SOURCES]
    assert all(s == seen[0] for s in seen)
    task = seen[0][0]
    assert task["data"] == (["data/new.csv", "data/old.csv"] if form == "mix" else
                            [f"data/audit-{audits[form, 'all'][1]['variable']['a'][4:14]}/train.csv",
                             "data/train.csv"])


@pytest.mark.parametrize("form", FORMS)
def test_the_printed_minimal_ablation_runs_as_printed_to_a_firm_verdict_on_the_mix(
        projects: dict[str, Path], audits: dict, form: str) -> None:
    repo = projects[form]
    where, a = audits[form, "all"]
    m = a["minimal"]
    assert a["seeds_advised"] >= 20  # ablate's firm threshold (ablate.stats.core.FIRM_FROM)
    assert "git worktree add" in m["command"] and "git checkout" not in m["command"]
    head = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    env = _env()
    if form == "snapshot":  # the team runs it with its usual tracking URI: the app logs each trial to the store
        env["MLFLOW_TRACKING_URI"] = f"sqlite:///{repo / 'mlflow.db'}"
    run = subprocess.run(["bash", "-c", m["command"]], cwd=where.parent, env=env, capture_output=True, text=True,
                         timeout=900)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    verdict_md = Path(run.stdout.strip().splitlines()[-1])
    verdict = json.loads(verdict_md.with_name("verdict.json").read_text())
    assert verdict["invalid"] is False, verdict["invalid_reasons"]
    (comp,) = verdict["comparisons"]
    assert (comp["verdict"], comp["firm"]) == ("better", True)
    assert comp["n_treatment"] == comp["n_control"] == a["seeds_advised"]
    # the mix's own effect, the loader fixed on both sides: every seed's noise is the same in both arms
    assert comp["diff"] == pytest.approx((NEW - OLD) * REACHED, rel=1e-9)
    assert verdict["pins"]["code"]["commit"] == m["commit"] == _commits(repo)[1]
    # the team's work tree is left alone: same HEAD, nothing checked out
    after = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    status = subprocess.run(["git", "-C", str(repo), "status", "--porcelain"], capture_output=True, text=True)
    assert after == head and status.stdout == ""
    if form == "snapshot":  # the next audit of the store knows those trials for the minimal ablation's own
        from ablate.audit import run_audit

        # the printed command turns pyarrow's allocator thread off (ablate.audit.minimal.WARM_ENV): the warm parent
        # learned mlflow (and pandas, pyarrow) from the first trials, so later ones were forked with it imported
        sd = verdict_md.parent
        log = sd / "warm-parent.log"  # written when the warm parent has something to say
        assert not log.exists() or "not preloading" not in log.read_text()
        last = [json.loads((sd / "trials" / arm["arm"] / f"seed={max(arm['seeds'])}" / "manifest.json").read_text())
                for arm in verdict["arms"]]
        assert all({"mlflow", "pandas", "pyarrow"} <= set(m["warm"]["preloaded"]["learned"]) for m in last)

        again = run_audit([str(repo / "mlflow.db")], out=where.parent / "again", plots=False)
        assert [x["n"] for x in again["arms"]] == [5, 5]
        ours = [x for x in again["left_out"] if "a trial of the minimal ablation an audit wrote" in x]
        assert len(ours) == 2 * a["seeds_advised"], again["left_out"][:3]
