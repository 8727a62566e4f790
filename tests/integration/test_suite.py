"""Suites on a real git + DVC project: one shared control, trials counted, each treatment confined to its own key,
Holm over the suite, the ablation table. The three-variable suite runs once per module (:func:`suite_run`) on a
pure-Python task with the digits task's keys (:data:`SUITE_TASK`: the suite's orchestration and statistics are under
test, not training, so no trial imports torch); the tests read it, or change a copy of it."""

from __future__ import annotations

import csv
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests

from tests.helpers import PURE_CONF, ablate_cli, ablate_in, clean_env, commit_all, copy_project, wait_for_plots

pytestmark = pytest.mark.slow
FAST = ["task.epochs=1", "launcher=inline", "seeds=3"]
VARIABLES = {"lr_hi": ("task.optim.lr", "[0.2]"), "momentum": ("task.optim.momentum", "[0.5]"),
             "hidden": ("task.hidden", "[32]")}


#: The digits task's keys and data (``tests.helpers.PURE_CONF``) with val_acc and val_loss moved by each of the
#: suite's three keys, plus noise per seed and setting (so each treatment's paired differences vary).
SUITE_TASK = """import random


def train(cfg):
    t = cfg.task
    noise = random.Random(f"{cfg.seed}/{t.optim.lr}/{t.optim.momentum}/{t.hidden}").random() / 100
    shift = abs(t.optim.lr - 0.05) + abs(t.optim.momentum - 0.9) / 10 + abs(t.hidden - 64) / 1000
    return {"val_acc": 0.9 - shift + noise, "val_loss": 0.3 + shift - noise}
"""


def _add_suite_task(project: Path) -> None:
    (project / "suite_task.py").write_text(SUITE_TASK)
    (project / "conf" / "task" / "suite.yaml").write_text(PURE_CONF.replace("fn: pure_task:train",
                                                                            "fn: suite_task:train"))
    commit_all(project, "the suite's pure-Python task")


def _add_variables(project: Path) -> None:
    for name, (key, values) in VARIABLES.items():
        (project / "conf" / "variable" / f"{name}.yaml").write_text(f"key: {key}\nvalues: {values}\n")
    commit_all(project, "suite variables")


def _sweep(project: Path) -> Path:
    (sd,) = sorted(p.parent for p in project.glob("outputs/ablate/*/*/ablation.yaml"))
    return sd


@pytest.fixture(scope="module")
def suite_run(project_template: Path, tmp_path_factory: pytest.TempPathFactory
              ) -> tuple[subprocess.CompletedProcess[str], Path]:
    """``ablate -m variable=lr_hi,momentum,hidden task=suite metrics=[val_acc,val_loss]`` (inline, 3 seeds), run once
    per module through the console script, its plots drawn; the project it ran in."""
    proj = copy_project(project_template, tmp_path_factory.mktemp("suite") / "proj")
    _add_variables(proj)
    _add_suite_task(proj)
    with pytest.MonkeyPatch.context() as mp:
        clean_env(mp)
        res = ablate_cli(proj, "-m", "variable=lr_hi,momentum,hidden", "task=suite", "metrics=[val_acc,val_loss]",
                         "plots=true", *FAST)  # its forest plot is read
    if res.returncode == 0:
        wait_for_plots(_sweep(proj))
    return res, proj


