"""Time ``ablate verdict DIR`` as a whole process on a synthetic sweep dir (issue 9 target: < 1 s).

Usage: ``python benchmarks/verdict_speed.py [--arms 10] [--seeds 50] [--repeat 5]``. Builds the sweep
dir (ablation.yaml + result.json + manifest.json per trial) in a temp folder, runs the console script
``--repeat`` times and prints each wall time, then ``python -X importtime`` totals of the big imports.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.helpers import make_sweep

#: Times each stage of the verdict in a fresh process (imports first, so each import is paid once).
STAGES = """
import sys, time
t = [time.perf_counter()]
import numpy, yaml; t.append(time.perf_counter())
import scipy.stats; t.append(time.perf_counter())
import statsmodels.stats.power, statsmodels.stats.multitest; t.append(time.perf_counter())
import matplotlib.figure, matplotlib.backends.backend_agg; t.append(time.perf_counter())
import ablate.verdict as V
from ablate.results import collect
from ablate.sweepdir import SweepDir
from ablate.trial import load_plan
sd = SweepDir.open(sys.argv[1]); plan = load_plan(sd); rows = collect(sd, plan); t.append(time.perf_counter())
v = V.analyse(plan, rows, V.resolve_options(plan)); t.append(time.perf_counter())
v.update(confounds={}, pins={}, config_drift=[]); V._write_plots(sd, v); t.append(time.perf_counter())
names = ["numpy+yaml", "scipy.stats", "statsmodels", "matplotlib", "read trials", "statistics", "plots"]
print(", ".join(f"{n} {b - a:.2f}" for n, a, b in zip(names, t, t[1:])))
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--arms", type=int, default=10)
    ap.add_argument("--seeds", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    import numpy as np

    rng = np.random.default_rng(0)
    values = {"control": list(rng.normal(0.8, 0.01, args.seeds))}
    for i in range(1, args.arms):
        values[f"lr={i / 100}"] = list(rng.normal(0.8 + 0.002 * i, 0.01, args.seeds))
    tmp = Path(tempfile.mkdtemp())
    root = make_sweep(tmp / "sweep", values)
    exe = shutil.which("ablate") or str(Path(sys.executable).with_name("ablate"))
    times = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        subprocess.run([exe, "verdict", str(root)], check=True, capture_output=True)
        times.append(time.perf_counter() - t0)
    print(f"ablate verdict, {args.arms} arms x {args.seeds} seeds: " + ", ".join(f"{t:.2f}" for t in times)
          + f" s (median {statistics.median(times):.2f} s)")
    stages = subprocess.run([sys.executable, "-c", STAGES, str(root)], capture_output=True, text=True, check=True)
    print("stages (s):", stages.stdout.strip())
    shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
