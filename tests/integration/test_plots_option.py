"""``plots=false``: a run writes its verdict text and table but draws no PNG plots (the detached drawer, python and
matplotlib, costs 1.2-1.4 s of CPU per ablation: measured with a subreaper around ``ablate verdict``, 2.37-2.81 s
against 1.45-1.57 s with ``--no-plots``); ``ablate verdict DIR`` draws them later. The option is read where the
verdict is written after trials (``ablate.orchestrate.pipeline.execute``), which every launcher, resume, collect
and extend go through, so one run here stands for them."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

import ablate
from tests.helpers import ablate_cli, ablate_in, add_pure_task

PNGS = {"verdict_forest.png", "verdict_values.png", "verdict_paired.png"}


def test_plots_false_draws_none_and_verdict_draws_them_later(project: Path) -> None:
    add_pure_task(project)
    sd = project / "outputs" / "text_only"
    res = ablate_cli(project, "-m", "task=pure", "variable=lr", "seeds=3", "launcher=inline", "plots=false",
                     f"hydra.sweep.dir={sd}")
    assert res.returncode == 0, res.stderr
    assert yaml.safe_load((sd / "ablation.yaml").read_text())["options"]["plots"] is False
    assert {p.name for p in sd.glob("*.png")} == set() and not (sd / "plots.log").exists()
    verdict = json.loads((sd / "verdict.json").read_text())
    assert verdict["plots"] == {}
    assert ".png" not in (sd / "verdict.md").read_text()
    assert (sd / "ablation_table.csv").is_file()  # the rest of the verdict is written as usual
    later = ablate_cli(project, "verdict", str(sd), "--wait-plots")
    assert later.returncode == 0, later.stderr
    assert {p.name for p in sd.glob("*.png")} == PNGS
    assert json.loads((sd / "verdict.json").read_text())["plots"]["forest"] == "verdict_forest.png"


def test_the_api_takes_plots_false_and_a_bad_value_is_one_line(project: Path) -> None:
    add_pure_task(project)
    sd = project / "outputs" / "api"
    v = ablate.run(project / "conf", variable="lr", seeds=3, launcher="inline", overrides={"task": "pure"},
                   plots=False, sweep_dir=sd)
    assert v["plots"] == {} and not list(sd.glob("*.png"))
    bad = ablate_in(project, "-m", "task=pure", "variable=lr", "seeds=3", "plots=sometimes", "dry_run=true")
    assert bad.returncode == 2
    assert bad.stderr.startswith("ablate: error: `plots`") and "Fix:" in bad.stderr, bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1
