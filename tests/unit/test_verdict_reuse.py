"""``ablate verdict DIR`` reprints a verdict whose inputs did not change, and recomputes it when anything it
depends on changed: a trial record (by content, whatever its mtime), an option, an output file. Whether it
was recomputed is read from the process itself: a recomputation imports scipy.stats, a reuse does not."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO, ablate_in, make_sweep, wait_for_plots

C = [0.712, 0.695, 0.731, 0.704, 0.719]
T = [0.728, 0.741, 0.716, 0.739, 0.733]
T2 = [0.709, 0.722, 0.700, 0.731, 0.713]
RUN = ("import sys; from ablate.cli.commands import dispatch; code = dispatch('verdict', sys.argv[1:]); "
       "print('computed' if 'scipy.stats' in sys.modules else 'reused'); sys.exit(code)")


def _verdict(*args: str) -> str:
    """Run `ablate verdict ARGS` in a fresh process; 'computed' or 'reused'."""
    out = subprocess.run([sys.executable, "-c", RUN, *args], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    return out.stdout.strip().splitlines()[-1]


def _verdict_in(*args: str) -> str:
    """Run `ablate verdict ARGS` in this process (``tests.helpers.ablate_in``); 'computed' when it wrote
    verdict.json (always atomically: a new file, so a new inode while the old one still existed), 'reused' when
    the file it found is the one it left. :func:`_verdict`'s fresh process is the proof that the two agree."""
    path = Path(args[0]) / "verdict.json"
    before = path.stat().st_ino if path.exists() else None
    res = ablate_in(path.parent, "verdict", *args)
    assert res.returncode == 0, res.stderr
    return "reused" if path.stat().st_ino == before else "computed"


