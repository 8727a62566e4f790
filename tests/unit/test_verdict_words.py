"""verdict.md's words a new reader tripped on (issue 27): the firm-from number vs the power number, the MDE's
level, the ablation table's `firm` column, "> cap" and "p × 10", each said in place, on a real sweep dir."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests

from ablate.judge.verdict import write_verdict
from ablate.record.sweepdir import SweepDir
from tests.helpers import make_sweep

C = [0.712, 0.695, 0.731, 0.704, 0.719]
T = [0.728, 0.741, 0.716, 0.739, 0.733]  # Welch vs C: p = 0.0386886 (spec C1)
# 8 seeds per arm, the fewest at which a continuous metric's better/worse can be firm (stop 48): C and T with 3 more
# seeds each (Welch p = 0.0382581, scipy)
C8 = [*C, 0.710, 0.724, 0.700]
T8 = [*T, 0.713, 0.709, 0.727]
STRONG8 = [v + 0.05 for v in T8]


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, str]:
    """Two treatments under Holm, 8 seeds per arm: lr=0.2 firm, lr=0.1 better at Holm's second step but indicative
    (p_adj x 10 >= 0.05; below 8 seeds per arm both would be indicative whatever p)."""
    root = make_sweep(tmp_path_factory.mktemp("words") / "sw", {"control": C8, "lr=0.2": STRONG8, "lr=0.1": T8},
                      options={"pairing": "unpaired"})
    write_verdict(SweepDir.open(root), {"plots": False})
    return root, json.loads((root / "verdict.json").read_text()), (root / "verdict.md").read_text()


def test_csv_firm_column_matches_verdict_json(sweep: tuple[Path, dict, str]) -> None:
    root, v, _ = sweep
    firm = {c["arm"]: c["firm"] for c in v["comparisons"]}
    assert firm == {"lr=0.2": True, "lr=0.1": False}
    rows = {r["arm"]: r for r in csv.DictReader(io.StringIO((root / "ablation_table.csv").read_text()))}
    assert {a: rows[a]["firm"] for a in firm} == {a: str(f).lower() for a, f in firm.items()}
    assert rows["control"]["firm"] == ""


def test_csv_firm_column_empty_for_inconclusive(tmp_path: Path) -> None:
    root = make_sweep(tmp_path / "sw", {"control": C, "lr=0.1": C[::-1]})
    v = write_verdict(SweepDir.open(root), {"plots": False})
    assert v["comparisons"][0]["verdict"] == "inconclusive" and v["comparisons"][0]["firm"] is None
    rows = {r["arm"]: r for r in csv.DictReader(io.StringIO((root / "ablation_table.csv").read_text()))}
    assert rows["lr=0.1"]["firm"] == ""


def test_p_times_10_says_what_and_why(sweep: tuple[Path, dict, str]) -> None:
    """The indicative reason says which p is multiplied, its value (Holm's p_adj from statsmodels) and why: once, in
    the Seed recommendation beside the seeds it asks for (not again in the bottom line or the flags)."""
    _, v, md = sweep
    ps = [stats.ttest_ind(x, C8, equal_var=False).pvalue for x in (STRONG8, T8)]
    p_adj = multipletests(ps, alpha=0.05, method="holm")[1][1]
    assert {c["arm"]: c for c in v["comparisons"]}["lr=0.1"]["pvalue_adjusted"] == pytest.approx(p_adj, rel=1e-9)
    text = (f"p_adj (p adjusted for testing several treatments) × 10 = {p_adj * 10:.2g} is not below α = 0.05 "
            "(below 20 seeds per arm a verdict is firm only when p_adj is 10 times under its level)")
    seeds = md[md.index("## Seed recommendation"):md.index("## Ablation table")]
    assert md.count(text) == 1 and text in seeds
    assert "does not clear the level" not in md


def test_firm_from_and_power_seeds_say_which_question(sweep: tuple[Path, dict, str]) -> None:
    """One seed number in the bottom line (the Next line's, the larger of the two), the other beside it under Seed
    recommendation with one sentence on how they differ."""
    _, v, md = sweep
    c = {c["arm"]: c for c in v["comparisons"]}["lr=0.1"]
    need = c["seed_advice"]["n_needed"]
    assert c["firm_from"] == 20 and need != 20
    bottom = md[md.index("## Bottom line"):md.index("## For the paper")]
    run = max(20, need)
    assert f"seeds={run}" in bottom and f"({run} seeds per arm: runs only the" in bottom
    assert "20 seeds" not in bottom or run == 20
    line = next(x for x in md[md.index("## Seed recommendation"):].splitlines() if x.startswith("- **lr=0.1**"))
    assert "At 20 seeds per arm it is firm if its p_adj then stays below α (more seeds can also show no effect)." \
        in line
    assert line.endswith(f"The two numbers answer two questions: 20 seeds per arm is where ablate's rule calls this "
                         f"verdict firm, {need} seeds per arm give 80% power for the effect seen so far; the Next line "
                         f"runs the larger, {run}.")
    firm_line = next(x for x in md[md.index("## Seed recommendation"):].splitlines() if x.startswith("- **lr=0.2**"))
    assert "two questions" not in firm_line  # a firm verdict has no second number to tell apart


def test_mde_line_names_its_level(sweep: tuple[Path, dict, str]) -> None:
    """m = 2 under Holm: the MDE is at α/m = 0.025 and says it is the strictest of Holm's levels (lr=0.1 was
    decided at Holm's second step, α = 0.05 on p_adj, i.e. raw p against α/1)."""
    _, v, md = sweep
    assert all(c["seed_advice"]["alpha"] == pytest.approx(0.025) for c in v["comparisons"])
    seeds = md[md.index("## Seed recommendation"):md.index("## Flags")]
    assert seeds.count("two-sided, at α/m = 0.025, the strictest of Holm's step levels") == 2
