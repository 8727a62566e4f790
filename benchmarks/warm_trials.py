"""Warm trial processes (``launcher.warm=true``) against a fresh process per trial (``warm=false``), side by side.

Two measurements, each interleaving the two systems (warm, fresh, fresh, warm, ...) so that machine
drift falls on both alike:

1. **Per-trial overhead** of ``launcher=local`` with a task that imports torch at module top and
   does nothing else: the slope (T(N2) - T(N1)) / (N2 - N1) of whole ``ablate`` runs over N trials
   (2 arms x N/2 seeds), which removes the fixed cost (plan, pins, verdict, the warm parent's one
   import). Reported as wall and CPU (user + system of ablate and all its children), against a bare
   ``python -c "import torch"`` measured in the same run. Target: warm per-trial CPU at most 1/10 of it.
2. **The digits example** (``ablate -m variable=lr seeds=10``: 30 trials, ``launcher.max_parallel=2``):
   wall clock against the trials' own compute, the sum of ``task_s`` over the trials' result.json
   (the trial's wall time inside the task function: data load and training, measured by
   ``time.perf_counter`` in :func:`ablate.trials.trial.run_trial`). Reported as wall / sum(task_s) and as
   wall / (sum(task_s) / slots), the share of the ideal schedule on the slots. Target: wall at most
   1.3 x the sum of the trials' own compute.

Usage::

    python benchmarks/warm_trials.py                          # N = 10 -> 100, 2 repeats, digits 1 repeat
    python benchmarks/warm_trials.py --sizes 10 100 --repeats 3 --digits-repeats 2
    python benchmarks/warm_trials.py --no-digits
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _common import ABLATE, Timing, cleanup, make_torch_project, summary, tempdir, timed

REPO = Path(__file__).resolve().parents[1]
SYSTEMS = ("warm", "fresh")


def make_digits_project(root: Path, repo: Path = REPO) -> Path:
    """A git + DVC copy of the digits example of ``repo`` (this repository, or an exported older revision of
    it), as tests/conftest.py builds it."""
    root.mkdir(parents=True)
    for name in ("conf", "examples", "dvc.yaml", "dvc.lock", "params.yaml"):
        src = repo / name
        if src.is_dir():
            shutil.copytree(src, root / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, root / name)
    (root / ".gitignore").write_text("/data/\n/outputs/\n__pycache__/\n")
    env = {**os.environ, "DVC_NO_ANALYTICS": "1", "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "b@b",
           "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "b@b"}
    (root / "data").mkdir()
    data = REPO / "data" / "digits.npz"
    py = sys.executable
    steps = [["git", "init", "-q"], [py, "-m", "dvc", "init", "-q"],
             [py, "-m", "dvc", "config", "core.analytics", "false"]]
    for cmd in steps:
        subprocess.run(cmd, cwd=root, env=env, check=True, capture_output=True)
    if data.exists():
        shutil.copy2(data, root / "data" / "digits.npz")
    else:
        subprocess.run([py, "-m", "examples.digits.prepare", "data/digits.npz"], cwd=root, env=env, check=True)
    for cmd in ([py, "-m", "dvc", "commit", "-f", "-q", "prepare"], ["git", "add", "-A"],
                ["git", "commit", "-q", "-m", "digits"]):
        subprocess.run(cmd, cwd=root, env=env, check=True, capture_output=True)
    return root


def run_torch(system: str, n: int, proj: Path, run_id: int) -> Timing:
    return timed([ABLATE, "-m", "variable=x", f"seeds={n // 2}", "launcher=local", "launcher.max_parallel=2",
                  f"launcher.warm={'true' if system == 'warm' else 'false'}", "progress=off",
                  f"hydra.sweep.dir=outputs/{system}_{n}_{run_id}"], proj)


def run_digits(system: str, proj: Path, run_id: int) -> tuple[Timing, float]:
    sweep = proj / "outputs" / f"digits_{system}_{run_id}"
    t = timed([ABLATE, "-m", "variable=lr", "seeds=10", "launcher=local", "launcher.max_parallel=2",
               f"launcher.warm={'true' if system == 'warm' else 'false'}", "progress=off",
               f"hydra.sweep.dir={sweep}"], proj)
    task_s = sum(json.loads(p.read_text())["task_s"] for p in sweep.glob("trials/*/seed=*/result.json"))
    return t, task_s


def order(i: int) -> tuple[str, ...]:
    """A, B then B, A: each system goes first as often as the other."""
    return SYSTEMS if i % 2 == 0 else SYSTEMS[::-1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs=2, default=[10, 100], metavar=("N1", "N2"))
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--digits-repeats", type=int, default=1)
    ap.add_argument("--no-digits", action="store_true")
    args = ap.parse_args(argv)
    n1, n2 = args.sizes
    root = tempdir("ablate-warm-")
    try:
        proj = make_torch_project(root / "torch")
        bare: list[Timing] = []
        runs: dict[tuple[str, int], list[Timing]] = {(s, n): [] for s in SYSTEMS for n in (n1, n2)}
        k = 0
        for r in range(args.repeats):
            for n in (n1, n2):
                for s in order(k):
                    runs[s, n].append(run_torch(s, n, proj, r))
                    bare.append(timed([sys.executable, "-c", "import torch"], proj))
                    t = runs[s, n][-1]
                    print(f"{s:5s} N={n:4d} run {r}: wall {t.wall_s:.2f} s, cpu {t.cpu_s:.2f} s", flush=True)
                k += 1
        bw, bc = statistics.median(t.wall_s for t in bare), statistics.median(t.cpu_s for t in bare)
        print(f"\nbare `python -c \"import torch\"`: wall {bw:.3f} s, cpu {bc:.3f} s (median of {len(bare)})")
        print(f"per-trial cost, slope N {n1}->{n2} (median of repeats; 2 slots, so wall is about cpu/2):")
        slope: dict[str, tuple[float, float]] = {}
        for s in SYSTEMS:
            w = [(b.wall_s - a.wall_s) / (n2 - n1) for a, b in zip(runs[s, n1], runs[s, n2], strict=True)]
            c = [(b.cpu_s - a.cpu_s) / (n2 - n1) for a, b in zip(runs[s, n1], runs[s, n2], strict=True)]
            slope[s] = (statistics.median(w), statistics.median(c))
            print(f"  {s:5s}: wall {summary([x * 1000 for x in w])} ms, cpu {summary([x * 1000 for x in c])} ms")
        wc, fc = slope["warm"][1], slope["fresh"][1]
        print(f"warm per-trial cpu {wc * 1000:.0f} ms = 1/{bc / wc:.1f} of a bare `import torch` "
              f"(target at most 1/10); fresh {fc * 1000:.0f} ms; warm/fresh = 1/{fc / wc:.1f} cpu, "
              f"1/{slope['fresh'][0] / slope['warm'][0]:.1f} wall")
        if not args.no_digits:
            dproj = make_digits_project(root / "digits")
            print("\ndigits example, `ablate -m variable=lr seeds=10` (30 trials, 2 slots):")
            for r in range(args.digits_repeats):
                for s in order(r):
                    t, task_s = run_digits(s, dproj, r)
                    print(f"  {s:5s} run {r}: wall {t.wall_s:.1f} s, cpu {t.cpu_s:.1f} s, trials' own compute "
                          f"sum(task_s) {task_s:.1f} s; wall/sum = {t.wall_s / task_s:.2f}, "
                          f"wall/(sum/2 slots) = {t.wall_s / (task_s / 2):.2f}", flush=True)
    finally:
        cleanup(root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