def test_reuse_and_what_recomputes(tmp_path: Path) -> None:
    root = make_sweep(tmp_path / "sw", {"control": C, "lr=0.1": T, "lr=0.2": T2})
    d = str(root)
    assert _verdict(d, "--no-plots") == "computed"
    first = (root / "verdict.json").read_bytes()
    assert _verdict(d, "--no-plots") == "reused"
    assert (root / "verdict.json").read_bytes() == first
    assert _verdict(d, "--no-plots", "--recompute") == "computed"
    assert (root / "verdict.json").read_bytes() == first  # the same inputs give the same verdict
    # the same three in-process, read from whether verdict.json was written: the rest of the test reads it so
    # (a fresh process per call, each importing scipy.stats to recompute, cost 20 processes)
    assert _verdict_in(d, "--no-plots") == "reused"
    assert _verdict_in(d, "--no-plots", "--recompute") == "computed"
    assert (root / "verdict.json").read_bytes() == first
    assert _verdict_in(d, "--no-plots") == "reused"

    # a trial's result changes, its size and mtime kept: the content decides
    res = root / "trials" / "lr=0.1" / "seed=2" / "result.json"
    st = res.stat()
    text = res.read_text()
    changed = text.replace(json.dumps(T[2]), json.dumps(0.715))
    assert changed != text and len(changed) == len(text)
    res.write_text(changed)
    os.utime(res, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert _verdict_in(d, "--no-plots") == "computed"
    v = json.loads((root / "verdict.json").read_text())
    assert v["arms"][1]["values"]["2"] == 0.715
    assert _verdict_in(d, "--no-plots") == "reused"

    # a manifest changes (the confound check reads it)
    man = root / "trials" / "lr=0.2" / "seed=0" / "manifest.json"
    m = json.loads(man.read_text())
    m["environment"]["python"] = "3.12"
    man.write_text(json.dumps(m))
    assert _verdict_in(d, "--no-plots") == "computed"
    findings = json.loads((root / "verdict.json").read_text())["confounds"]["findings"]
    assert [f["field"] for f in findings] == ["python"]  # the environment differs now
    assert _verdict_in(d, "--no-plots") == "reused"

    # options: given, given again (the same verdict), then remembered (its provenance differs: recomputed)
    assert _verdict_in(d, "--no-plots", "--alpha", "0.01") == "computed"
    assert _verdict_in(d, "--no-plots", "--alpha", "0.01") == "reused"
    assert _verdict_in(d, "--no-plots") == "computed"
    assert json.loads((root / "verdict.json").read_text())["non_default_options"][0]["source"] == "remembered"
    assert _verdict_in(d, "--no-plots", "--reset") == "computed"
    assert json.loads((root / "verdict.json").read_text())["alpha"] == 0.05

    # an output edited or deleted: recomputed, and the file is whole again
    (root / "verdict.md").write_text("edited")
    assert _verdict_in(d, "--no-plots", "--reset") == "computed"
    assert (root / "verdict.md").read_text().startswith("# Ablation of")
    (root / "results.csv").unlink()
    assert _verdict_in(d, "--no-plots", "--reset") == "computed"
    assert (root / "results.csv").is_file()

    # with plots: reused only once they are drawn, and their PNGs are part of the key
    assert _verdict_in(d) == "computed"
    wait_for_plots(root)
    assert _verdict_in(d) == "reused"
    (root / "verdict_values.png").write_bytes(b"not a png")
    assert _verdict_in(d, "--wait-plots") == "computed"
    assert (root / "verdict_values.png").read_bytes()[:4] == b"\x89PNG"


def test_pending_plots_and_against_are_never_reused(tmp_path: Path) -> None:
    from ablate.judge.verdict import reuse_call, write_verdict
    from ablate.record.sweepdir import SweepDir
    from ablate.record.verdict_key import TrialDigest, reusable

    root = make_sweep(tmp_path / "sw", {"control": C, "lr=0.1": T})
    sd = SweepDir.open(root)
    from ablate.record.results import write_results

    digest = TrialDigest()
    write_verdict(sd, rows=write_results(sd, digest=digest), digest=digest, plots_later=True)
    assert (root / ".verdict_key.json").is_file()
    assert not reusable(sd, sd.plan(), reuse_call(sd.plan(), {}))  # the plots are still marked pending
    write_verdict(sd, rows=write_results(sd, digest=(d2 := TrialDigest())), digest=d2)
    assert reusable(sd, sd.plan(), reuse_call(sd.plan(), {}))
    assert not reusable(sd, sd.plan(), reuse_call(sd.plan(), {"alpha": 0.01}))
    write_verdict(sd)  # no digest (a caller that did not collect one): the key is removed, nothing is reused
    assert not (root / ".verdict_key.json").exists() and not reusable(sd, sd.plan(), reuse_call(sd.plan(), {}))
    other = make_sweep(tmp_path / "other", {"control": C, "lr=0.1": T})
    assert _verdict_in(str(root), "--no-plots", "--against", str(other)) == "computed"
    assert not (root / ".verdict_key.json").exists()
    assert _verdict_in(str(root), "--no-plots", "--against", str(other)) == "computed"


def _steps(t: Path, ys: list[float]) -> None:
    """A trial's steps.jsonl as ``ablate.log_step(step, val_acc=y)`` writes it (float.hex)."""
    (t / "steps.jsonl").write_text("".join(json.dumps({"step": 10 * i, "val_acc": y.hex()}) + "\n"
                                           for i, y in enumerate(ys)))


def test_the_files_curves_are_read_from_are_in_the_key(tmp_path: Path) -> None:
    from ablate.judge.curve_options import CURVE_DEFAULTS
    from ablate.judge.verdict import reuse_call, write_verdict
    from ablate.record.curves import write_curve
    from ablate.record.results import write_results
    from ablate.record.sweepdir import SweepDir
    from ablate.record.verdict_key import TrialDigest, reusable

    def verdict(sd: SweepDir, overrides: dict) -> dict:
        digest = TrialDigest()
        return write_verdict(sd, overrides, rows=write_results(sd, digest=digest), digest=digest)

    def kept(sd: SweepDir, overrides: dict) -> bool:
        return reusable(sd, sd.plan(), reuse_call(sd.plan(), overrides))

    def curve(final: float, i: int) -> list[float]:
        return [final - 0.1 + 0.02 * k + 0.001 * i for k in range(5)] + [final]

    # an ablation that asked for curves: each trial's curve.json is read, and is in the key
    cfg = {**CURVE_DEFAULTS, "enabled": True, "metric": "val_acc"}
    root = make_sweep(tmp_path / "sw", {"control": C, "lr=0.1": T}, options={"curve": cfg})
    for arm, vals in (("control", C), ("lr=0.1", T)):
        for s, v in enumerate(vals):
            ys = curve(v, s)
            write_curve(root / "trials" / arm / f"seed={s}" / "curve.json",
                        {"metric": "val_acc", "x": "step", "source": "log_step", "path": None},
                        [10.0 * k for k in range(len(ys))], ys)
    sd = SweepDir.open(root)
    off = {"plots": False}
    first = verdict(sd, off)["curves"]["comparisons"][0]["mean_control"]
    assert kept(sd, off)
    one = root / "trials" / "control" / "seed=2" / "curve.json"
    rec = json.loads(one.read_text())
    rec["ys"][0] += 0.05  # one logged point edited: the verdict is stale
    one.write_text(json.dumps(rec))
    assert not kept(sd, off)
    again = verdict(sd, off)["curves"]["comparisons"][0]["mean_control"]
    assert again[0] == pytest.approx(first[0] + 0.05 / len(C), rel=1e-12) and again[1:] == first[1:]
    assert kept(sd, off)
    one.unlink()  # a curve gone
    assert not kept(sd, off)
    verdict(sd, off)
    assert kept(sd, {"plots": False, "curve": {"summary": "auc"}}) is False  # other curve settings: another verdict

    # with its plots: each treatment's curve PNG is an output of the key
    v = verdict(sd, {})
    png = root / v["plots"]["curves"]["lr=0.1"]
    assert png.read_bytes()[:4] == b"\x89PNG" and kept(sd, {})
    png.write_bytes(b"not a png")
    assert not kept(sd, {})

    # curves asked for after the run: the series read in curve.json's place (steps.jsonl) are in the key, and a
    # curve.json appearing makes it stale too (it is read first)
    root2 = make_sweep(tmp_path / "posthoc", {"control": C, "lr=0.1": T})
    for arm, vals in (("control", C), ("lr=0.1", T)):
        for s, v in enumerate(vals):
            _steps(root2 / "trials" / arm / f"seed={s}", curve(v, s))
    sd2 = SweepDir.open(root2)
    asked = {"plots": False, "curve": {}}
    assert verdict(sd2, asked)["curves"]["sources"] == {"log_step": 2 * len(C)}
    assert kept(sd2, asked)
    t = root2 / "trials" / "lr=0.1" / "seed=1"
    _steps(t, [*curve(T[1], 1)[:-1], T[1] + 0.0])  # the same values, rewritten: still the same bytes
    assert kept(sd2, asked)
    _steps(t, [y + 0.01 for y in curve(T[1], 1)])
    assert not kept(sd2, asked)
    verdict(sd2, asked)
    assert kept(sd2, asked)
    (t / "curve.json").write_text((root / "trials" / "lr=0.1" / "seed=1" / "curve.json").read_text())
    assert not kept(sd2, asked)
