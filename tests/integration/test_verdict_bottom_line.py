"""verdict.md read as its users read it (issue 41), on real ablations of the example project: a better, a worse, an
inconclusive and an indicative treatment (one ablation through ``ablate.run``), a suite on a metric to minimize, an
invalid ablation (a script that ignores its seed), a transfer check, and the README's own example (torch).

Each holds: a bottom line of at most 30 words per treatment plus its Next line; no number printed twice with
different signs; each Next command, run as printed (a dry run, in-process), plans the same arms and overrides plus the
new seeds; each fact (invalid reason, indicative reason, post-hoc notice) said once; Terms define every symbol the page
uses and nothing it does not; the lines for the paper carry scipy's numbers; and a reader given verdict.md alone
answers what changed, whether it is better, how sure, and what next, as verdict.json says.

The pure-Python task (``toy``) draws val_acc = 0.9 + an effect per setting + a shared seed effect (python's generator,
which ablate seeds) + the arm's own noise, so the verdicts are fixed by its numbers; only the README case runs torch.
"""

from __future__ import annotations

import json
import math
import re
import shlex
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests

from tests.helpers import ablate_cli, ablate_in, commit_all

pytestmark = pytest.mark.slow

TOY = '''"""A pure-Python task: val_acc = 0.9 + an effect per setting + a shared and an own noise per seed."""

import random

LR = {0.05: 0.0, 0.2: 0.03, 0.01: -0.03, 0.06: 0.002, 0.1: 0.012}
WD = {0.0: 0.0, 0.1: -0.02}


def train(cfg):
    t = cfg.task
    shared = random.gauss(0.0, 0.004)  # python's generator, which ablate seeds from the trial seed: every arm alike
    own = random.Random(f"{cfg.seed}/{t.lr}/{t.wd}/{t.size}").gauss(0.0, t.noise)  # this arm's own noise
    acc = 0.9 + (LR[t.lr] + WD[t.wd]) * t.size + shared + own
    return {"val_acc": acc, "val_loss": 1.0 - acc}
'''
SCRIPT = '''"""A script that ignores the seed it could be given: every seed prints the same val_acc."""

import argparse

p = argparse.ArgumentParser()
p.add_argument("--lr", type=float, default=0.05)
print(f"val_acc {0.9 + (0.03 if p.parse_args().lr > 0.1 else 0.0):.6f}")
'''
FILES = {
    "toy.py": TOY,
    "toy_script.py": SCRIPT,
    "conf/task/toy.yaml": "fn: toy:train\nmetric: val_acc\ngoal: maximize\nlr: 0.05\nwd: 0.0\nsize: 1\nnoise: 0.006\n",
    "conf/task/toy_script.yaml": "command: python toy_script.py\nargs: --key value\nparams:\n  lr: 0.05\n"
                                 "seed_key: null\nmetric_pattern: 'val_acc (?P<val_acc>[-+0-9.eE]+)'\nmetric: val_acc\n"
                                 "goal: maximize\n",
    "conf/variable/toy.yaml": "key: task.lr\nvalues: [0.2, 0.01, 0.06, 0.1]\n",
    "conf/variable/toy_wd.yaml": "key: task.wd\nvalues: [0.1]\n",
    "conf/variable/toy_script_lr.yaml": "key: task.params.lr\nvalues: [0.2]\n",
}
#: The cases: name -> the command line (the mixed case runs through ablate.run with the same overrides).
RUNS = {
    "suite": ["-m", "task=toy", "variable=toy,toy_wd", "seeds=5", "task.metric=val_loss", "task.goal=minimize",
              "launcher=inline"],
    "invalid": ["-m", "task=toy_script", "variable=toy_script_lr", "seeds=3", "launcher=inline"],
    "transfer": ["-m", "task=toy", "variable=toy_wd", "scale.key=task.size", "scale.values=[1,2]", "seeds=4",
                 "launcher=inline"],
    "readme": ["-m", "variable=lr", "seeds=3", "task.epochs=2", "launcher=inline"],
}
WORDS = 30


