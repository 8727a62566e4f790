"""``ablate extend DIR seeds=K`` (issue 39): the new seeds only, into the same sweep dir, judged as a two-stage
adaptive design; refusals in one line with their fix; a kill during the extension loses nothing.

One 3-seed ablation of a pure-Python task runs once per module (:func:`base`, through the console script), and one
extension of a copy of it to 6 seeds (:func:`extended`); the refusals run ablate's CLI entry in this process
(:func:`tests.helpers.ablate_in`) on copies. The task sleeps in stage 2 only while a gate file exists, so the kill
test can stop the extension between two trials.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.helpers import ablate_cli, ablate_in, commit_all, copy_project, git, only_sweep, wait_for_plots

pytestmark = pytest.mark.slow

TASK = '''import random
import time
from pathlib import Path


def train(cfg):
    t = cfg.task
    lr = float(t.optim.lr)
    if cfg.seed >= 3 and Path(t.gate).exists():  # stage 2 waits while the kill test holds the gate
        time.sleep(1.5)
    noise = random.Random(f"{cfg.seed}/{lr}").random() / 100
    return {"val_acc": 0.85 + (lr - 0.05) * 0.02 + noise}
'''
CONF = """fn: gated_task:train
data: [data/digits.npz]
metric: val_acc
goal: maximize
gate: {gate}
optim:
  lr: 0.05
"""


def result_bytes(sd: Path) -> dict[str, bytes]:
    return {str(p.relative_to(sd)): p.read_bytes() for p in sorted(sd.glob("trials/*/seed=*/result.json"))}


@pytest.fixture(scope="module")
def base(project_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project holding one finished 3-seed ablation (lr 0.05 vs 0.2, launcher=local, one trial at a time)."""
    root = tmp_path_factory.mktemp("extend")
    proj = copy_project(project_template, root / "proj")
    (proj / "gated_task.py").write_text(TASK)
    (proj / "conf" / "task" / "gated.yaml").write_text(CONF.format(gate=root / "gate"))
    commit_all(proj, "the gated task")
    res = ablate_in(proj, "-m", "task=gated", "variable=lr", "variable.values=[0.2]", "seeds=3", "launcher=local",
                    "launcher.max_parallel=1")
    assert res.returncode == 0, res.stderr
    wait_for_plots(only_sweep(proj))
    return proj


@pytest.fixture(scope="module")
def extended(base: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, bytes], str, int]:
    """A copy of :func:`base` extended by the command its verdict's Next line names, run as printed (from the
    project's root) by the console script: (sweep dir, stage 1's result records before, the command's stderr, K)."""
    proj = copy_project(base, tmp_path_factory.mktemp("extended") / "proj")
    sd = only_sweep(proj)
    before = result_bytes(sd)
    command = json.loads((sd / "verdict.json").read_text())["bottom_line"]["next"]["command"]
    args = shlex.split(command)
    assert args[:2] == ["ablate", "extend"] and (proj / args[2]).resolve() == sd.resolve(), command
    res = ablate_cli(proj, *args[1:])
    assert res.returncode == 0, res.stderr
    wait_for_plots(sd)
    return sd, before, res.stderr, int(args[3].removeprefix("seeds="))


