"""The group-sequential simulations hold the code the verdict runs (issue 27, item 6): on the same data,
:func:`ablate.stats.group_sequential_batch` (what tests/unit/test_stats_aa.py simulates) stops every row at the
look where :func:`ablate.judge.verdict.sequential_state` (what ``ablate verdict`` replays) stops it, with the same
boundary and, through ``compare()`` at that boundary, the same verdict and the same firm flag; a look the verdict
passed over (issue 37 item 4) is one where ``compare()`` says better/worse, indicative."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from ablate.judge.options import VerdictOptions
from ablate.judge.verdict import ArmData, sequential_state
from ablate.stats import compare, group_sequential_batch

LOOKS = [5, 10, 15, 20]


@pytest.mark.parametrize("paired", [False, True])
def test_batch_twin_equals_sequential_state(paired: bool) -> None:
    rng = np.random.default_rng(11 + paired)
    rows = 30
    shared = rng.normal(size=(rows, 20))
    c = 0.7 + 0.01 * (0.6 * shared + 0.8 * rng.normal(size=(rows, 20)))
    shift = np.where(np.arange(rows) % 3 == 0, 0.012, 0.0)[:, None]  # a third with a real effect
    t = 0.7 + shift + 0.01 * (0.6 * shared + 0.8 * rng.normal(size=(rows, 20)))
    t[rng.random((rows, 20)) < 0.03] = np.nan  # a few failed trials
    batch = group_sequential_batch(t, c, LOOKS, paired=paired)
    plan = {"seeds": list(range(20)), "goal": "maximize", "task": {},
            "arms": [{"name": "control"}, {"name": "lr=0.1"}]}
    opts = VerdictOptions(sequential="group", looks=LOOKS, pairing="paired" if paired else "unpaired")
    seen = Counter()
    for i in range(rows):
        data = {"control": ArmData("control", "control", 0.05, dict(enumerate(c[i])), Counter(), 0, {}),
                "lr=0.1": ArmData("lr=0.1", "0.1", 0.1, dict(enumerate(t[i])), Counter(), 0, {})}
        st = sequential_state(plan, data, opts)["lr=0.1"]
        assert st["look"] == int(batch.stopped_at[i]) and st["n"] == int(batch.n_used[i])
        n = st["n"]
        comp = compare(t[i, :n], c[i, :n], paired=paired, p_threshold=st["threshold"], pi_interval=False)
        assert comp.verdict == ("insufficient data", "better", "worse", "equivalent", "inconclusive")[
            int(batch.verdict[i])]
        assert bool(comp.firm) == bool(batch.firm[i])  # the firm flag compare() writes is the one the looks stop on
        # issue 37: only a firm better/worse (or equivalence) stops an arm; an indicative crossing runs on, unless
        # evident skew alone keeps it indicative before the last look (issue 39: it is indicative at every N)
        skew_stop = bool(st.get("skewed_stop"))
        assert st["stopped"] == ((comp.verdict in ("better", "worse") and bool(comp.firm))
                                 or comp.verdict == "equivalent" or skew_stop)
        if skew_stop:
            assert comp.verdict in ("better", "worse") and comp.firm is False and comp.skew_evident
            assert st["look"] < len(LOOKS) - 1
            seen["skew_stop"] += 1
        for k in st["passed"]:  # a passed look crossed its boundary, indicatively, and the arm ran on
            cut = {a: ArmData(d.name, d.label, d.value, {s: v for s, v in d.values.items() if s < LOOKS[k]},
                              Counter(), 0, {}) for a, d in data.items()}
            early = sequential_state(plan, cut, opts)["lr=0.1"]
            assert early["look"] == k and not early["stopped"]
            ce = compare(t[i, :LOOKS[k]], c[i, :LOOKS[k]], paired=paired, p_threshold=early["threshold"],
                         pi_interval=False)
            assert ce.verdict in ("better", "worse") and ce.firm is False, (i, k, ce.verdict, ce.firm)
            seen["passed"] += 1
        seen[comp.verdict] += 1
        assert math.isfinite(st["threshold"])
    assert seen["better"] + seen["inconclusive"] + seen["worse"] == rows and seen["better"] > 0, seen
    assert seen["inconclusive"] > 0 and seen["passed"] > 0, seen