@pytest.fixture(scope="module")
def project(project_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The example project plus the toy task, a script task and their variables, committed; the working dir."""
    dest = tmp_path_factory.mktemp("bottom") / "proj"
    shutil.copytree(project_template, dest, symlinks=True)
    for rel, text in FILES.items():
        (dest / rel).write_text(text)
    commit_all(dest, "toy tasks")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(dest)
        mp.syspath_prepend(str(dest))
        mp.setenv("DVC_NO_ANALYTICS", "1")
        yield dest


@pytest.fixture(scope="module")
def sweeps(project: Path) -> dict[str, Path]:
    """Every case's sweep dir (the transfer check's parent dir), each ablation run once."""
    import ablate

    # 8 seeds: the fewest at which a continuous metric's better/worse can be firm (stop 48)
    mixed = ablate.run(project / "conf", variable="toy", seeds=8, launcher="inline", overrides=["task=toy"])
    out = {"mixed": Path(mixed.sweep_dir)}
    for name, args in RUNS.items():
        before = set(project.glob("outputs/ablate/*/*"))
        # in this process (ablate's CLI entry), but the invalid case: the console script, this file's proof of it
        res = (ablate_cli if name == "invalid" else ablate_in)(project, *args)
        assert res.returncode == (1 if name == "invalid" else 0), res.stderr[-3000:]
        (out[name],) = set(project.glob("outputs/ablate/*/*")) - before
    return out


def _pages(sweeps: dict[str, Path]) -> dict[str, Path]:
    """Every verdict.md (and transfer.md) of the cases, by a readable name."""
    pages = {k: sd / "verdict.md" for k, sd in sweeps.items() if k != "transfer"}
    pages |= {f"transfer/{p.parent.name}": p for p in sorted(sweeps["transfer"].glob("*/verdict.md"))}
    return pages | {"transfer.md": sweeps["transfer"] / "transfer.md"}


def _section(md: str, title: str) -> str:
    start = md.index(f"## {title}\n")
    end = md.find("\n## ", start + 3)
    return md[start:end if end > 0 else len(md)]


def _verdict(page: Path) -> dict[str, Any]:
    return json.loads(page.with_name("verdict.json").read_text())


def test_the_cases_are_what_they_claim(sweeps: dict[str, Path]) -> None:
    """The mixed ablation has a firm better, a firm worse, an inconclusive and an indicative better; the suite
    minimizes; the script's ablation is invalid; the transfer check has a verdict per scale."""
    mixed = {c["arm"]: (c["verdict"], c["firm"]) for c in _verdict(sweeps["mixed"] / "verdict.md")["comparisons"]}
    assert mixed == {"lr=0.2": ("better", True), "lr=0.01": ("worse", True), "lr=0.06": ("inconclusive", None),
                     "lr=0.1": ("better", False)}
    suite = _verdict(sweeps["suite"] / "verdict.md")
    assert suite["goal"] == "minimize" and suite["suite"] and len(suite["comparisons"]) == 5
    invalid = _verdict(sweeps["invalid"] / "verdict.md")
    assert invalid["invalid"] and invalid["seed_ignored"]
    assert json.loads((sweeps["transfer"] / "transfer.json").read_text())["results"][0]["arm"] == "wd=0.1"


def test_bottom_line_fits_a_screen(sweeps: dict[str, Path]) -> None:
    """Per treatment one sentence of at most 30 words, then one Next line, and nothing else."""
    for name, page in _pages(sweeps).items():
        bottom = _section(page.read_text(), "Bottom line").splitlines()[2:]
        items, rest = [x for x in bottom if x.startswith("- **")], [x for x in bottom if x and not x.startswith("- ")]
        n = len(json.loads(page.with_name("transfer.json").read_text())["results"]) if name == "transfer.md" else \
            len(_verdict(page)["comparisons"])
        assert len(items) == n, name
        for line in items:
            words = line.removeprefix("- ").replace("**", "").split()
            assert len(words) <= WORDS, (name, len(words), line)
            assert line.endswith("."), line
        assert len(rest) == 1 and rest[0].startswith("Next: "), (name, rest)


_SIGNED = re.compile(r"(?<![\w.\]])([+\-−])(\d+(?:\.\d+)?)(?![\d.])")


def test_no_number_is_printed_with_two_signs(sweeps: dict[str, Path]) -> None:
    """One sign convention: a magnitude printed with a sign anywhere on a page is printed with that sign
    everywhere; Δ is treatment − control in the metric's own sign, its CI and the effect size too."""
    for name, page in _pages(sweeps).items():
        md = page.read_text()
        signs: dict[float, set[str]] = {}
        for sign, digits in _SIGNED.findall(md):
            if float(digits) != 0:
                signs.setdefault(float(digits), set()).add("-" if sign in "-−" else "+")
        assert not [x for x, s in signs.items() if len(s) > 1], (name, {x: s for x, s in signs.items() if len(s) > 1})
        if name == "transfer.md":
            continue
        v = _verdict(page)
        flip = -1 if v["goal"] == "minimize" else 1
        for c in v["comparisons"]:
            if c["verdict"] == "insufficient data":
                continue
            raw = flip * c["diff"]
            assert raw == pytest.approx(c["diff_raw"], rel=1e-12)
            line = next(x for x in md.splitlines() if x.startswith(f"- **{c['arm']}**"))
            assert f" by {'+' if raw > 0 else '-'}" in line, line  # the bottom line: the metric's own sign


