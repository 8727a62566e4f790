"""Sequential stops (issue 39: futility and efficacy) over the task-forms contract matrix: fn, command and app tasks,
each under launcher=inline and local (warm and fresh trials); a single ablation (one variable, two treatments) and a
suite (two variables, one treatment each). The SLURM cells are tests/slurm/test_sequential_forms_slurm.py.

Each form runs the same pure-Python task whose true effects are known: ``val_acc = 0.8 + shift + N(0, 0.01)``, the
noise drawn from ``random.Random(f"known/{seed}/{shift}")`` (so every form gives the same numbers for the same seed;
with ``f"{seed}/{shift}"`` the paired differences of seeds 0-7 were evidently skewed, and a verdict on evidently skewed
values is never firm, so the large arm could not stop at look 1), with a
null treatment (``shift = 0.0001``: 0.01 SD) and a large one (``shift = 1.0``: 100 SD). With ``looks=[8,9]
effect=0.5 futility=0.3`` the null arm stops at look 1 for futility (its conditional power under 0.5 SD is far below
0.3), the large one for efficacy (a firm ``better`` at look 1), and so the control stops there too: 24 trials of the
27 planned. One run per (form x launcher), shared by the assertions that read it (ablate's CLI entry in this process,
:func:`tests.helpers.ablate_in`; the command task's local warm cell the console script); 8 seeds a look is the
fewest at which a verdict on a continuous metric can be firm (stop 48: with ``looks=[3,6]`` the large arm crossed
indicatively at 3 seeds and ran to 6, still indicative), 2 looks the fewest with a look before the last (where
futility can stop), and 9 the smallest last look after 8.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helpers import ablate_cli, ablate_in, commit_all

pytestmark = pytest.mark.slow

FN = '''import random


def train(cfg):
    shift = float(cfg.task.shift)
    return {"val_acc": 0.8 + shift + random.Random(f"known/{cfg.seed}/{shift}").gauss(0.0, 0.01)}
'''
COMMAND = '''import json, os, random, sys

args = dict(a.split("=", 1) for a in sys.argv[1:])
shift = float(args["shift"])
with open(os.environ["ABLATE_METRICS_FILE"], "w") as fh:
    json.dump({"val_acc": 0.8 + shift + random.Random(f"known/{int(args['seed'])}/{shift}").gauss(0.0, 0.01)}, fh)
'''
APP = '''import random

import hydra


@hydra.main(version_base=None, config_path="conf", config_name="config")
def main(cfg):
    shift = float(cfg.shift)
    return {"val_acc": 0.8 + shift + random.Random(f"known/{cfg.seed}/{shift}").gauss(0.0, 0.01)}


if __name__ == "__main__":
    main()
'''
#: Where each form's ``shift`` lives in ablate's config.
KEY = {"fn": "task.shift", "command": "task.params.shift", "app": "shift"}
NULL, BIG = 0.0001, 1.0
LOOKS = [8, 9]
EFFECT, GAMMA = 0.5, 0.3
LAUNCHERS = {"inline": ("launcher=inline",), "local-warm": ("launcher=local", "launcher.warm=true"),
             "local-fresh": ("launcher=local", "launcher.warm=false")}
FORMS = ["fn", "command", "app"]
#: (form, launcher, shape): each form runs single and suite, every launcher runs every form.
CELLS = [("fn", "inline", "single"), ("fn", "local-warm", "suite"), ("fn", "local-fresh", "single"),
         ("command", "inline", "suite"), ("command", "local-warm", "single"), ("command", "local-fresh", "suite"),
         ("app", "inline", "single"), ("app", "local-warm", "suite"), ("app", "local-fresh", "single")]


def setup(root: Path, form: str) -> None:
    """The form's task (``task=known``), and the variables ``vshift`` (both treatments), ``vnull`` and ``vbig``,
    committed."""
    task: dict[str, Any]
    if form == "fn":
        (root / "seq_known.py").write_text(FN)
        task = {"fn": "seq_known:train", "shift": 0.0}
    elif form == "command":
        (root / "seq_known_cmd.py").write_text(COMMAND)
        task = {"command": "python seq_known_cmd.py", "params": {"shift": 0.0}, "output_dir_key": None}
    else:
        app = root / "seq_known_app"
        (app / "conf").mkdir(parents=True)
        (app / "app.py").write_text(APP)
        (app / "conf" / "config.yaml").write_text(yaml.safe_dump({"shift": 0.0, "seed": 0}))
        task = {"app": "seq_known_app/app.py"}
    (root / "conf" / "task" / "known.yaml").write_text(yaml.safe_dump(
        {**task, "metric": "val_acc", "goal": "maximize"}, sort_keys=False))
    for name, values in (("vshift", [NULL, BIG]), ("vnull", [NULL]), ("vbig", [BIG])):
        (root / "conf" / "variable" / f"{name}.yaml").write_text(yaml.safe_dump({"key": KEY[form], "values": values}))
    commit_all(root, f"sequential {form}")


def variables(shape: str) -> str:
    return "variable=vshift" if shape == "single" else "variable=vnull,vbig"


class Run:
    """One sequential ablation: its sweep dir, the trial lines it printed and its verdict."""

    def __init__(self, sd: Path, stderr: str) -> None:
        self.sd, self.stderr = sd, stderr
        self.plan = yaml.safe_load((sd / "ablation.yaml").read_text())
        self.verdict = json.loads((sd / "verdict.json").read_text())
        self.md = (sd / "verdict.md").read_text()

    def comparison(self, shift: float) -> dict[str, Any]:
        (c,) = [c for c in self.verdict["comparisons"] if c["arm"].endswith(f"={shift}")]
        return c

    def on_disk(self, arm: str) -> list[int]:
        """The seeds of ``arm`` with a trial record (result.json) on disk."""
        return sorted(int(p.parent.name.split("=")[1]) for p in (self.sd / "trials" / arm).glob("seed=*/result.json"))


@pytest.fixture(scope="module")
def runs(project_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Callable[[str, str, str], Run]:
    projects: dict[str, Path] = {}
    made: dict[tuple[str, str, str], Run] = {}

    def get(form: str, launcher: str, shape: str) -> Run:
        if (form, launcher, shape) not in made:
            if form not in projects:
                dest = tmp_path_factory.mktemp(f"seq_{form}") / "proj"
                shutil.copytree(project_template, dest, symlinks=True)
                setup(dest, form)
                projects[form] = dest
            root = projects[form]
            before = set(root.glob("outputs/ablate/*/*"))
            args = ("-m", "task=known", variables(shape), "sequential=group", f"looks=[{','.join(map(str, LOOKS))}]",
                    f"effect={EFFECT}", f"futility={GAMMA}", *LAUNCHERS[launcher])
            # ablate's CLI entry in this process (no interpreter start, no second import of ablate: about 1.4 s of
            # CPU a run), its local trials its children as the console script's are; one cell runs the console script
            console = (form, launcher) == ("command", "local-warm")
            res = ablate_cli(root, *args, timeout=300) if console else ablate_in(root, *args)
            assert res.returncode == 0, f"{form} {launcher} {shape}\n{res.stdout}\n{res.stderr}"
            (sd,) = set(root.glob("outputs/ablate/*/*")) - before
            made[form, launcher, shape] = Run(sd, res.stderr)
        return made[form, launcher, shape]

    return get


def check_run(r: Run, shape: str, ran: int) -> None:
    """Every assertion of one cell: the plan, both stops in verdict.json and verdict.md, the control's stop, and the
    trials recorded on disk equal to the ``ran`` trials run (counted by the caller: the progress lines, the jobs)."""
    opts = r.plan["options"]
    assert (opts["sequential"], opts["looks"], opts["effect"], opts["futility"]) == ("group", LOOKS, EFFECT, GAMMA)
    first = r.plan["seeds"][:LOOKS[0]]
    assert len(r.plan["seeds"]) == LOOKS[-1]
    if shape == "suite":  # the suite's statement names the looks' Bonferroni, its trial count what ran
        assert [a.get("variable") for a in r.plan["arms"]] == [None, "vnull", "vbig"], r.plan["arms"]
        suite = r.verdict["suite"]
        assert suite["statement"].endswith("multiplicity (group sequential: Bonferroni α/m over all 2 treatments of "
                                           "the suite, each spent over the looks)."), suite  # was "(holm)"
        assert suite["trials"] == {"suite": 27, "one_by_one": 36, "saved": 9, "ran": 24}, suite
        assert "Trials: 24 ran (the looks stopped arms early); at most 27 with the shared control" in r.md
    null, big = r.comparison(NULL), r.comparison(BIG)
    s = null["sequential"]
    assert (s["stop_reason"], s["look"], s["n"], s["looks"]) == ("futility", 1, LOOKS[0], LOOKS), s
    assert s["effect"] == EFFECT and s["futility_threshold"] == GAMMA, s
    assert 0 <= s["conditional_power"] < GAMMA and 0 < s["boundary_p"] < 0.05, s
    assert null["verdict"] != "better" and "stopped for futility at look 1 (N = 8)" in null["seed_advice_sequential"]
    b = big["sequential"]
    assert (b["stop_reason"], b["look"], b["n"]) == ("efficacy", 1, LOOKS[0]), b
    assert big["verdict"] == "better" and big["firm"] and big["pvalue"] < b["boundary_p"], big
    # verdict.md: each arm's look, boundary and reason, the conditional power as verdict.json has it
    boundary = re.escape(f"{null['label']}: look 1 (N = 8), boundary p = ")
    cp = f"{s['conditional_power']:.3f}"
    assert re.search(boundary + rf"\S+, stopped for futility \(conditional power {cp} < {GAMMA}\)", r.md), r.md
    assert re.search(re.escape(f"{big['label']}: look 1 (N = 8), boundary p = ") + r"\S+, stopped for efficacy",
                     r.md), r.md
    # For the paper: N and the seeds of the look reached (it named the planned 9 seeds before)
    paper = [x for x in r.md.split("## For the paper")[1].split("##")[0].splitlines() if x.startswith("- ")]
    assert len(paper) == 2 and all(f"N = 8 {'pairs' if null['paired'] else 'seeds per arm'} "
                                   f"(seeds {first[0]}-{first[-1]}):" in x for x in paper), paper
    # the control stopped with the last treatment; nothing past look 1 ran or was recorded
    arms = [a["name"] for a in r.plan["arms"]]
    for arm in arms:
        assert r.on_disk(arm) == first, (arm, r.on_disk(arm))
        for seed in first:
            assert json.loads((r.sd / "trials" / arm / f"seed={seed}" / "result.json").read_text())["status"] == "ok"
    assert ran == len(arms) * LOOKS[0], r.stderr  # trials run = trials recorded
    assert f"{len(arms) * (LOOKS[-1] - LOOKS[0])} planned trial(s) not run: the sequential design stopped" in r.md
    # `ablate status`: nothing pending, nothing to resume (it showed the 3 trials never to run as pending, and
    # "unfinished: `ablate resume DIR` runs what is left", where a resume runs nothing)
    st = ablate_in(r.sd, "status", str(r.sd))
    assert st.returncode == 0, st.stderr
    counts = status_counts(st.stdout)
    assert counts == {arm: ["0", "0", "8", "0", "0"] for arm in arms}, st.stdout
    assert "stopped by the looks: 3 planned trial(s) will not run" in st.stdout and "unfinished" not in st.stdout


def status_counts(out: str) -> dict[str, list[str]]:
    """``ablate status``'s table: arm -> its counts (pending, running, done, failed, interrupted), as printed; the
    notes above the table (the plots being drawn) skipped."""
    lines = out.splitlines()
    head = next(i for i, x in enumerate(lines) if x.split()[:2] == ["arm", "pending"])
    rows = [x.split() for x in lines[head + 1:]]
    return {x[0]: x[1:] for x in rows[:next((i for i, x in enumerate(rows) if not x), len(rows))]}


@pytest.mark.parametrize(("form", "launcher", "shape"), CELLS)
def test_futility_and_efficacy_stops(runs: Callable[[str, str, str], Run], form: str, launcher: str,
                                     shape: str) -> None:
    r = runs(form, launcher, shape)
    check_run(r, shape, ran=sum(x.startswith("[") and " ok in " in x for x in r.stderr.splitlines()))


def test_status_of_an_unfinished_look_counts_every_seed_still_to_run(runs: Callable[[str, str, str], Run],
                                                                     tmp_path: Path) -> None:
    """A copy of the fn inline run with one trial of look 1 lost (as a crash would leave it): the large arm has not
    stopped, so its seeds 2 and 8 and the control's 8 are pending and a resume is named; the null arm stopped at look
    1 all the same, and its seed 8 is not pending."""
    r = runs("fn", "inline", "single")
    sd = tmp_path / "sd"
    shutil.copytree(r.sd, sd, symlinks=True)
    big = r.comparison(BIG)["arm"]
    shutil.rmtree(sd / "trials" / big / f"seed={r.plan['seeds'][2]}")
    st = ablate_in(tmp_path, "status", str(sd))
    assert st.returncode == 0, st.stderr
    counts = status_counts(st.stdout)
    null = r.comparison(NULL)["arm"]
    assert counts == {"control": ["1", "0", "8", "0", "0"], null: ["0", "0", "8", "0", "0"],
                      big: ["2", "0", "7", "0", "0"]}, st.stdout
    assert "stopped by the looks: 1 planned trial(s) will not run" in st.stdout, st.stdout
    assert f"unfinished: `ablate resume {sd}` runs what is left" in st.stdout, st.stdout
