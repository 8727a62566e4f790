"""Issue 37, items 1-2: the firm family-wise error of the decision rule ``ablate verdict`` runs (a better/worse on
evidently skewed values is indicative; no verdict of a family is firm below 20 seeds), and what it costs in power.
Usage: ``python benchmarks/stats37_firm.py [--reps 2000] [--power-reps 1000] [--only aa|power]``, or
``--settle 20000 [--floor 0.053]``: the A/A cells of ``benchmarks/results/stats37_firm.md`` at or above the floor again
at 20,000 replications.

Each replication: m treatments and one control, ``N`` seeds per arm. Shapes (every draw standardised to mean 0,
SD 1, then the treatment times the SD ratio r):

- ``normal``; ``lognormal`` (σ_log = 1 in both arms: fixed skew); ``grows`` (the treatment lognormal with the σ_log
  whose SD is r times that of σ_log = 1: skew grows with spread, the lognormal of Colas, Sigaud & Oudeyer 2019);
- ``collapse``: an accuracy-like binomial metric with seeds stuck at chance (``COLLAPSE_P``; its values are not 0/1,
  so ``compare()`` runs the t-test path this script simulates, checked as below);
- ``corr`` (paired only): a lognormal seed effect s (σ_log = 1) shared by both arms and amplified by the treatment,
  control s + 0.3 e, treatment r s + 0.3 r e (ρ ≈ 0.96).

Paired rows pair column j of every arm (ρ = 0 except ``corr``). Per treatment :func:`ablate.stats.decide_batch` with
``n_comparisons = m`` (what ``compare()`` runs), the guarded p (p x the skew guard's factor) into Holm
(:func:`ablate.stats.multiplicity.holm`, as ``adjust_comparisons`` does), then :func:`ablate.stats.core.is_firm` on
the adjusted p: the rule ``compare()`` + ``adjust_comparisons`` apply (checked on the first 10 replications of each
cell, which must give equal firm verdicts); "before" is the rule without its two issue-37 conditions (``skewed``
False, ``family`` 1). Printed: the share of replications with at least one firm better/worse (family-wise error, A/A)
or, with every treatment 1 SD (of the control) better, at least one firm better (power).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from ablate.stats import adjust_comparisons, compare, decide_batch
from ablate.stats.core import BETTER, WORSE, is_firm
from ablate.stats.multiplicity import holm

SHAPES = ("normal", "lognormal", "grows", "corr", "t3", "bimodal", "collapse")
#: ``collapse``: an accuracy-like metric, each seed the share correct of COLLAPSE_TRIALS test items at 0.9, or with
#: probability COLLAPSE_P a seed stuck at chance (0.1, ten classes): binomial values, two modes, skewed.
COLLAPSE_TRIALS, COLLAPSE_P = 1000, 0.2
#: The shapes of the default table; ``--shapes t3,bimodal`` runs the symmetric heavy-tailed and two-mode ones.
DEFAULT_SHAPES = SHAPES[:4]
MS = (1, 2, 5, 10)
NS = (5, 10, 20, 30, 50)
#: ``--ratios``: SD ratios to run instead of each shape's default pair (None: the defaults).
RATIOS: tuple[float, ...] | None = None


def _lognormal(rng: np.random.Generator, sigma_log: float, size: tuple[int, ...]) -> np.ndarray:
    """Lognormal draws standardised to mean 0, SD 1 (skewness grows with ``sigma_log``)."""
    var = (math.exp(sigma_log**2) - 1) * math.exp(sigma_log**2)
    return (rng.lognormal(0.0, sigma_log, size) - math.exp(sigma_log**2 / 2)) / math.sqrt(var)


def colas_sigma(ratio: float) -> float:
    """The σ_log of a lognormal (μ_log = 0) whose SD is ``ratio`` times that of σ_log = 1."""
    v = ratio**2 * (math.e - 1) * math.e  # (e^{s²} - 1) e^{s²} = v
    return math.sqrt(math.log((1 + math.sqrt(1 + 4 * v)) / 2))


def arms(rng: np.random.Generator, shape: str, m: int, n: int, reps: int, ratio: float, d: float = 0.0
         ) -> tuple[np.ndarray, np.ndarray]:
    """(treatments (m, reps, n), control (reps, n)); the treatments ``d`` control SDs better."""
    if shape == "normal":
        c, t = rng.standard_normal((reps, n)), ratio * rng.standard_normal((m, reps, n))
    elif shape == "lognormal":
        c, t = _lognormal(rng, 1.0, (reps, n)), ratio * _lognormal(rng, 1.0, (m, reps, n))
    elif shape == "grows":
        c, t = _lognormal(rng, 1.0, (reps, n)), ratio * _lognormal(rng, colas_sigma(ratio), (m, reps, n))
    elif shape == "t3":  # Student t with 3 df, standardised (variance 3)
        c, t = rng.standard_t(3, (reps, n)) / math.sqrt(3), ratio * rng.standard_t(3, (m, reps, n)) / math.sqrt(3)
    elif shape == "bimodal":  # two equal normal modes at ±0.9, each SD √0.19: mean 0, SD 1
        def two(size: tuple[int, ...]) -> np.ndarray:
            return np.where(rng.random(size) < 0.5, -0.9, 0.9) + math.sqrt(0.19) * rng.standard_normal(size)
        c, t = two((reps, n)), ratio * two((m, reps, n))
    elif shape == "collapse":
        def acc(size: tuple[int, ...]) -> np.ndarray:
            q = np.where(rng.random(size) < COLLAPSE_P, 0.1, 0.9)
            return rng.binomial(COLLAPSE_TRIALS, q) / COLLAPSE_TRIALS
        mu = COLLAPSE_P * 0.1 + (1 - COLLAPSE_P) * 0.9
        ex2 = sum(w * (q * q + q * (1 - q) / COLLAPSE_TRIALS) for w, q in ((COLLAPSE_P, 0.1), (1 - COLLAPSE_P, 0.9)))
        sd = math.sqrt(ex2 - mu * mu)
        c, t = (acc((reps, n)) - mu) / sd, ratio * (acc((m, reps, n)) - mu) / sd
    elif shape == "corr":
        s = _lognormal(rng, 1.0, (reps, n))
        c = s + 0.3 * rng.standard_normal((reps, n))
        t = ratio * (s[None] + 0.3 * rng.standard_normal((m, reps, n)))
        sd = math.sqrt(1 + 0.09)
        c, t = c / sd, t / sd
    else:
        raise ValueError(shape)
    return t + d, c


def family(shape: str, m: int, n: int, reps: int, ratio: float, paired: bool, seed: int, d: float = 0.0,
           check: int = 10, baseline: str = "pre37") -> tuple[float, float]:
    """(after, before): the share of replications with at least one firm better/worse (better only when d > 0).

    ``baseline`` (the "before" column): ``"pre37"``, the rule without its issue-37 conditions (``skewed`` False,
    ``family`` 1, no gap); ``"gap"``, the rule as it ships less the seed-gap condition (``gap`` NaN): what the gap
    rule changes; ``"floor"``, the rule as it ships less the 8-seed floor on continuous metrics (``min_n`` 0,
    :data:`ablate.stats.core.FIRM_MIN_CONTINUOUS`): what the floor changes."""
    rng = np.random.default_rng(seed)
    treat, control = arms(rng, shape, m, n, reps, ratio, d)
    res = [decide_batch(treat[j], control, paired=paired, n_comparisons=m) for j in range(m)]
    p = np.stack([np.minimum(1.0, r.pvalue * r.guard_factor) for r in res])
    adj = np.apply_along_axis(holm, 0, p) if m > 1 else p
    after, before = np.zeros(reps, bool), np.zeros(reps, bool)
    for j, r in enumerate(res):
        verdict = np.where(adj[j] < 0.05, np.where(r.diff > 0, BETTER, WORSE), 0)
        if d > 0:
            verdict = np.where(verdict == BETTER, BETTER, 0)
        n_ = np.minimum(r.n_treatment, r.n_control)
        after |= is_firm(verdict, adj[j], 0.05, r.guard_factor, n_, r.paired, r.skewed, m, r.skew_z, r.gap)
        before |= (is_firm(verdict, adj[j], 0.05, r.guard_factor, n_, r.paired) if baseline == "pre37" else
                   is_firm(verdict, adj[j], 0.05, r.guard_factor, n_, r.paired, r.skewed, m, r.skew_z, r.gap, 0)
                   if baseline == "floor" else
                   is_firm(verdict, adj[j], 0.05, r.guard_factor, n_, r.paired, r.skewed, m, r.skew_z))
    for i in range(min(check, reps)):  # the same rule through compare() + adjust_comparisons
        comps = [compare(treat[j, i], control[i], paired=paired, n_comparisons=m, pi_interval=False)
                 for j in range(m)]
        comps = adjust_comparisons(comps, "holm") if m > 1 else comps
        got = any(bool(c.firm) and (d == 0 or c.verdict == "better") for c in comps)
        assert got == bool(after[i]), (shape, m, n, i)
    return float(after.mean()), float(before.mean())


def table(reps: int, d: float, shapes: tuple[str, ...] = DEFAULT_SHAPES, ns: tuple[int, ...] = NS,
          ms: tuple[int, ...] = MS, before: str = "pre37") -> None:
    what = "A/A family-wise error of firm verdicts" if d == 0 else f"power (a firm better), every treatment {d:g} SD"
    se = math.sqrt(0.05 * 0.95 / reps)
    print(f"### {what}: after / before ({reps} replications per cell" +
          (f", MC SE {se:.4f} at 0.05" if d == 0 else "") + ")\n")
    print("| design | shape | SD ratio | m | " + " | ".join(f"N={n}" for n in ns) + " |")
    print("|---|---|---|---|" + "---|" * len(ns))
    worst = (0.0, "")
    for paired in (False, True):
        for shape in shapes:
            if shape == "corr" and not paired:
                continue
            for ratio in RATIOS or ((1.0, 3.0) if shape in ("normal", "t3", "bimodal", "collapse") else (2.0, 3.0)):
                for m in ms:
                    cells = []
                    for n in ns:
                        seed = 100_000 * paired + 1000 * SHAPES.index(shape) + 100 * m + n + int(10 * ratio)
                        a, b = family(shape, m, n, reps, ratio, paired, seed, d, baseline=before)
                        cells.append(f"{a:.3f} / {b:.3f}")
                        if d == 0 and a > worst[0]:
                            worst = (a, f"{'paired' if paired else 'unpaired'} {shape} 1:{ratio:g} m={m} N={n}")
                    print(f"| {'paired' if paired else 'unpaired'} | {shape} | 1:{ratio:g} | {m} | "
                          + " | ".join(cells) + " |", flush=True)
    if d == 0:
        print(f"\nworst firm cell after: {worst[0]:.3f} ({worst[1]})")
    print()


def nearest_cells(path: Path, floor: float) -> list[tuple[bool, str, float, int, int]]:
    """The A/A cells of a results file (this script's table) whose firm rate after is >= ``floor``:
    (paired, shape, ratio, m, N)."""
    out, inside = [], False
    for line in path.read_text().splitlines():
        if line.startswith("###"):  # the first A/A table only
            if inside:
                break
            inside = line.startswith("### A/A")
        if not inside:
            continue
        parts = [x.strip() for x in line.strip("|").split("|")]
        if len(parts) != 4 + len(NS) or parts[0] not in ("paired", "unpaired") or "/" not in parts[4]:
            continue
        for n, cell in zip(NS, parts[4:], strict=True):
            if float(cell.split("/")[0]) >= floor:
                out.append((parts[0] == "paired", parts[1], float(parts[2].split(":")[1]), int(parts[3]), n))
    return out


def settle(reps: int, floor: float, chunk: int = 5000, source: Path | None = None) -> None:
    """The cells of ``source``'s first A/A table (this script's output; default benchmarks/results/stats37_firm.md)
    at or above ``floor``, at ``reps`` replications (in chunks of ``chunk``, new seeds; the first 10 of each chunk
    checked against compare())."""
    cells = nearest_cells(source or Path(__file__).parent / "results" / "stats37_firm.md", floor)
    print(f"### The A/A cells nearest 0.056 (>= {floor} in the source table), settled: {reps} replications per cell, "
          f"MC SE {math.sqrt(0.05 * 0.95 / reps):.4f} at 0.05\n")
    print("| design | shape | SD ratio | m | N | firm FWER after / before |")
    print("|---|---|---|---|---|---|")
    for paired, shape, ratio, m, n in cells:
        got = []
        for k in range(0, reps, chunk):
            seed = 7_000_000 + 100_000 * paired + 1000 * SHAPES.index(shape) + 100 * m + n + int(10 * ratio) + k
            got.append(family(shape, m, n, min(chunk, reps - k), ratio, paired, seed))
        w = [min(chunk, reps - k) for k in range(0, reps, chunk)]
        a, b = (sum(x[i] * wi for x, wi in zip(got, w, strict=True)) / reps for i in (0, 1))
        print(f"| {'paired' if paired else 'unpaired'} | {shape} | 1:{ratio:g} | {m} | {n} | {a:.4f} / {b:.4f} |",
              flush=True)
    print()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--settle", type=int, default=0, metavar="REPS",
                    help="only the results file's A/A cells >= --floor, at REPS replications")
    ap.add_argument("--floor", type=float, default=0.053)
    ap.add_argument("--cells-from", type=Path, help="with --settle: another output of this script")
    ap.add_argument("--shapes", default=",".join(DEFAULT_SHAPES), help="comma-separated, of " + ", ".join(SHAPES))
    ap.add_argument("--reps", type=int, default=2000)
    ap.add_argument("--power-reps", type=int, default=1000)
    ap.add_argument("--only", choices=("aa", "power"))
    ap.add_argument("--ns", default=",".join(map(str, NS)), help="seeds per arm, comma-separated")
    ap.add_argument("--ms", default=",".join(map(str, MS)), help="treatments per family, comma-separated")
    ap.add_argument("--ratios", help="SD ratios, comma-separated (default: 1,3 or 2,3 by shape)")
    ap.add_argument("--before", choices=("pre37", "gap", "floor"), default="pre37",
                    help="the 'before' column: the rule before issue 37 (pre37), the rule less the seed-gap "
                         "condition (gap), or the rule less the 8-seed floor (floor)")
    args = ap.parse_args()
    if args.settle:
        settle(args.settle, args.floor, source=args.cells_from)
        return
    shapes = tuple(args.shapes.split(","))
    grid = dict(ns=tuple(int(x) for x in args.ns.split(",")), ms=tuple(int(x) for x in args.ms.split(",")),
                before=args.before)
    if args.ratios:
        global RATIOS
        RATIOS = tuple(float(x) for x in args.ratios.split(","))
    if args.only in (None, "aa"):
        table(args.reps, 0.0, shapes, **grid)
    if args.only in (None, "power"):
        table(args.power_reps, 1.0, shapes, **grid)


if __name__ == "__main__":
    main()
