"""``ablate extend`` with odd ``seeds=`` (the 2026-12-03 attack): a K whose new seeds would not fit in 32 bits, and
``seeds=`` given twice, are refused in one line with the fix before anything is recorded. Synthetic sweep dirs
(:func:`tests.helpers.make_sweep`: these refusals come before the pins are checked), ablate's CLI entry called in
this process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.helpers import ablate_in, add_pure_task, make_sweep, only_sweep

VALUES = {"control": [0.80, 0.81, 0.82], "lr=0.1": [0.85, 0.86, 0.87]}


def test_seeds_past_32_bits_are_refused(tmp_path: Path) -> None:
    """An ablation of seeds 4294967293..4294967295 (listed): any new seed would pass 2**32 - 1."""
    sd = make_sweep(tmp_path / "sd", VALUES)
    top = 2**32 - 1
    for arm in ("control", "lr=0.1"):
        for i in range(3):
            t = sd / "trials" / arm / f"seed={i}"
            rec = json.loads((t / "result.json").read_text())
            (t / "result.json").write_text(json.dumps({**rec, "seed": top - 2 + i}))
            t.rename(t.with_name(f"seed={top - 2 + i}"))
    plan = yaml.safe_load((sd / "ablation.yaml").read_text())
    plan["seeds"] = [top - 2, top - 1, top]
    (sd / "ablation.yaml").write_text(yaml.safe_dump(plan, sort_keys=False))
    before = (sd / "ablation.yaml").read_bytes()
    res = ablate_in(tmp_path, "extend", str(sd), "seeds=6")
    assert res.returncode == 2, res.stderr
    (line,) = res.stderr.strip().splitlines()
    assert f"`seeds`: seeds=6 would run seeds up to {top + 3}, past {top}" in line, line
    assert f"Fix: give at most 3, e.g. `ablate extend {sd} seeds=6`" in line, line
    assert (sd / "ablation.yaml").read_bytes() == before


@pytest.mark.parametrize("k", ["99999999999999999999", "1000000000"])
def test_an_extension_past_the_most_seeds_is_refused(tmp_path: Path, k: str) -> None:
    """99999999999999999999 was an OverflowError traceback; 1000000000 would build a list of 1e9 seeds."""
    sd = make_sweep(tmp_path / "sd", VALUES)
    res = ablate_in(tmp_path, "extend", str(sd), f"seeds={k}")
    assert res.returncode == 2, res.stderr
    (line,) = res.stderr.strip().splitlines()
    assert f"`seeds`: {k} seeds per arm is more than 100000, the most a sweep dir holds" in line, line
    assert f"Fix: e.g. `ablate extend {sd} seeds=6`" in line, line


@pytest.mark.parametrize("args", [("seeds=6", "seeds=7"), ("seeds=6", "seeds=6")])
def test_seeds_given_twice_is_refused(tmp_path: Path, args: tuple[str, ...]) -> None:
    sd = make_sweep(tmp_path / "sd", VALUES)
    res = ablate_in(tmp_path, "extend", str(sd), *args)
    assert res.returncode == 2, res.stderr
    (line,) = res.stderr.strip().splitlines()
    assert f"`ablate extend`: `seeds=` is given twice ({args[0]}, {args[1]})" in line, line
    assert "Fix: give it once: `ablate extend DIR seeds=K`" in line, line


@pytest.mark.parametrize("seeds", ["200000000", "4294967296", "100001"])
def test_a_seed_count_no_sweep_dir_could_hold_is_refused_before_it_is_built(project: Path, seeds: str) -> None:
    """`seeds=200000000` (a typo for 20) built a list of 2e8 seeds: a MemoryError traceback, or the machine's
    memory. Refused in one line before any list is built; 100,000 per arm still plans."""
    res = ablate_in(project, "-m", "variable=lr", f"seeds={seeds}", "dry_run=true")
    assert res.returncode == 2, res.stderr
    (line,) = res.stderr.strip().splitlines()
    assert (f"`seeds`: {seeds} seeds per arm is more than 100000, the most a sweep dir holds (one dir per trial): "
            "taken for a typo") in line and "Fix: e.g. `seeds=10`" in line, line



def test_extend_after_a_data_edit_names_extend_as_the_fix_and_it_works(project: Path) -> None:
    """The data edited after the ablation: the refusal's fix said "then `ablate resume` again", which finds
    nothing to run (the extension was never recorded). It names the extension itself, and that works once the
    data is restored."""
    add_pure_task(project)
    res = ablate_in(project, "-m", "task=pure", "variable=lr", "variable.values=[0.2]", "seeds=3", "launcher=inline")
    assert res.returncode == 0, res.stderr
    sd = only_sweep(project)
    data = project / "data" / "digits.npz"
    kept = data.read_bytes()
    data.write_bytes(kept + b"x")
    res = ablate_in(project, "extend", str(sd), "seeds=6")
    assert res.returncode == 2, res.stderr
    (line,) = res.stderr.strip().splitlines()
    assert "`task.data`: the data no longer matches the pins recorded at launch" in line, line
    assert f"then `ablate extend {sd} seeds=6` again; finished trials are kept" in line and "resume" not in line
    data.write_bytes(kept)  # the fix: restore it (as `dvc checkout --force` would), then the command it names
    res = ablate_in(project, "extend", str(sd), "seeds=6")
    assert res.returncode == 0, res.stderr
    assert len(list(sd.glob("trials/*/seed=*/result.json"))) == 12


@pytest.mark.parametrize("looks", ["[3,1000000000]", "[5,100001]"])
def test_a_last_look_past_the_most_seeds_is_refused(project: Path, looks: str) -> None:
    """sequential=group runs up to the last look: `looks=[3,1000000000]` built 1e9 seeds (a MemoryError)."""
    res = ablate_in(project, "-m", "variable=lr", "sequential=group", "effect=0.5", f"looks={looks}",
                    "dry_run=true")
    assert res.returncode == 2, res.stderr
    (line,) = res.stderr.strip().splitlines()
    last = looks.strip("]").split(",")[-1]
    assert f"`looks`: {last} seeds per arm is more than 100000, the most a sweep dir holds" in line, line
    assert "Fix: end `looks` at 100000 or fewer, e.g. `looks=[5,10,15,20]`" in line, line
