"""An indicative better/worse says "(indicative)" wherever a verdict word reaches a person or code that prints it
(issue: the Python API and the plots dropped it): the `Verdict` repr and `.words`, the forest plot's legend, the
LaTeX table, the trackers' verdict words, the transfer report. verdict.json keeps `verdict` = "better" plus
`firm` = false. Fixture: two treatments under Holm, 8 seeds per arm (below 8 no verdict on a continuous metric is
firm), lr=0.2 firm, lr=0.1 better at Holm's second step but indicative (p_adj x 10 >= 0.05, from scipy + statsmodels
below)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests

from ablate.api import Verdict
from ablate.judge.forest import forest_figure
from ablate.judge.table import latex
from ablate.judge.transfer import ScaleEffect, TransferResult, finish
from ablate.judge.verdict import write_verdict
from ablate.record.sweepdir import SweepDir
from ablate.stats import compare
from ablate.stats.core import verdict_label
from ablate.trackers.base import read_ablation
from tests.helpers import make_sweep

C = [0.712, 0.695, 0.731, 0.704, 0.719]
T = [0.728, 0.741, 0.716, 0.739, 0.733]  # Welch vs C: p = 0.0386886 (spec C1)
STRONG = [v + 0.05 for v in T]
# 8 seeds per arm: C and T with 3 more seeds each (Welch p = 0.0382581, scipy)
C8 = [*C, 0.710, 0.724, 0.700]
T8 = [*T, 0.713, 0.709, 0.727]
STRONG8 = [v + 0.05 for v in T8]


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    root = make_sweep(tmp_path_factory.mktemp("labels") / "sw", {"control": C8, "lr=0.2": STRONG8, "lr=0.1": T8},
                      options={"pairing": "unpaired"})
    write_verdict(SweepDir.open(root), {"plots": False})
    return root, json.loads((root / "verdict.json").read_text())


def test_fixture_is_one_firm_one_indicative(sweep: tuple[Path, dict]) -> None:
    """The real numbers: Holm's p_adj of lr=0.1 is below 0.05 but x 10 is not; lr=0.2's x 10 still is."""
    _, v = sweep
    ps = [stats.ttest_ind(x, C8, equal_var=False).pvalue for x in (STRONG8, T8)]
    p_adj = multipletests(ps, alpha=0.05, method="holm")[1]
    assert p_adj[0] * 10 < 0.05 and p_adj[1] < 0.05 <= p_adj[1] * 10
    got = {c["arm"]: (c["verdict"], c["firm"]) for c in v["comparisons"]}
    assert got == {"lr=0.2": ("better", True), "lr=0.1": ("better", False)}  # machine fields unchanged


def test_verdict_repr_words_and_firm(sweep: tuple[Path, dict]) -> None:
    root, _ = sweep
    v = Verdict.open(root)
    assert v.words == {"lr=0.2": "better", "lr=0.1": "better (indicative)"}
    assert v.firm == {"lr=0.2": True, "lr=0.1": False}
    lines = repr(v).splitlines()
    assert repr(v) == str(v) and lines[0] == f"Verdict(val_acc, higher is better; {root}"
    assert lines[1].startswith("  lr=0.2 (task.optim.lr 0.05 → 0.2) changed val_acc by +") and \
        lines[1].endswith(": better, firm.")
    assert lines[2].endswith(": better (indicative), not yet firm (a lead to confirm).")
    assert lines[3].startswith(f"  Next: ablate extend {root} seeds=") and lines[3].endswith(").)")  # issue 39
    assert [f"  {x}" for x in v.bottom_line()] == [*lines[1:-1], lines[-1].removesuffix(")")] and lines[1:-1] == [
        f"  {t['sentence']}" for t in v["bottom_line"]["treatments"]]
    assert [c["verdict"] for c in v["comparisons"]] == ["better", "better"]  # the plain words stay in the dict


def test_forest_legend_says_indicative(sweep: tuple[Path, dict]) -> None:
    _, v = sweep
    fig = forest_figure(v)
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert sorted(labels) == ["better", "better (indicative)"]


def test_latex_table_says_indicative(sweep: tuple[Path, dict]) -> None:
    root, v = sweep
    rows = {line.split(" & ")[0]: line for line in latex(v["table"], v).splitlines() if " & " in line}
    assert rows["lr=0.1"].rstrip(" \\").endswith(r"$\uparrow$ (indicative)")
    assert rows[r"\textbf{lr=0.2}"].rstrip(" \\").endswith(r"\textbf{$\uparrow$}")
    assert r"$\uparrow$ (indicative)" in (root / "ablation_table.tex").read_text()


def test_tracker_words_say_indicative(sweep: tuple[Path, dict]) -> None:
    root, _ = sweep
    ab = read_ablation(root)
    assert ab.verdict_words == {"lr=0.2": "better", "lr=0.1": "better (indicative)"}


def test_transfer_message_says_indicative() -> None:
    effects = [ScaleEffect(scale=s, delta=0.02, ci=(0.001, 0.04), ci_level=0.95, verdict="better", seed_advice=None,
                           firm=f) for s, f in ((1, True), (2, False))]
    r = finish([TransferResult(arm="lr=0.1", effects=effects, test="t", pvalue=0.5)], 0.05, "width")[0]
    assert "width=1: Δ = +0.02 (better); width=2: Δ = +0.02 (better (indicative))" in r.message


def test_verdict_label_follows_compare() -> None:
    c = compare(T, C)  # p = 0.0387 at 5 seeds: better, indicative
    assert (c.verdict, c.firm) == ("better", False)
    assert verdict_label(c.verdict, c.firm) == "better (indicative)"
    weak = compare(STRONG, C)  # p x 10 < 0.05, but 5 seeds per arm: below 8 no continuous verdict is firm
    assert (weak.verdict, weak.firm) == ("better", False)
    strong = compare(STRONG8, C8)
    assert (strong.verdict, strong.firm) == ("better", True) and verdict_label(strong.verdict, strong.firm) == "better"
    assert verdict_label("inconclusive", None) == "inconclusive"


def test_the_ci_beside_an_indicative_verdict_is_labelled(sweep: tuple[Path, dict]) -> None:
    """Issue 37, item 6: the CI printed beside an indicative verdict says so, in verdict.md (bottom line, the line for
    the paper, the Comparisons table, Terms) and verdict.json (``ci_indicative``, the reason); a firm one does not.
    The interval itself is scipy's Welch interval at Holm's step level (95% for lr=0.1 at the second of two steps)."""
    root, v = sweep
    md = (root / "verdict.md").read_text()
    c = {x["arm"]: x for x in v["comparisons"]}
    assert (c["lr=0.1"]["ci_indicative"], c["lr=0.2"]["ci_indicative"]) == (True, False)
    ci = stats.ttest_ind(T8, C8, equal_var=False).confidence_interval(0.95)
    lo, hi = f"{ci.low:+.4f}", f"{ci.high:+.4f}"
    assert c["lr=0.1"]["ci"] == [pytest.approx(ci.low), pytest.approx(ci.high)]
    assert sum(T8) / 8 - sum(C8) / 8 == pytest.approx(0.0139, abs=5e-5)
    assert f"changed val_acc by +0.0139 (indicative 95% CI {lo} to {hi}): **better (indicative)**" in md
    assert f"Δ val_acc = +0.0139 (indicative 95% CI {lo} to {hi}; higher is better)" in md
    assert f"| [{lo}, {hi}] (95%, indicative) |" in md
    assert f"indicative 95% CI [{ci.low:.4f}, {ci.high:.4f}]" in c["lr=0.1"]["reason"]
    strong = next(t for t in v["bottom_line"]["treatments"] if t["arm"] == "lr=0.2")
    assert "indicative" not in strong["sentence"] and "% CI" in strong["sentence"]
    assert "indicative" not in c["lr=0.2"]["reason"]
    assert "- **indicative CI**: a CI of Δ beside an indicative verdict" in md  # defined in Terms


def test_no_indicative_ci_term_without_one() -> None:
    """Terms defines the indicative CI only on a page that prints one."""
    from ablate.judge.terms import used_terms

    assert "indicative CI" not in [t.name for t in used_terms("changed x by +1 (95% CI +0.1 to +2): better, firm.")]
    assert "indicative CI" in [t.name for t in used_terms("(indicative 95% CI +0.1 to +2)")]
    assert "indicative CI" in [t.name for t in used_terms("| [+0.1, +2] (97.5%, indicative) |")]