def _plan_of(args: list[str], project: Path) -> Any:
    """The plan ``ablate -m <args>`` makes, as the CLI makes it (compose, then plan each variable)."""
    from ablate.orchestrate.pipeline import prepare
    from ablate.orchestrate.suite import prepare_suite
    from ablate.plan.compose import compose
    from ablate.plan.suite import split_suite
    from ablate.trials.tasks.interface import split_cli, with_cli_overrides

    ours, app = split_cli(args)
    names, rest = split_suite(ours)
    conf = str(project / "conf")
    if names:
        comps = [with_cli_overrides(compose([*rest, f"variable={n}"], config_path=conf), app) for n in names]
        return prepare_suite(comps, names, cwd=str(project))[0]
    c = with_cli_overrides(compose(ours, config_path=conf), app)
    return prepare(c.cfg, variable_name=c.variable_name, available_variables=c.variables, compose=c.compose,
                   choices=c.choices, cwd=str(project))[0]


def _next_command(md: str) -> list[str] | None:
    line = next(x for x in _section(md, "Bottom line").splitlines() if x.startswith("Next: "))
    m = re.search(r"`(ablate [^`]+)`", line)
    return shlex.split(m.group(1)) if m else None


def _flat(cfg: dict[str, Any], skip: tuple[str, ...] = ()) -> dict[str, Any]:
    from ablate.plan.arms import flatten

    return {k: v for k, v in flatten(cfg).items() if k not in ("seeds", "dry_run", *skip)}


