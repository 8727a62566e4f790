"""Time ``ablate.stats.compare`` with defaults (target: under 5 ms per call, issue 15 item 3).

Usage: ``python benchmarks/compare_speed.py [--calls 200]``. Prints CPU and wall time per call for unpaired
and paired comparisons at N = 5 and 50; CPU time is the figure to read on a shared machine (wall time
there includes waiting for a core).
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=200)
    args = ap.parse_args()
    from ablate.stats import compare

    rng = np.random.default_rng(0)
    print("| case | CPU ms per call | wall ms per call |\n|---|---|---|")
    for paired in (False, True):
        for n in (5, 50):
            t, c = rng.normal(0.75, 0.01, n), rng.normal(0.74, 0.01, n)
            compare(t, c, paired=paired)  # imports and caches out of the timing
            cpu, wall = time.process_time(), time.perf_counter()
            for _ in range(args.calls):
                compare(t, c, paired=paired)
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            print(f"| {'paired' if paired else 'unpaired'}, N = {n} | {1000 * cpu / args.calls:.2f} | "
                  f"{1000 * wall / args.calls:.2f} |")


if __name__ == "__main__":
    main()