@pytest.fixture
def copy(base: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    proj = copy_project(base, tmp_path / "proj")
    monkeypatch.chdir(proj)
    return proj


def test_the_seed_advice_names_extend(base: Path) -> None:
    v = json.loads((only_sweep(base) / "verdict.json").read_text())
    nxt = v["bottom_line"]["next"]
    assert nxt["command"].startswith("ablate extend ") and nxt["command"].endswith(f"seeds={nxt['seeds']}"), nxt
    assert "two-stage combination test keeps α" in nxt["why"]


def test_extension_runs_only_the_new_seeds(extended: tuple[Path, dict[str, bytes], str, int]) -> None:
    sd, before, stderr, k = extended
    after = result_bytes(sd)
    assert {key: after[key] for key in before} == before  # stage 1's records untouched: not run again
    new = sorted(set(after) - set(before))
    assert new == sorted(f"trials/{a}/seed={s}/result.json" for a in ("control", "lr=0.2") for s in range(3, k)), new
    assert f"seeds 3..{k - 1} of 2 arms ({2 * (k - 3)} trials)" in stderr
    plan = yaml.safe_load((sd / "ablation.yaml").read_text())
    assert plan["seeds"] == list(range(k))
    ext = plan["extension"]
    assert ext["stage1_seeds"] == [0, 1, 2] and ext["stage2_seeds"] == list(range(3, k))
    assert ext["decided_at"] and set(ext["look"]) == {"lr=0.2"}
    assert ext["look"]["lr=0.2"]["n"] == 3 and 0 <= ext["look"]["lr=0.2"]["pvalue"] <= 1


def test_verdict_names_the_design_and_the_naive_p(extended: tuple[Path, dict[str, bytes], str, int]) -> None:
    from ablate.stats.adaptive import two_stage_batch

    sd, _, _, k = extended
    v = json.loads((sd / "verdict.json").read_text())
    (c,) = v["comparisons"]
    vals = {a["arm"]: a["values"] for a in v["arms"]}
    t, ctl = vals["lr=0.2"], vals["control"]
    res = two_stage_batch([t[str(s)] for s in range(3)], [ctl[str(s)] for s in range(3)],
                          [t[str(s)] for s in range(3, k)], [ctl[str(s)] for s in range(3, k)], n1=3,
                          paired=c["pairing"]["paired"])
    assert c["extension"]["pvalue"] == pytest.approx(float(res.pvalue[0]))
    assert c["test"].startswith("two-stage inverse normal")
    assert c["extension"]["naive_pooled_p"] != c["pvalue"]
    md = (sd / "verdict.md").read_text()
    (line,) = [ln for ln in md.splitlines() if ln.startswith("> **Extended**")]
    assert "Extended after a look at 3 seeds per arm" in line and f"to {k}:" in line and "keeps α" in line
    assert "Naive pooled p (all seeds as one sample; not valid after a look): 0.2: p = " in line


def test_refusals_are_one_line_with_a_fix(copy: Path) -> None:
    sd = only_sweep(copy)
    cases = [
        (["seeds=3"], "is not more than the 3 seeds per arm"),
        (["seeds=2"], "is not more than the 3 seeds per arm"),
        (["seeds=4"], "adds one seed per arm"),
        (["seeds=6", "arm=lr=0.2"], "asks for an extension of some arms only"),
        (["seeds=ten"], "is not a number of seeds per arm"),
        ([], "needs one sweep dir and `seeds=K`"),
    ]
    for extra, words in cases:
        res = ablate_in(copy, "extend", str(sd), *extra)
        assert res.returncode == 2, (extra, res.stderr)
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and words in lines[0] and "Fix:" in lines[0], (extra, res.stderr)
    res = ablate_in(copy, "extend", str(sd / "trials" / "lr=0.2"), "seeds=6")
    assert res.returncode == 2 and "one arm's (or trial's) dir" in res.stderr, res.stderr
    assert f"ablate extend {sd} seeds=K" in res.stderr
    assert result_bytes(sd) == result_bytes(sd) and "extension" not in (sd / "ablation.yaml").read_text()


def test_extend_a_sequential_run_is_refused(copy: Path) -> None:
    """The plan record of a sequential run (its options as `sequential=group looks=[3]` writes them)."""
    sd = only_sweep(copy)
    plan = yaml.safe_load((sd / "ablation.yaml").read_text())
    plan["options"].update(sequential="group", looks=[3])
    (sd / "ablation.yaml").write_text(yaml.safe_dump(plan))
    res = ablate_in(copy, "extend", str(sd), "seeds=6")
    assert res.returncode == 2 and "this ablation is sequential" in res.stderr and "Fix:" in res.stderr, res.stderr


def test_extend_unfinished_is_refused_until_resumed(copy: Path) -> None:
    sd = only_sweep(copy)
    (sd / "trials" / "lr=0.2" / "seed=2" / "result.json").unlink()
    res = ablate_in(copy, "extend", str(sd), "seeds=6")
    assert res.returncode == 2 and "1 planned trial(s)" in res.stderr, res.stderr
    assert f"`ablate resume {sd}`" in res.stderr


def test_a_pinned_commit_that_is_not_a_commit_id_is_never_shown_as_a_command(copy: Path) -> None:
    # the sweep dir is a record: a pin edited to a git option is refused, and no `git checkout --...` is printed
    sd = only_sweep(copy)
    plan = yaml.safe_load((sd / "ablation.yaml").read_text())
    for bad in ("--output=/tmp/owned", "HEAD; rm -rf ~"):
        plan["pins"]["code"]["commit"] = bad
        (sd / "ablation.yaml").write_text(yaml.safe_dump(plan, sort_keys=False))
        res = ablate_in(copy, "extend", str(sd), "seeds=5")
        assert res.returncode == 2, res.stderr
        assert "git checkout" not in res.stderr and "check out the pinned commit" in res.stderr, res.stderr


def test_extend_after_a_code_change_is_refused_and_the_fix_works(copy: Path) -> None:
    sd = only_sweep(copy)
    pinned = yaml.safe_load((sd / "ablation.yaml").read_text())["pins"]["code"]["commit"]
    (copy / "gated_task.py").write_text(TASK.replace("0.85", "0.86"))
    commit_all(copy, "a change")
    res = ablate_in(copy, "extend", str(sd), "seeds=5")
    assert res.returncode == 2, res.stderr
    assert f"the ablation pinned {pinned[:12]}" in res.stderr and f"`git checkout {pinned[:12]}`" in res.stderr
    git(copy, "checkout", "-q", pinned[:12])  # the fix, as the line gives it
    res = ablate_in(copy, "extend", str(sd), "seeds=5")
    assert res.returncode == 0, res.stderr
    assert len(result_bytes(sd)) == 10


def test_a_second_extension_is_refused(extended: tuple[Path, dict[str, bytes], str, int], tmp_path: Path) -> None:
    sd, _, _, k = extended
    res = ablate_in(tmp_path, "extend", str(sd), f"seeds={k + 3}")
    assert res.returncode == 2 and f"was extended already (from 3 to {k}" in res.stderr and "Fix:" in res.stderr
    v = json.loads((sd / "verdict.json").read_text())
    assert v["bottom_line"]["next"]["command"] is None or "extend" not in v["bottom_line"]["next"]["command"]


def test_kill_during_the_extension_loses_nothing(copy: Path, tmp_path: Path) -> None:
    """SIGKILL to the extension's whole process group after its first new trial, then `ablate resume`: every
    finished trial kept as it was, the others run, the extension's record intact."""
    sd = only_sweep(copy)
    gate = Path(yaml.safe_load((sd / "ablation.yaml").read_text())["arms"][0]["config"]["task"]["gate"])
    gate.write_text("hold")
    try:
        exe = str(Path(sys.executable).with_name("ablate"))
        proc = subprocess.Popen([exe, "extend", str(sd), "seeds=6"], cwd=copy, start_new_session=True,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                env={**os.environ, "DVC_NO_ANALYTICS": "1"})
        deadline = time.monotonic() + 120
        while len(result_bytes(sd)) < 7 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    finally:
        gate.unlink()
    kept = result_bytes(sd)
    assert 7 <= len(kept) < 12, len(kept)
    res = ablate_in(copy, "resume", str(sd))
    assert res.returncode == 0, res.stderr
    after = result_bytes(sd)
    assert len(after) == 12 and {k: after[k] for k in kept} == kept
    v = json.loads((sd / "verdict.json").read_text())
    assert v["extension"]["stage2_seeds"] == [3, 4, 5] and "extension" in v["comparisons"][0]


def test_extend_in_another_environment_is_refused(copy: Path) -> None:
    """The plan's environment pin as another install would have written it (numpy at another version)."""
    sd = only_sweep(copy)
    plan = yaml.safe_load((sd / "ablation.yaml").read_text())
    plan["pins"]["environment"]["packages"]["numpy"] = "1.0.0"
    (sd / "ablation.yaml").write_text(yaml.safe_dump(plan))
    res = ablate_in(copy, "extend", str(sd), "seeds=6")
    assert res.returncode == 2, res.stderr
    assert "(pinned 1.0.0)" in res.stderr and "`pip install numpy==1.0.0`" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
