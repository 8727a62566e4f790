"""The transfer check across two scales of the digits MLP (real torch training: its statistics need the spread
of real runs), and ``ablate verdict DIR --against OTHER_DIR`` on the pure-Python task (what differs between two
runs' pins is under test, not training), on real git + DVC projects. Ablations (inline), verdicts and refusals
run ablate's CLI entry in this process (:func:`tests.helpers.ablate_in`); one ablation runs the console script, the
proof of it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from tests.helpers import ablate_cli, ablate_in, add_pure_task, commit_all, wait_for_plots

pytestmark = pytest.mark.slow
FAST = ["task.epochs=1", "launcher=inline", "seeds=3", "variable=lr", "variable.values=[0.2]"]


def test_two_scale_transfer_check(project: Path) -> None:
    # pairing=paired declared: the paired interaction test (with 3 seeds, pairing=auto would not pair)
    res = ablate_in(project, "-m", "scale.key=task.hidden", "scale.values=[16,64]", "pairing=paired", *FAST)
    assert res.returncode == 0, res.stderr
    (parent,) = [p.parent for p in project.glob("outputs/ablate/*/*/transfer.yaml")]
    assert res.stdout.strip().endswith(str(parent / "transfer.md"))
    children = [parent / "hidden=16", parent / "hidden=64"]
    for child, width in zip(children, (16, 64), strict=True):
        assert len(list((child / "trials").glob("*/seed=*/result.json"))) == 6
        cfg = json.loads((child / "trials" / "control" / "seed=0" / "manifest.json").read_text())["config"]
        assert cfg["task"]["hidden"] == width
    report = json.loads((parent / "transfer.json").read_text())
    (r,) = report["results"]
    assert r["arm"] == "lr=0.2" and [e["scale"] for e in r["effects"]] == [16, 64]
    # the effect per scale is that scale's verdict, raw units (val_acc is maximised: Δ = diff)
    diffs = []
    for child, e in zip(children, r["effects"], strict=True):
        v = json.loads((child / "verdict.json").read_text())
        (c,) = v["comparisons"]
        assert e["delta"] == pytest.approx(c["diff"]) and e["verdict"] == c["verdict"]
        assert e["seed_advice"] == (c["seed_advice"] or {}).get("message")
        t = [v["arms"][1]["values"][str(s)] for s in range(3)]
        ctl = [v["arms"][0]["values"][str(s)] for s in range(3)]
        diffs.append(np.subtract(t, ctl))
    # the interaction test: Welch's t on the per-seed paired differences of the two scales (scipy)
    assert r["pvalue"] == pytest.approx(stats.ttest_ind(diffs[0], diffs[1], equal_var=False).pvalue, rel=1e-9)
    assert r["flag"] in ("does not transfer", "shrinks with scale", "differs across scales",
                         "no evidence that the effect changes with scale")
    md = (parent / "transfer.md").read_text()
    assert md.startswith("# Transfer check of `task.optim.lr` across `task.hidden`: val_acc, higher is better")
    bottom = md[md.index("## Bottom line"):md.index("## Effect per scale")]
    assert bottom.count("- **lr=0.2** (task.optim.lr 0.05 → 0.2) across task.hidden: ") == 1
    assert f"; Δ val_acc {r['effects'][0]['delta']:+.4f} at 16, " in bottom and "Next: " in bottom
    assert "## Seeds per scale" in md and "task.hidden=16, lr=0.2" in md and "task.hidden=64, lr=0.2" in md
    assert ("- Test that ran (lr=0.2): **Welch t on the paired differences**, because every scale's arms were "
            "analysed paired by seed") in md

    st = ablate_in(project, "status", str(parent))
    assert st.returncode == 0 and "== hidden=16 ==" in st.stdout and "== hidden=64 ==" in st.stdout
    # `ablate verdict PARENT` recomputes every scale and the report with new options
    res = ablate_in(project, "verdict", str(parent), "--alpha", "0.01")
    assert res.returncode == 0, res.stderr
    assert json.loads((parent / "transfer.json").read_text())["alpha"] == 0.01
    assert json.loads((children[1] / "verdict.json").read_text())["alpha"] == 0.01


@pytest.mark.parametrize("args, words", [
    (["scale.key=task.hiden", "scale.values=[16,64]"], ["`scale.key`", "Close matches: task.hidden"]),
    (["scale.key=task.hidden", "scale.values=[16]"], ["`scale.values`", "at least 2"]),
    (["scale.key=task.hidden", "scale.values=[16,16]"], ["repeats a value"]),
    (["scale.key=task.optim.lr", "scale.values=[0.1,0.3]"], ["the variable's own key"]),
    (["scale.key=task.metric", "scale.values=[a,b]"], ["setting of ablate"]),
    (["scale.key=task.hidden", "scale.values=[16,wide]"], ["`variable.values[1]`"]),
])
def test_transfer_bad_input(project: Path, args: list[str], words: list[str]) -> None:
    res = ablate_in(project, "-m", *args, *FAST)
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) == 1
    for w in words:
        assert w in res.stderr
    assert not list(project.glob("outputs/ablate/*/*"))


def test_verdict_against_a_target_run(project: Path) -> None:
    add_pure_task(project)
    res = ablate_cli(project, "-m", "task=pure", *FAST)  # the console script: this file's proof of it
    assert res.returncode == 0, res.stderr
    (proxy,) = [p.parent for p in project.glob("outputs/ablate/*/*/ablation.yaml")]
    # the target run: new data (one training label changed, recorded by DVC) and a wider model
    d = dict(np.load(project / "data" / "digits.npz"))  # in this process: numpy is imported already
    d["y_train"][0] = (d["y_train"][0] + 1) % 10
    np.savez(project / "data" / "digits.npz", **d)
    subprocess.run([sys.executable, "-m", "dvc", "commit", "-f", "-q", "prepare"], cwd=project, check=True)
    commit_all(project, "new data")
    res = ablate_in(project, "-m", "task=pure", *FAST, "task.hidden=128", "hydra.sweep.dir=outputs/target")
    assert res.returncode == 0, res.stderr
    target = project / "outputs" / "target"
    res = ablate_in(project, "verdict", str(proxy), "--against", str(target))  # starts no trial: in this process
    assert res.returncode == 0, res.stderr
    v = json.loads((proxy / "verdict.json").read_text())
    ag = v["against"]
    assert ag["target"] == str(target.absolute()) and ag["same"] is False
    kinds = {(d["kind"], d["field"]) for d in ag["differences"]}
    assert ("data", "data/digits.npz") in kinds and ("code", "commit") in kinds and ("config", "task.hidden") in kinds
    pins_p = __import__("yaml").safe_load((proxy / "ablation.yaml").read_text())["pins"]["data"]["data/digits.npz"]
    pins_t = __import__("yaml").safe_load((target / "ablation.yaml").read_text())["pins"]["data"]["data/digits.npz"]
    assert pins_p["hash"] != pins_t["hash"]
    md = (proxy / "verdict.md").read_text()
    assert (f"this verdict was obtained on `data/digits.npz` {pins_p['hash']}; the target uses {pins_t['hash']} "
            "(different data)") in md
    assert "`task.hidden` is 64 in this ablation's control and 128 in the target's" in md
    # the same run against itself: the pins agree
    res = ablate_in(project, "verdict", str(target), "--against", str(target))  # a verdict starts no trial
    assert res.returncode == 0, res.stderr
    assert "match this ablation's pins" in (target / "verdict.md").read_text()
    # a target that is not a sweep dir: one line, exit 2, nothing rewritten (once the plots of the proxy's verdict
    # above are drawn: their detached drawer rewrites verdict.json when done, which under load came after this read)
    wait_for_plots(proxy)
    before = (proxy / "verdict.json").read_bytes()
    res = ablate_in(project, "verdict", str(proxy), "--against", str(project / "nowhere"))
    assert res.returncode == 2 and "Traceback" not in res.stderr and "nowhere" in res.stderr
    assert (proxy / "verdict.json").read_bytes() == before
    # --against is remembered; a later verdict whose target was removed still writes (and says so). The target's
    # last `ablate verdict` left its plots to a detached process that writes there until it is done: wait for it,
    # as a user removing the dir would have to (rmtree beside it fails with "Directory not empty")
    import shutil

    wait_for_plots(target)
    shutil.rmtree(target)
    res = ablate_in(project, "verdict", str(proxy))
    assert res.returncode == 0, res.stderr
    assert "Not compared: the target cannot be read" in (proxy / "verdict.md").read_text()


def test_against_a_dir_that_is_no_sweep_dir_names_the_option(tmp_path: Path) -> None:
    """`ablate verdict DIR --against OTHER` with OTHER not a sweep dir: the one-line error names `--against`
    (not DIR, which is fine), exit 2, and DIR's verdict is not touched."""
    from tests.helpers import make_sweep

    root = make_sweep(tmp_path / "sw", {"control": [0.71, 0.70, 0.73], "lr=0.1": [0.73, 0.74, 0.72]})
    (tmp_path / "other").mkdir()
    res = ablate_in(tmp_path, "verdict", str(root), "--against", str(tmp_path / "other"))
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert res.stderr.startswith("ablate: error: `--against`: ") and "not an ablate sweep dir" in res.stderr
    assert not (root / "verdict.md").exists()
