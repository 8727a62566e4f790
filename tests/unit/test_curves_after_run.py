"""Curves asked for after the run (issue 38): ``ablate verdict DIR --curve`` on a finished ablation that did not ask
for them reads each trial's series from what it left (``steps.jsonl`` here, written as ``ablate.log_step`` writes
it: ``float.hex``), or refuses in one line when no trial kept one; ``--curve`` settings are remembered like the
other verdict options and ``--curve off`` clears them. In-process (``ablate_in``), on synthetic sweep dirs; the
real forms' own logs (printed lines, a Lightning CSV) are read after the run in
tests/integration/test_curves_scripts.py."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ablate.cli.commands import curve_settings
from ablate.errors import ConfigError
from tests.helpers import ablate_in, make_sweep

SEEDS = 6
STEPS = list(range(0, 100, 10))


def _curve(arm: int, seed: int) -> list[float]:
    """A decay to a plateau; the treatment (arm 1) decays faster; seed noise from a seeded generator."""
    rng = np.random.default_rng(100 * arm + seed)
    tau = 10.0 if arm else 40.0
    return [float(0.5 + np.exp(-s / tau) + rng.normal(0, 0.01)) for s in STEPS]


def _sweep(root: Path, steps: bool = True) -> Path:
    """Two arms of 6 seeds, each trial's final metric the last of its curve; with ``steps``, each trial's
    steps.jsonl as ``ablate.log_step(step, val_loss=v)`` writes it."""
    curves = {name: [_curve(i, s) for s in range(SEEDS)] for i, name in enumerate(("control", "lr=0.1"))}
    sd = make_sweep(root, {k: [c[-1] for c in v] for k, v in curves.items()}, metric="val_loss", goal="minimize")
    if steps:
        for name, per_seed in curves.items():
            for seed, ys in enumerate(per_seed):
                lines = [json.dumps({"step": s, "val_loss": float(y).hex()}) for s, y in zip(STEPS, ys, strict=True)]
                (sd / "trials" / name / f"seed={seed}" / "steps.jsonl").write_text("\n".join(lines) + "\n")
    return sd


def test_curves_after_the_run_are_read_from_log_step(tmp_path: Path) -> None:
    sd = _sweep(tmp_path / "sw")
    res = ablate_in(tmp_path, "verdict", str(sd), "--curve", "--no-plots")
    assert res.returncode == 0, res.stderr
    v = json.loads((sd / "verdict.json").read_text())
    cv = v["curves"]
    assert cv["asked"] == "after the run" and cv["sources"] == {"log_step": 2 * SEEDS} and cv["trial_errors"] == {}
    (cc,) = cv["comparisons"]
    assert cc["x"] == [float(s) for s in STEPS]
    # per-step means of the trials' own values (float.hex: exact)
    for key, arm in (("mean_control", 0), ("mean_treatment", 1)):
        want = np.mean([_curve(arm, s) for s in range(SEEDS)], axis=0)
        assert cc[key] == pytest.approx(want.tolist(), rel=1e-12)
    assert cc["summaries"]["final"]["agrees"]  # the last logged value is each trial's metric
    assert cc["regions"][1]["word"] == "better"  # a faster decay: less loss early
    md = (sd / "verdict.md").read_text()
    assert "Curves asked for after the run (`ablate verdict --curve`)" in md
    assert f"{2 * SEEDS} from ablate.log_step (steps.jsonl)" in md
    # remembered like the other options (a later `ablate resume` keeps them); `--curve off` clears them
    assert json.loads((sd / "verdict_options.json").read_text()) == {"curve": {}}
    assert ablate_in(tmp_path, "verdict", str(sd), "--no-plots").returncode == 0
    assert json.loads((sd / "verdict.json").read_text())["curves"]["comparisons"][0]["x"] == cc["x"]
    assert ablate_in(tmp_path, "verdict", str(sd), "--curve", "off", "--no-plots").returncode == 0
    assert "curves" not in json.loads((sd / "verdict.json").read_text())


def test_settings_given_after_the_run_are_validated_and_used(tmp_path: Path) -> None:
    sd = _sweep(tmp_path / "sw")
    res = ablate_in(tmp_path, "verdict", str(sd), "--curve", "summary=auc", "points=5", "--no-plots")
    assert res.returncode == 0, res.stderr
    cv = json.loads((sd / "verdict.json").read_text())["curves"]
    assert cv["summary"] == "auc" and cv["comparisons"][0]["grid"]["points"] == 5
    res = ablate_in(tmp_path, "verdict", str(sd), "--curve", "summary=median")
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "curve.summary" in res.stderr
    assert "Traceback" not in res.stderr


def test_no_series_kept_is_one_line_and_writes_nothing(tmp_path: Path) -> None:
    sd = _sweep(tmp_path / "sw", steps=False)
    res = ablate_in(tmp_path, "verdict", str(sd), "--curve")
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert res.stderr.count("\n") == 1, res.stderr
    assert f"no trial of {sd} kept a series of 'val_loss' against 'step'" in res.stderr
    assert "control/seed=0: the series of 'val_loss' against 'step' was not recorded" in res.stderr
    assert "ablate.log_step(step, val_loss=value)" in res.stderr and "curve.enabled=true" in res.stderr
    assert not (sd / "verdict.json").exists() and not (sd / "verdict_options.json").exists()


def test_an_x_axis_the_trials_did_not_log_is_named(tmp_path: Path) -> None:
    sd = _sweep(tmp_path / "sw")
    res = ablate_in(tmp_path, "verdict", str(sd), "--curve", "x=tokens")
    assert res.returncode == 2 and res.stderr.count("\n") == 1
    assert "log_step: no column 'tokens' was logged beside 'val_loss'" in res.stderr


@pytest.mark.parametrize(("words", "want"), [
    ([], {}), (["off"], False), (["x=epoch", "threshold=0.9", "points=50"], {"x": "epoch", "threshold": 0.9,
                                                                              "points": 50}),
    (["curve.summary=auc"], {"summary": "auc"}),
])
def test_curve_words(words: list[str], want: object) -> None:
    assert curve_settings(words) == want


def test_a_word_that_is_no_setting_is_refused() -> None:
    with pytest.raises(ConfigError) as exc:
        curve_settings(["epoch"])
    assert exc.value.where == "--curve" and "'epoch' is not a curve setting KEY=VALUE" in str(exc.value)
