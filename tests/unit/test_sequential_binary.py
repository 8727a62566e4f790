"""A 0/1 metric in sequential mode (issue 37): each look stops on the firm answer ``compare()`` gives for the same
seeds (the score test, firm only where Fisher's exact test also rejects), not on :func:`ablate.stats.decide_batch`'s
flag (Welch's t on the 0/1 values, firm from 20 seeds), which disagreed with it at 124 of the 562 (N, successes) pairs
of 10 and 20 seeds per arm at a boundary p of 0.01."""

from __future__ import annotations

from collections import Counter

import numpy as np

from ablate.judge.options import VerdictOptions
from ablate.judge.verdict import ArmData, sequential_state
from ablate.stats import compare, decide_batch

LOOKS = [5, 10, 15, 20]


def _data(t: np.ndarray, c: np.ndarray) -> dict[str, ArmData]:
    return {"control": ArmData("control", "control", 0.05, dict(enumerate(c)), Counter(), 0, {}),
            "lr=0.1": ArmData("lr=0.1", "0.1", 0.1, dict(enumerate(t)), Counter(), 0, {})}


def test_a_binary_look_stops_on_compares_firm_answer() -> None:
    rng = np.random.default_rng(37)
    rows = 40
    p_t = np.where(np.arange(rows) % 2 == 0, 0.95, 0.5)[:, None]  # half with a large real effect
    t, c = (rng.random((rows, 20)) < p_t).astype(float), (rng.random((rows, 20)) < 0.3).astype(float)
    plan = {"seeds": list(range(20)), "goal": "maximize", "task": {},
            "arms": [{"name": "control"}, {"name": "lr=0.1"}]}
    opts = VerdictOptions(sequential="group", looks=LOOKS, pairing="unpaired")
    seen = Counter()
    for i in range(rows):
        st = sequential_state(plan, _data(t[i], c[i]), opts)["lr=0.1"]
        n = st["n"]
        comp = compare(t[i, :n], c[i, :n], p_threshold=st["threshold"], pi_interval=False)
        assert comp.binary is not None  # compare() took the 0/1 path
        # the look stops exactly where compare() on the same seeds at that boundary is firm (or equivalent)
        assert st["stopped"] == ((comp.verdict in ("better", "worse") and bool(comp.firm))
                                 or comp.verdict == "equivalent"), (i, n, comp.verdict, comp.firm)
        for k in st["passed"]:  # a look passed over: compare() says better/worse there, indicative
            ce = compare(t[i, :LOOKS[k]], c[i, :LOOKS[k]], pi_interval=False,
                         p_threshold=sequential_state(plan, _data(t[i, :LOOKS[k]], c[i, :LOOKS[k]]), opts)[
                             "lr=0.1"]["threshold"])
            assert ce.verdict in ("better", "worse") and ce.firm is False
        if st["stopped"] and n < 20:
            old = decide_batch(t[i, :n], c[i, :n], p_threshold=st["threshold"])
            seen["stopped early, decide_batch not firm"] += not bool(old.firm[0])
        seen["stopped" if st["stopped"] else "ran on"] += 1
    # the rule changed something: arms stopped before 20 seeds on compare()'s firm answer where decide_batch's flag
    # (firm only from 20 seeds) would have run them on
    assert seen["stopped early, decide_batch not firm"] >= 5 and seen["ran on"] >= 5, seen
