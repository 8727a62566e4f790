"""``dry_run=true`` with ``sequential=group`` prints the design's expected trials beside fixed N (issue 39 item 3),
in-process (:func:`tests.helpers.ablate_in`): nothing runs."""

from __future__ import annotations

import re
from pathlib import Path

from tests.helpers import ablate_in


def test_dry_run_prints_expected_trials(project: Path) -> None:
    res = ablate_in(project, "-m", "variable=lr", "sequential=group", "dry_run=true")
    assert res.returncode == 0, res.stderr
    line = next(x for x in res.stdout.splitlines() if x.strip().startswith("sequential: looks at N = 5, 10, 15, 20"))
    m = re.search(r"expected trials no effect (\d+) \(([\d.]+) seeds per treatment\), 0.5 SD (\d+) .*, 1 SD (\d+) "
                  r"\(([\d.]+) seeds per treatment\); fixed N = 20: (\d+)", line)
    assert m, line
    arms = re.search(r"arms \((\d+)\)", res.stdout)
    assert arms, res.stdout
    n_arms = int(arms.group(1))
    assert int(m.group(6)) == n_arms * 20
    assert int(m.group(1)) <= int(m.group(6)) and int(m.group(4)) < int(m.group(1))
    assert "simulation of Welch's test" in line
    assert "dry run: nothing launched" in res.stdout
    assert not list(project.glob("outputs/**/ablation.yaml"))


def test_dry_run_with_a_planned_effect_simulates_futility(project: Path) -> None:
    """With ``effect=0.5`` the planning line adds the planned effect and simulates futility stops: expected trials
    under no effect fall below those of the same looks without it (issue 39 item 2)."""
    def line(*extra: str) -> str:
        res = ablate_in(project, "-m", "variable=lr", "sequential=group", "looks=[10,20,30,40]", *extra, "dry_run=true")
        assert res.returncode == 0, res.stderr
        return next(x for x in res.stdout.splitlines() if x.strip().startswith("sequential: looks at N"))

    with_fut, without = line("effect=0.5"), line()
    assert "futility stops at conditional power < 0.1 under 0.5 SD" in with_fut
    assert "futility" not in without

    def none(s: str) -> int:
        m = re.search(r"expected trials no effect (\d+)", s)
        assert m, s
        return int(m.group(1))

    assert none(with_fut) < none(without)


def test_dry_run_of_looks_far_apart_answers(project: Path) -> None:
    """``looks=[5,100000]`` (within the 100,000-seeds cap): the plan's simulation draws each stretch between looks
    whole instead of 48 GB of seeds (it died with MemoryError); fixed N = 100,000 seeds x the arms."""
    res = ablate_in(project, "-m", "variable=lr", "sequential=group", "looks=[5,100000]", "dry_run=true")
    assert res.returncode == 0, res.stderr
    line = next(x for x in res.stdout.splitlines() if x.strip().startswith("sequential: looks at N = 5, 100000"))
    arms = re.search(r"arms \((\d+)\)", res.stdout)
    assert arms and f"fixed N = 100000: {int(arms.group(1)) * 100_000}" in line, line
