"""Reallocation within a seed budget (issue 39 item 2, :mod:`ablate.stats.budget`): the extended looks and the ledger
against hand counts, the budget's stop through :func:`ablate.stats.group_sequential_batch`, and the family-wise
error of the issue-39 suite with the freed seeds reallocated (benchmarks/sequential_budget.py holds the full table)."""

from __future__ import annotations

import numpy as np
import pytest

from ablate.stats import StatsInputError, group_sequential_batch
from ablate.stats.budget import budget_last_look, budget_looks, trials_used


def test_budget_looks_by_hand() -> None:
    """Looks 10, 20 of 3 arms, B = 80: one treatment and the control can reach n while the other stopped at 10 when
    10 + 2n <= 80, so n <= 35 and the looks go on at the spacing 10 to 30; B = 60 (= 20 x 3) adds none."""
    assert budget_looks([10, 20], 80, 3) == [10, 20, 30]
    assert budget_looks([10, 20], 60, 3) == [10, 20]
    assert budget_looks([10, 20], 85, 3) == [10, 20, 30]  # 10 + 2 x 40 = 90 > 85
    assert budget_looks([20, 40, 60], 360, 6) == [20, 40, 60, 80, 100, 120]  # at most twice the planned last look
    assert budget_looks([20, 40, 60], 199, 3) == [20, 40, 60, 80]  # 1 x 20 + 2 x 100 = 220 > 199: no look at 100



@pytest.mark.parametrize(("args", "word"), [(([10, 20], 59, 3), "seeds_budget"), (([20], 80, 3), "looks"),
                                            (([10, 20], 80, 1), "n_arms"), (([5, 15], 80, 3), "looks")])
def test_budget_looks_refuses_bad_input(args: tuple, word: str) -> None:
    """A budget below the planned last look x the arms (59 < 60), one look, one arm, a planned last look below 20
    seeds (where only a firm crossing stops): one line naming the parameter."""
    with pytest.raises(StatsInputError, match=word):
        budget_looks(*args)


def test_budget_last_look_by_hand() -> None:
    """Looks 10, 20, 30 (10, 20 planned), 2 treatments, B = 80. Row 1: one treatment stopped at look 1, so after look
    2 the trials used are 10 + 20 + 20 (control) = 50 and look 3 costs 10 x (1 + 1) = 20: 70 <= 80, it runs (end 2).
    Row 2: both run: 60 used, 30 more: 90 > 80, the budget ends both at look 2 (index 1). Row 3: both stopped at
    look 2, nothing runs on (end 2, never reached)."""
    end = budget_last_look([[0, 2], [2, 2], [1, 1]], [10, 20, 30], 2, 80)
    assert end.tolist() == [2, 1, 2]
    assert trials_used([[10, 30], [20, 20]]).tolist() == [70, 60]


def test_budget_stop_takes_the_planned_boundary() -> None:
    """A row the budget ends at look k has the verdict and N of look k, and never crosses where the full extended
    design would not have crossed by then: its rejections are a subset of the full design's (why α holds)."""
    rng = np.random.default_rng(392)
    t = rng.normal(size=(400, 30)) + 0.4
    c = rng.normal(size=(400, 30))
    looks = [10, 20, 30]
    full = group_sequential_batch(t, c, looks)
    cut = group_sequential_batch(t, c, looks, last_look=np.ones(400, int))
    early = full.stopped_at <= 1
    assert np.array_equal(cut.verdict[early], full.verdict[early]) and (cut.stopped_at <= 1).all()
    assert (cut.n_used[~early] == 20).all()
    crossed = np.isin(cut.verdict, (1, 2))
    assert not (crossed & ~np.isin(full.verdict, (1, 2))).any()
