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
