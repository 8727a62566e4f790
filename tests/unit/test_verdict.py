"""The verdict writer on synthetic sweep dirs: verdict.json / verdict.md content, options, sequential looks."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from ablate.cli.commands import dispatch
from ablate.errors import ConfigError
from ablate.judge.verdict import sequential_rounds, write_verdict
from ablate.record.sweepdir import SweepDir
from ablate.stats import boundaries
from ablate.trials.config import load_plan
from tests.helpers import make_sweep, wait_for_plots

C = [0.712, 0.695, 0.731, 0.704, 0.719]
T = [0.728, 0.741, 0.716, 0.739, 0.733]
T2 = [0.709, 0.722, 0.700, 0.731, 0.713]


def _trial_hashes(root: Path) -> dict[str, str]:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted((root / "trials").rglob("*.json"))}


def test_verdict_json_and_md(tmp_path: Path) -> None:
    root = make_sweep(tmp_path / "sw", {"control": C, "lr=0.1": T, "lr=0.2": T2}, options={"pairing": "paired"})
    v = write_verdict(SweepDir.open(root))
    on_disk = json.loads((root / "verdict.json").read_text())
    assert "NaN" not in (root / "verdict.json").read_text()
    assert on_disk["metric"] == "val_acc" and on_disk["goal"] == "maximize" and on_disk["alpha"] == 0.05
    assert [c["arm"] for c in on_disk["comparisons"]] == ["lr=0.1", "lr=0.2"]
    c1 = on_disk["comparisons"][0]
    # every arm ran seeds 0-4 and pairing=paired is declared: paired by seed, Holm over two treatments
    ref = stats.ttest_rel(T, C)
    assert c1["paired"] and c1["test"] == "paired t"
    assert c1["pvalue"] == pytest.approx(ref.pvalue, rel=1e-9)
    p2 = stats.ttest_rel(T2, C).pvalue
    holm = sorted([ref.pvalue, p2])
    assert c1["pvalue_adjusted"] == pytest.approx(min(1, 2 * holm[0]) if ref.pvalue < p2 else max(2 * holm[0], holm[1]))
    assert c1["multiplicity"] == "holm"
    assert c1["ci"] == pytest.approx(list(ref.confidence_interval(0.975)), rel=1e-9)
    for key in ("label", "verdict", "reason", "diff", "diff_pct", "effect_size", "prob_improvement", "robust_pvalue",
                "flags", "seed_advice", "failures", "pairing"):
        assert key in c1
    assert {"invalid", "dirty", "pins", "confounds", "config_drift", "arms", "versions"} <= set(on_disk)
    assert on_disk["invalid"] is False and v["confounds"]["complete"] is True
    assert on_disk["arms"][0]["values"] == {str(i): x for i, x in enumerate(C)}
    md = (root / "verdict.md").read_text()
    assert md.startswith("# Ablation of `task.optim.lr`: val_acc, higher is better")
    for section in ("## Bottom line", "## For the paper", "## Seed recommendation", "## Setup", "## Arms",
                    "## Comparisons", "## Flags", "## Failures", "## Provenance", "## Confounds",
                    "## Raw values by seed", "## Terms"):
        assert section in md
    assert md.index("## Bottom line") < md.index("## For the paper") < md.index("## Seed recommendation") < md.index(
        "## Arms") < md.index("## Comparisons") < md.index("## Flags") < md.index("## Raw values by seed") < md.index(
        "## Terms")
    assert "- **lr=0.1** (task.optim.lr 0.05 → 0.1) changed val_acc by " in md
    assert f"**{c1['verdict']}**" in md.split("- **lr=0.1**", 1)[1].splitlines()[0]
    assert "None found (15 trial manifests compared)." in md
    assert "| multiplicity | Holm (family-wise) |" in md
    assert "scipy " in md and "numpy " in md and "statsmodels" not in on_disk["versions"]  # the numbers' libraries
    assert not any(w in md.lower().split() for w in ("nan", "inf"))
    # plots
    assert (root / "verdict_values.png").read_bytes()[:4] == b"\x89PNG"
    assert (root / "verdict_paired.png").read_bytes()[:4] == b"\x89PNG"
    assert "![per-seed values per arm (ordered by the variable's value), with mean and 95% CI](verdict_values.png)" \
        in md


def test_failures_missing_manifests_and_invalid(tmp_path: Path) -> None:
    root = make_sweep(tmp_path / "sw", {"control": C, "lr=null": [0.7, None, None, None, 0.71]}, manifests=False)
    v = write_verdict(SweepDir.open(root))
    assert v["invalid"] is True and "more than half" in v["invalid_reasons"][0]
    c = v["comparisons"][0]
    assert c["verdict"] == "insufficient data" and c["value"] is None
    assert c["failed_treatment"] == 3
    assert c["failures"]["pvalue"] == pytest.approx(stats.fisher_exact([[3, 2], [0, 5]]).pvalue)
    md = (root / "verdict.md").read_text()
    assert "> **INVALID ABLATION**: 3 of 5 trials failed in arm lr=null (more than half)." in md
    assert md.count("more than half") == 1  # said once, at the top
    assert "Not checked on every trial: 7 completed trial(s) have no manifest" in md
    assert "None found" not in md
    assert "| lr=null | null |" in md
    assert "- lr=null: 3 of 5 finished trials failed (failed: 3)" in md
    assert "| 1 | 0.69500 | failed |" in md


def test_confounded_ablation_is_invalid(tmp_path: Path) -> None:
    root = make_sweep(tmp_path / "sw", {"control": C, "lr=0.1": T})
    m = root / "trials" / "lr=0.1" / "seed=0" / "manifest.json"
    rec = json.loads(m.read_text())
    rec["code"]["commit"] = "1" * 40
    m.write_text(json.dumps(rec))
    v = write_verdict(SweepDir.open(root))
    assert v["invalid"] and v["confounds"]["invalid"]
    md = (root / "verdict.md").read_text()
    assert "INVALID ABLATION**: confounded" in md and "**invalid**: code `commit`" in md


def test_minimize_and_pending(tmp_path: Path) -> None:
    root = make_sweep(tmp_path / "sw", {"control": T, "lr=0.1": [*C[:4], "pending"]}, metric="val_loss",
                      goal="minimize", options={"pairing": "paired"})
    v = write_verdict(SweepDir.open(root))
    c = v["comparisons"][0]
    assert c["diff"] > 0 and c["diff_raw"] < 0  # lower loss = better
    assert c["pairing"]["unmatched"] == 1 and c["n_treatment"] == 4
    md = (root / "verdict.md").read_text()
    assert "val_loss, lower is better" in md and "1 trial(s) not finished" in md and "| 4 | 0.73300 | pending |" in md
    assert f"Next: `ablate resume {root.absolute()}` (1 planned trial(s) have not finished)." in md  # no project


def test_cli_overrides_recompute_without_touching_trials(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    root = make_sweep(tmp_path / "sw", {"control": C, "lr=0.1": T, "lr=0.2": T2})
    before = _trial_hashes(root)
    assert dispatch("verdict", [str(root), "--alpha", "0.01", "--margin", "2%", "--multiplicity", "bh",
                                "--pairing", "unpaired"]) == 0
    assert capsys.readouterr().out.strip() == str(root / "verdict.md")
    assert _trial_hashes(root) == before
    v = json.loads((root / "verdict.json").read_text())
    assert v["alpha"] == 0.01 and v["options"]["margin"] == "2%" and v["multiplicity"] == "bh"
    c = v["comparisons"][0]
    assert not c["paired"] and c["test"] == "Welch t"
    assert c["pvalue"] == pytest.approx(0.0386886, rel=1e-6)
    assert c["pvalue_adjusted"] == pytest.approx(stats.false_discovery_control([0.0386886, 0.740620])[0], rel=1e-5)
    assert c["margin"] == pytest.approx(0.02 * 0.7122)
    assert c["ci_level"] == pytest.approx(0.995)
    assert "Benjamini-Hochberg" in (root / "verdict.md").read_text()
    wait_for_plots(root)  # drawn after the text by a background process
    assert (root / "verdict_values.png").exists() and not (root / "verdict_paired.png").exists()
    assert (root / "results.csv").exists()


def test_bad_override_is_a_config_error(tmp_path: Path) -> None:
    root = make_sweep(tmp_path / "sw", {"control": C, "lr=0.1": T})
    with pytest.raises(ConfigError, match="`alpha`"):
        write_verdict(SweepDir.open(root), {"alpha": 0.9})
    with pytest.raises(ConfigError, match="`margin`"):
        write_verdict(SweepDir.open(root), {"margin": "much"})


def _run_round(root: Path, truth: dict[str, np.ndarray], seeds: list[int], arms: list[str]) -> None:
    for a in arms:
        for s in seeds:
            d = root / "trials" / a / f"seed={s}"
            if (d / "result.json").exists():
                continue
            d.mkdir(parents=True, exist_ok=True)
            (d / "result.json").write_text(json.dumps({"arm": a, "seed": s, "status": "ok",
                                                       "metrics": {"val_acc": float(truth[a][s])}}))


def test_sequential_rounds_stop_a_clear_winner(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    truth = {"control": rng.normal(0.70, 0.01, 20), "lr=0.1": rng.normal(0.75, 0.01, 20),
             "lr=0.2": rng.normal(0.70, 0.01, 20)}
    pending = {a: ["pending"] * 20 for a in truth}
    root = make_sweep(tmp_path / "sw", pending, options={"sequential": "group", "looks": [5, 10, 15, 20]},
                      manifests=False)
    sd = SweepDir.open(root)
    plan = load_plan(sd)
    rounds = []
    for seeds, arms in sequential_rounds(sd, plan):
        rounds.append((len(seeds), list(arms or [])))
        _run_round(root, truth, seeds, list(arms or []))
    # the winner (Δ = 5 SD) crosses at look 1 or 2; the null treatment and the control run to N = 20
    assert rounds[0] == (5, ["control", "lr=0.1", "lr=0.2"])
    assert rounds[-1] == (20, ["control", "lr=0.2"])
    stop = next(i for i, (_, arms) in enumerate(rounds) if "lr=0.1" not in arms)
    assert stop in (1, 2)
    assert not (root / "trials" / "lr=0.1" / "seed=19").exists()
    v = write_verdict(sd)
    win, null = v["comparisons"]
    assert win["verdict"] == "better" and win["sequential"]["crossed"] and win["sequential"]["stopped_early"]
    assert win["sequential"]["look"] == stop and win["sequential"]["n"] == 5 * stop
    b = boundaries([x / 20 for x in (5, 10, 15)][:stop - 1] + [x / 20 for x in (5, 10, 15)][stop - 1:stop],
                   alpha=0.025, stop_factor=(10.0, 10.0, 10.0)[:stop])  # below 20 seeds only a firm verdict stops
    assert win["sequential"]["boundary_p"] == pytest.approx(b.nominal_p[-1], rel=1e-6)
    assert win["multiplicity"] == "group sequential" and "< boundary" in win["reason"]
    assert null["sequential"]["look"] == 4 and null["sequential"]["n"] == 20
    assert null["sequential"]["boundary_p"] is not None and not null["sequential"]["stopped_early"]
    md = (root / "verdict.md").read_text()
    assert "group: looks at N = 5, 10, 15, 20 seeds per arm" in md
    assert f"lr=0.1: look {stop} (N = {5 * stop})" in md
    passed = win["sequential"]["passed_looks"]  # looks it crossed with an indicative verdict, and ran on
    assert all(k < stop for k in passed) and null["sequential"]["passed_looks"] == []
    assert ("ran on after an indicative crossing at look 1" in md) == (passed == [1])
    assert win["sequential"]["stop_reason"] == "efficacy" and null["sequential"]["stop_reason"] in ("budget",
                                                                                                    "efficacy")
    assert f"lr=0.1: look {stop} (N = {5 * stop}), boundary p = " in md and "stopped for efficacy" in md
    if null["verdict"] == "inconclusive":
        assert null["sequential"]["stop_reason"] == "budget" and "stopped for budget" in md
    if null["verdict"] == "inconclusive":
        assert "reached the last look (N = 20) without crossing the boundary" in md


def test_sequential_replay_ignores_unfinished_looks(tmp_path: Path) -> None:
    vals = {"control": [*C, *["pending"] * 15], "lr=0.1": [*T, *["pending"] * 15]}
    root = make_sweep(tmp_path / "sw", vals, options={"sequential": "group"})
    v = write_verdict(SweepDir.open(root))
    seq = v["comparisons"][0]["sequential"]
    assert seq["look"] == 1 and seq["n"] == 5
    assert seq["boundary_p"] == pytest.approx(boundaries([0.25], alpha=0.05).nominal_p[0], rel=1e-9)
    assert not math.isnan(v["comparisons"][0]["pvalue"])
    assert v["comparisons"][0]["verdict"] == "inconclusive"
    assert "continue to look 2 (N = 10 seeds per arm)" in (root / "verdict.md").read_text()
    assert seq["stop_reason"] is None and seq["passed_looks"] == []


def test_sequential_last_look_indicative_is_named(tmp_path: Path) -> None:
    """Looks 3, 5 on T vs C: Welch p = 0.291 at look 1 (no crossing) and 0.0387 at look 2 (scipy), under the last
    look's firm-aware boundary 0.0499 (boundaries([0.6, 1], stop_factor=(10, 1))) but not 10 times under it: a better
    verdict that is indicative, reached at the last look (stop reason `budget`), never called "without crossing"."""
    root = make_sweep(tmp_path / "sw", {"control": C, "lr=0.1": T}, options={"sequential": "group", "looks": [3, 5]})
    v = write_verdict(SweepDir.open(root))
    (c,) = v["comparisons"]
    assert c["verdict"] == "better" and c["firm"] is False
    assert c["sequential"]["boundary_p"] == pytest.approx(boundaries([0.6, 1.0], stop_factor=(10, 1)).nominal_p[1])
    assert c["sequential"]["stop_reason"] == "budget" and c["sequential"]["passed_looks"] == []
    assert c["seed_advice_sequential"] == "reached the last look (N = 5): its better verdict there is indicative, " \
                                          "not firm"
    assert "stopped for budget" in (root / "verdict.md").read_text()
