"""Help and doc texts agree with the code (issue 23): the inline hash-seed warning, `ablate --help`'s
launcher settings, the suite variables README names, the CI levels concepts.md states."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

from ablate.cli.help import render_help

REPO = Path(__file__).resolve().parents[2]


def test_inline_warning_says_local_trials_share_the_ablations_one_hash_seed() -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONHASHSEED"}
    code = "from ablate.trials.seeding import inline_hash_warning as w; print(w(['seeded']))"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert "string hashing is randomised" in out
    assert "the ablation's one PYTHONHASHSEED, the plan's first seed" in out
    assert "PYTHONHASHSEED=<seed>" not in out
    docs = (REPO / "docs" / "reproducibility.md").read_text()
    assert "one `PYTHONHASHSEED`: the plan's first seed" in docs


def test_help_lists_every_launcher_setting() -> None:
    text = render_help(REPO)
    section = text.split("== Launcher settings ==", 1)[1].split("== An app task", 1)[0]
    for f in (REPO / "ablate" / "conf" / "launcher").glob("*.yaml"):
        assert f"launcher={f.stem}" in section
        for key in set(yaml.safe_load(f.read_text())) - {"name"}:
            assert f"  launcher.{key}: " in section, (f.stem, key)
    # the ones README sends readers to --help for
    for key in ("max_parallel", "warm", "trials_per_job", "partition", "gpus_per_trial"):
        assert f"launcher.{key}: " in section
    assert "launcher=local (default)" in section


def test_the_suite_variables_readme_names_ship_in_conf_variable() -> None:
    readme = (REPO / "README.md").read_text()
    assert "`lr_hi` (task.optim.lr 0.2)" in readme
    for name, key, values in (("lr_hi", "task.optim.lr", [0.2]), ("momentum", "task.optim.momentum", [0.5]),
                              ("hidden", "task.hidden", [32])):
        v = yaml.safe_load((REPO / "conf" / "variable" / f"{name}.yaml").read_text())
        assert v == {"key": key, "values": values}


def test_concepts_states_the_holm_levels_the_verdict_shows() -> None:
    concepts = (REPO / "docs" / "concepts.md").read_text()
    assert "97.5% for two)" not in concepts
    assert "1 − α/(m − j + 1)" in concepts
    assert "1 − α/(m − j + 1) for a treatment rejected at step j" in (REPO / "docs" / "verdict.md").read_text()