def test_next_command_runs_as_printed_and_plans_the_same_arms(sweeps: dict[str, Path], project: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """Each Next command, run as printed plus ``dry_run=true`` (in-process), plans the ablation's arms with the
    same config (every override kept) and the new seed count; the transfer's reruns every scale."""
    import yaml

    from ablate.cli.main import main
    from ablate.orchestrate.transfer import parse_scale
    from ablate.plan.compose import compose

    ran = 0
    for name, page in _pages(sweeps).items():
        cmd = _next_command(page.read_text())
        if name == "transfer.md":  # a transfer check has no dry run: its composition and scales are compared
            assert cmd is not None and cmd[:2] == ["ablate", "-m"]
            rec = yaml.safe_load((page.parent / "transfer.yaml").read_text())
            new, old = compose(cmd[2:], config_path="conf"), compose(rec["command"]["overrides"], config_path="conf")
            assert _flat(new.cfg) == _flat(old.cfg) and parse_scale(new.cfg) == parse_scale(old.cfg)
            need = max(e["seeds_next"] or 0 for r in json.loads((page.parent / "transfer.json").read_text())[
                "results"] for e in r["effects"])
            assert new.cfg["seeds"] == need and f"seeds={need}" in cmd
            continue
        v = _verdict(page)
        if cmd is None:
            assert not any(c.get("firm") is False or c["verdict"] == "inconclusive" for c in v["comparisons"]), name
            continue
        seeds = int(next(a for a in cmd if a.startswith("seeds=")).split("=")[1])
        plan = yaml.safe_load((page.parent / "ablation.yaml").read_text())
        if cmd[:2] == ["ablate", "extend"]:  # this sweep dir, more seeds: every check before a trial passes
            from ablate.orchestrate.extend import check_extension, parse_args
            from ablate.record.sweepdir import SweepDir

            where, k = parse_args(cmd[2:])
            assert (project / where).resolve() == page.parent.resolve() and k == seeds > len(plan["seeds"]), cmd
            assert check_extension(SweepDir.open(project / where), plan, k) is None, name
            ran += 1
            continue
        assert cmd[:2] == ["ablate", "-m"], cmd
        new = _plan_of(cmd[2:], project)
        assert [a.name for a in new.arms] == [a["name"] for a in plan["arms"]], name
        for arm, old in zip(new.arms, plan["arms"], strict=True):  # a scale's rerun is a plain ablation at that scale
            skip = ("scale.key", "scale.values") if name.startswith("transfer/") else ()
            assert _flat(arm.config, skip) == _flat(old["config"], skip), (name, arm.name)
        assert len(new.seeds) == seeds and new.seeds[0] == plan["seeds"][0]
        capsys.readouterr()
        assert main([*cmd[1:], "dry_run=true"]) == 0, name
        out = capsys.readouterr().out
        assert f"seeds ({seeds} per arm)" in out and "dry run: nothing launched" in out, out
        assert f"arms ({len(plan['arms'])}): " + ", ".join(a["name"] for a in plan["arms"]) in out
        ran += 1
    assert ran >= 5  # mixed, suite, invalid, readme (unless firm) and each scale's


def test_next_seeds_are_the_ones_seed_recommendation_names(sweeps: dict[str, Path]) -> None:
    """One seed number in the bottom line: the larger of the seeds that make an indicative verdict firm and those
    for 80% power, or an inconclusive one's advice; Seed recommendation names the other and how they differ."""
    md = (sweeps["mixed"] / "verdict.md").read_text()
    v = _verdict(sweeps["mixed"] / "verdict.md")
    c = {x["arm"]: x for x in v["comparisons"]}
    need = max(max(20, c["lr=0.1"]["seed_advice"]["n_needed"]), c["lr=0.06"]["seed_advice"]["n_needed"] or 0)
    cmd = _next_command(md)
    assert cmd is not None and cmd[:2] == ["ablate", "extend"] and cmd[3:] == [f"seeds={need}"], cmd
    line = next(x for x in _section(md, "Seed recommendation").splitlines() if x.startswith("- **lr=0.1**"))
    n = c["lr=0.1"]["seed_advice"]["n_needed"]
    assert line.endswith(f"The two numbers answer two questions: 20 seeds per arm is where ablate's rule calls this "
                         f"verdict firm, {n} seeds per arm give 80% power for the effect seen so far; the Next line "
                         f"runs the larger, {max(20, n)}.")


def test_each_fact_is_said_once(sweeps: dict[str, Path], tmp_path: Path) -> None:
    """The invalid-ablation reason, the indicative reason and the post-hoc notice each appear once."""
    from ablate.cli.commands import dispatch

    invalid = _verdict(sweeps["invalid"] / "verdict.md")
    md = (sweeps["invalid"] / "verdict.md").read_text()
    assert md.count(invalid["seed_ignored"]["message"]) == 1 and md.count("ignored its seed") == 1
    assert md.index("INVALID ABLATION") < md.index("## Bottom line")
    mixed = (sweeps["mixed"] / "verdict.md").read_text()
    assert mixed.count("no test of the mean holds α for every metric shape (skewed") == 1
    copy = tmp_path / "copy"
    shutil.copytree(sweeps["mixed"], copy)
    assert dispatch("verdict", [str(copy), "--alpha", "0.1", "--no-plots"]) == 0
    post = (copy / "verdict.md").read_text()
    assert post.count("> **Post hoc**") == 1 and post.count("read it as exploratory") == 1
    assert post.index("Post hoc") < post.index("## Bottom line")


#: Symbols a page may print, each with an independent pattern: a page that prints one defines it under Terms.
SYMBOLS = {"Δ": r"Δ", "CI": r"\bCI\b", "α": r"α", "p_adj": r"p_adj", "g": r"Hedges' g = ", "d_z": r"d_z = ",
           "P(T beats C)": r"P\(T beats C\)", "robust p": r"robust p", "IQM": r"\| IQM \|", "MDE": r"MDE at",
           "δ": r"δ", "ρ̂": r"ρ̂", "SD, SEM": r"\| SD \|"}


def test_terms_define_what_the_page_uses_and_nothing_else(sweeps: dict[str, Path]) -> None:
    from ablate.judge.terms import TERMS

    for name, page in _pages(sweeps).items():
        if name == "transfer.md":
            continue
        md = page.read_text()
        body, terms = md.split("## Terms\n", 1)
        defined = re.findall(r"^- \*\*(.+?)\*\*: ", terms, flags=re.M)
        for sym, pattern in SYMBOLS.items():
            if re.search(pattern, body):
                assert sym in defined, (name, sym)
        for term in TERMS:
            if term.name in defined:  # defined only where the page (or a definition it holds) uses it
                assert re.search(term.pattern, body) or re.search(term.pattern, terms.replace(
                    f"- **{term.name}**:", "")), (name, term.name)
            else:
                assert not re.search(term.pattern, body), (name, term.name)


def _p(p: float) -> str:
    return "< 0.0001" if p < 1e-4 else f"= {p:.2g}" if p < 0.001 else f"= {p:.3g}"


def test_for_the_paper_lines_carry_scipys_numbers(sweeps: dict[str, Path]) -> None:
    """The line to paste for each treatment of the mixed ablation: Δ and its CI from scipy's paired t at Holm's step
    level, the Holm-adjusted p from statsmodels, N and the seeds, and the word with firm or not."""
    md = (sweeps["mixed"] / "verdict.md").read_text()
    v = _verdict(sweeps["mixed"] / "verdict.md")
    vals = {a["arm"]: [a["values"][str(s)] for s in v["seeds"]] for a in v["arms"]}
    arms = ["lr=0.2", "lr=0.01", "lr=0.06", "lr=0.1"]
    ps = {arm: stats.ttest_rel(vals[arm], vals["control"]).pvalue for arm in arms}
    adj = dict(zip(arms, multipletests([ps[a] for a in arms], alpha=0.05, method="holm")[1], strict=True))
    order = sorted(arms, key=ps.get)
    rejected = next((i for i, a in enumerate(order) if adj[a] >= 0.05), len(order))  # Holm's stopping step
    scales = [s for x in vals.values() for s in (stats.tstd(x), stats.sem(x))]
    dec = -math.floor(math.log10(min(scales))) + 1
    words = {"lr=0.2": "better, firm", "lr=0.01": "worse, firm", "lr=0.06": "inconclusive",
             "lr=0.1": "better, not yet firm"}
    lines = _section(md, "For the paper").splitlines()
    for arm in arms:
        level = 1 - 0.05 / (4 - min(order.index(arm), rejected))
        ci = stats.ttest_rel(vals[arm], vals["control"]).confidence_interval(level)
        delta = sum(vals[arm]) / 8 - sum(vals["control"]) / 8
        pct = f"{100 * level:.2f}".rstrip("0").rstrip(".")
        value = arm.split("=")[1]
        ind = "indicative " if "not yet" in words[arm] else ""  # the CI beside an indicative verdict says so
        assert (f"- {arm} vs control (task.lr 0.05 → {value}): Δ val_acc = {delta:+.{dec}f} ({ind}{pct}% CI "
                f"{ci.low:+.{dec}f} to {ci.high:+.{dec}f}; higher is better), paired t-test (by seed), p_adj "
                f"{_p(adj[arm])} (Holm over 4 treatments), N = 8 pairs (seeds 0-7): {words[arm]}.") in lines, arm


def _read(md: str) -> dict[str, dict[str, Any]]:
    """What a reader takes from the bottom line alone: per treatment what changed, the sign of Δ, the word, and
    whether it is firm; and the one command to run next."""
    out = {}
    pat = re.compile(r"^- \*\*(?P<arm>[^*]+)\*\* \((?P<key>\S+) (?P<old>\S+) → (?P<new>[^)]+)\)(?: changed (?P<metric>"
                     r"\S+) by (?P<delta>[+-][\d.]+))?.*?: \*\*(?P<word>[^*]+)\*\*[,:] (?P<status>.+)$")
    for line in _section(md, "Bottom line").splitlines():
        m = pat.match(line)
        if m:
            out[m["arm"]] = {**m.groupdict(), "firm": m["status"].startswith("firm")}
    return out


def test_a_reader_of_verdict_md_alone_answers_the_four_questions(sweeps: dict[str, Path]) -> None:
    """What changed, is it better, how sure, what next: read from the bottom line only, checked against
    verdict.json (the numbers) and ablation.yaml (the arms)."""
    import yaml

    for name, page in _pages(sweeps).items():
        if name == "transfer.md":
            continue
        md, v = page.read_text(), _verdict(page)
        plan = yaml.safe_load((page.parent / "ablation.yaml").read_text())
        read = _read(md)
        assert set(read) == {c["arm"] for c in v["comparisons"]}, (name, read)
        better = "lower is better" if v["goal"] == "minimize" else "higher is better"
        assert better in md.splitlines()[0]
        for c in v["comparisons"]:
            r = read[c["arm"]]
            arm = next(a for a in plan["arms"] if a["name"] == c["arm"])
            (key, (old, new)), = arm["changes"].items()
            assert (r["key"], r["old"], r["new"]) == (key, str(old), str(new)), (name, r)  # what changed
            assert r["word"].split(" (")[0] == c["verdict"]  # is it better
            assert r["firm"] == (c.get("firm") is True) and ("(indicative)" in r["word"]) == (c.get("firm") is False)
            if r["delta"] is not None:  # by how much, which way
                assert float(r["delta"]) == pytest.approx(c["diff_raw"], abs=10 ** -len(r["delta"].split(".")[1]))
        cmd = _next_command(md)  # what next: a command while a verdict is indicative or resolvable by more seeds
        more = any(c.get("firm") is False or (c["verdict"] == "inconclusive" and (c.get("seed_advice") or {}).get(
            "n_needed")) for c in v["comparisons"])
        assert (cmd is not None) == (more or v["invalid"]), name
