"""SLURM packing (``launcher.trials_per_job=k``) against one trial per job, side by side.

Runs the no-op benchmark task (2 arms x ``--seeds`` seeds) through ``launcher=slurm`` with ``wait=true``,
interleaving the systems (k=1, k=K, K, 1, ...) so that machine drift falls on both alike, and reports
the whole ``ablate`` run's wall clock and the wall clock per trial. CPU is not reported: the jobs run
under slurmd, outside this process's children. Needs a SLURM cluster (``bash
ablate/launchers/slurm_cluster.sh start`` gives a local one).

Usage::

    python benchmarks/slurm_packing.py                      # 20 trials, k = 1 vs 10, 2 repeats
    python benchmarks/slurm_packing.py --seeds 25 --k 25 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _common import ABLATE, cleanup, make_noop_project, summary, tempdir, timed


def run_once(root: Path, seeds: int, k: int, i: int) -> float:
    """Wall seconds of one packed (or unpacked) ablation in a fresh copy of the no-op project."""
    proj = make_noop_project(root / f"k{k}-{i}")
    env = {k_: v for k_, v in os.environ.items() if not k_.startswith("SLURM_")}
    t = timed([ABLATE, "-m", "variable=x", f"seeds={seeds}", "launcher=slurm", f"launcher.trials_per_job={k}",
               "wait=true"], cwd=proj, env=env)
    return t.wall_s


def main(argv: list[str] | None = None) -> int:
    """Measure and print the comparison; ``--json PATH`` also writes it."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=10, help="seeds per arm (2 arms)")
    ap.add_argument("--k", type=int, default=10, help="trials per job of the packed system")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    n = 2 * args.seeds
    root = tempdir("ablate-bench-pack-")
    walls: dict[int, list[float]] = {1: [], args.k: []}
    try:
        for i in range(args.repeats):
            order = (1, args.k) if i % 2 == 0 else (args.k, 1)
            for k in order:
                walls[k].append(run_once(root, args.seeds, k, i))
                print(f"k={k} run {i}: {walls[k][-1]:.2f} s wall", file=sys.stderr, flush=True)
    finally:
        cleanup(root)
    out = {"trials": n, "k": args.k, "wall_s": {str(k): v for k, v in walls.items()}}
    for k, v in walls.items():
        print(f"trials_per_job={k}: {summary(v)} s wall for {n} trials; {summary([w / n for w in v])} s per trial")
    import statistics

    ratio = statistics.median(walls[1]) / statistics.median(walls[args.k])
    print(f"one trial per job / {args.k} per job: {ratio:.2f} x wall")
    out["ratio"] = ratio
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