def test_three_variable_suite_shares_one_control(suite_run: tuple[subprocess.CompletedProcess[str], Path],
                                                 tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    res, made = suite_run
    assert res.returncode == 0, res.stderr
    project = copy_project(made, tmp_path / "proj")  # this test changes the sweep dir at its end
    monkeypatch.chdir(project)
    sd = _sweep(project)
    assert sd.name.endswith("_suite_lr_hi+momentum+hidden")
    # 3 variables x 1 treatment x 3 seeds + 3 control trials = 12 trials, not 18
    results = sorted((sd / "trials").glob("*/seed=*/result.json"))
    assert len(results) == 12
    assert sorted({p.parent.parent.name for p in results}) == ["control", "hidden=32", "lr=0.2", "momentum=0.5"]
    assert "trials: 12 (the control runs once; 18 if each variable ran alone)" in res.stderr

    v = json.loads((sd / "verdict.json").read_text())
    assert v["invalid"] is False and v["confounds"]["checked"] == 12
    assert [c["variable"] for c in v["comparisons"]] == ["lr_hi", "momentum", "hidden"]
    assert v["suite"]["family"] == "suite"
    assert v["suite"]["trials"] == {"suite": 12, "one_by_one": 18, "saved": 6}
    # each treatment differs from the control in its own key only (proved at plan time, recorded)
    plan = __import__("yaml").safe_load((sd / "ablation.yaml").read_text())
    changes = {a["name"]: sorted(a["changes"]) for a in plan["arms"][1:]}
    assert changes == {"lr=0.2": ["task.optim.lr"], "momentum=0.5": ["task.optim.momentum"],
                       "hidden=32": ["task.hidden"]}
    # Holm over all three treatments of the suite: our adjusted p-values are statsmodels' on the raw ones
    raw = [c["pvalue"] for c in v["comparisons"]]
    assert None not in raw
    expect = multipletests(raw, method="holm")[1]
    assert [c["pvalue_adjusted"] for c in v["comparisons"]] == pytest.approx(list(expect), rel=1e-12)
    control = [v["arms"][0]["values"][str(s)] for s in range(3)]
    treat = [v["arms"][1]["values"][str(s)] for s in range(3)]
    # a fn task under determinism=seeded shares randomness across arms: pairing=auto runs the paired t
    assert v["comparisons"][0]["paired"]
    assert raw[0] == pytest.approx(stats.ttest_rel(treat, control).pvalue, rel=1e-9)
    md = (sd / "verdict.md").read_text()
    assert "adjusted over all 3 treatments of the suite (family=suite)" in md

    # ablate.load has a `variable` column; the control's is empty
    import ablate

    df = ablate.load(sd)
    assert list(df.columns[:2]) == ["arm", "variable"]
    assert df.loc[df.arm == "control", "variable"].isna().all()
    by_arm = {a: set(df.loc[df.arm == a, "variable"]) for a in df.arm.unique() if a != "control"}
    assert by_arm == {"hidden=32": {"hidden"}, "lr=0.2": {"lr_hi"}, "momentum=0.5": {"momentum"}}
    with (sd / "results.csv").open() as f:
        assert next(csv.reader(f))[:2] == ["arm", "variable"]

    # the ablation table: control first, one row per arm, both metric columns; numbers equal verdict.json
    table = v["table"]
    assert [r["arm"] for r in table["rows"]] == ["control", "lr=0.2", "momentum=0.5", "hidden=32"]
    assert table["metrics"] == ["val_acc", "val_loss"]
    for row, arm in zip(table["rows"], v["arms"], strict=True):
        assert row["cells"]["val_acc"]["mean"] == arm["mean"]
    for row, c in zip(table["rows"][1:], v["comparisons"], strict=True):
        assert row["cells"]["val_acc"]["delta"] == pytest.approx(c["diff_raw"], rel=1e-12)
        assert row["verdict"] == c["verdict"]
        # the descriptive val_loss Δ CI is scipy's paired t interval (the primary comparison is paired by design)
        t_loss = _metric(sd, row["arm"], "val_loss")
        c_loss = _metric(sd, "control", "val_loss")
        assert c["paired"]
        ci = stats.ttest_rel(t_loss, c_loss).confidence_interval(confidence_level=c["ci_level"])
        assert row["cells"]["val_loss"]["delta_ci"] == pytest.approx([ci.low, ci.high], rel=1e-9)
    assert "## Ablation table" in md and "## Suite" in md
    assert (sd / "ablation_table.tex").is_file() and (sd / "ablation_table.csv").is_file()
    assert (sd / "verdict_forest.png").stat().st_size > 1000

    # status / collect / verdict on the suite's sweep dir
    st = ablate_in(project, "status", str(sd))
    assert st.returncode == 0 and "hidden=32" in st.stdout
    shutil.rmtree(sd / "trials" / "momentum=0.5" / "seed=1")  # a trial that never ran: resume runs it alone
    res = ablate_in(project, "resume", str(sd))
    assert res.returncode == 0, res.stderr
    assert len(sorted((sd / "trials").glob("*/seed=*/result.json"))) == 12
    assert "[12/12] momentum=0.5 seed=1 ok" in res.stderr and res.stderr.count(" ok in ") == 1
    res = ablate_in(project, "verdict", str(sd), "--family", "variable")
    assert res.returncode == 0, res.stderr
    v2 = json.loads((sd / "verdict.json").read_text())
    # one treatment per variable: each family has one member, so nothing is adjusted and the CI is at 1 - α
    assert all(c["pvalue_adjusted"] in (None, c["pvalue"]) for c in v2["comparisons"])
    assert all(c["ci_level"] == pytest.approx(0.95) for c in v2["comparisons"] if c["ci"])
    assert "adjusted per variable (family=variable)" in (sd / "verdict.md").read_text()


def _metric(sd: Path, arm: str, metric: str) -> list[float]:
    return [json.loads((sd / "trials" / arm / f"seed={s}" / "result.json").read_text())["metrics"][metric]
            for s in range(3)]


def test_suite_latex_table_compiles(suite_run: tuple[subprocess.CompletedProcess[str], Path], tmp_path: Path) -> None:
    if shutil.which("pdflatex") is None:
        pytest.skip("pdflatex is not installed (apt-get install texlive-latex-base texlive-latex-recommended)")
    res, made = suite_run
    assert res.returncode == 0, res.stderr
    sd = _sweep(made)  # read only: the table of the three-variable suite
    doc = tmp_path / "doc.tex"
    shutil.copy(sd / "ablation_table.tex", tmp_path / "ablation_table.tex")
    doc.write_text("\\documentclass{article}\\usepackage{booktabs}\\usepackage[utf8]{inputenc}\n"
                   "\\begin{document}\\input{ablation_table.tex}\\end{document}\n")
    proc = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "doc.tex"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert (tmp_path / "doc.pdf").stat().st_size > 1000
    # the numbers printed in the .tex are verdict.json's, rounded to the printed decimals
    v = json.loads((sd / "verdict.json").read_text())
    tex = (sd / "ablation_table.tex").read_text()
    for row in v["table"]["rows"]:
        cell = row["cells"]["val_acc"]
        line = next(ln for ln in tex.splitlines() if ln.startswith(row["arm"].replace("_", r"\_"))
                    or (row["arm"] == "control" and ln.startswith("control")))
        cells = line.removesuffix(r" \\").split(" & ")  # arm & variable & mean $\pm$ half & delta [CI] & marker
        mean_s, half_s = re.findall(r"\d+\.\d+", cells[2])
        dec = len(mean_s.split(".")[1])
        assert float(mean_s) == round(cell["mean"], dec)
        assert float(half_s) == pytest.approx((cell["ci"][1] - cell["ci"][0]) / 2, abs=10 ** -dec / 2 + 1e-12)
        if cell["delta"] is not None:
            d, lo, hi = (float(x) for x in re.findall(r"[+-]\d+\.\d+", cells[3]))
            assert [d, lo, hi] == pytest.approx([cell["delta"], *cell["delta_ci"]], abs=10 ** -dec / 2 + 1e-12)
        else:
            assert cells[3] == "--"


def test_suite_refusals(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _add_variables(project)
    # a variable sweep that is not a list of names
    res = ablate_in(project, "-m", "variable=range(1,3)", *FAST)
    assert res.returncode == 2 and "is not a list of variable names" in res.stderr and "Traceback" not in res.stderr
    res = ablate_in(project, "-m", "variable=lr_hi,lr_hi", *FAST)
    assert res.returncode == 2 and "names lr_hi twice" in res.stderr
    # an unknown variable in the suite: Hydra's options with close matches
    res = ablate_in(project, "-m", "variable=lr_hi,momentun", *FAST)
    assert res.returncode == 2 and "momentum" in res.stderr and "Traceback" not in res.stderr
    # two variables giving the same treatment
    (project / "conf" / "variable" / "lr_dup.yaml").write_text("key: task.optim.lr\nvalues: [0.2]\n")
    commit_all(project, "dup")
    res = ablate_in(project, "-m", "variable=lr_hi,lr_dup", *FAST)
    assert res.returncode == 2 and "the same treatment twice" in res.stderr
    # a variable file that changes the control config
    (project / "conf" / "variable" / "sneaky.yaml").write_text(
        "# @package _global_\nvariable:\n  key: task.hidden\n  values: [32]\ntask:\n  extra_flag: 1\n")
    commit_all(project, "sneaky")
    res = ablate_in(project, "-m", "variable=lr_hi,sneaky", *FAST)
    assert res.returncode == 2 and "changes the control config (task.extra_flag)" in res.stderr
    assert not list(project.glob("outputs/ablate/*/*/ablation.yaml"))
    # a dry run of a suite prints the plan with the trial count and launches nothing
    res = ablate_in(project, "-m", "variable=lr_hi,momentum,hidden", "dry_run=true", *FAST)
    assert res.returncode == 0, res.stderr
    assert "trials: 12 (the control runs once; 18 if each variable ran alone)" in res.stdout
    # the Python API takes a list of variables as a suite
    import ablate

    assert ablate.run(variable=["lr_hi", "momentum"], seeds=3, launcher="inline", dry_run=True) is None
    assert "trials: 9 (the control runs once; 12 if each variable ran alone)" in capsys.readouterr().out
