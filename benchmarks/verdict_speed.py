"""Time ``ablate verdict DIR`` as a whole process on a synthetic sweep dir (issue 15 target: < 1 s for 10 x 50).

Usage::

    python benchmarks/verdict_speed.py [--arms 10] [--seeds 50] [--repeat 5] [--old REV]

Builds the sweep dir (ablation.yaml + result.json + manifest.json per trial) in a temp folder and runs,
interleaved in each round (A, B, C, ... then the next round), each of these as a fresh process, reporting
the median wall and CPU (user + sys of the process and the children it waited for) with [min, max]:

- ``text``: ``ablate verdict DIR --recompute``, the default: returns once verdict.json and verdict.md are
  written; the plots are drawn after it by a detached process (waited for, outside the timing, before the
  next command; its own time is the difference to ``wait-plots``);
- ``wait-plots``: ``--recompute --wait-plots``, everything in one process (text, then the three PNGs);
- ``no-plots``: ``--recompute --no-plots``;
- ``reuse``: ``ablate verdict DIR`` with nothing changed since the last one (reprinted, no scipy import);
- with ``--old REV``: ``old``, ``ablate verdict DIR`` of git revision REV of this repository (exported
  with ``git archive`` to a temp folder, run with it first on ``PYTHONPATH``), which drew the plots
  in-process and imported statsmodels.

Then the per-stage times of one cold verdict in a fresh process (imports first, so each is paid once).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.helpers import make_sweep  # noqa: E402  (after the sys.path line)

#: Times each stage of the verdict in a fresh process (imports first, so each import is paid once).
STAGES = """
import sys, time
t = [time.perf_counter()]
import numpy, yaml; t.append(time.perf_counter())
import scipy.stats; t.append(time.perf_counter())
import matplotlib.figure, matplotlib.backends.backend_agg; t.append(time.perf_counter())
import ablate.judge.verdict as V
from ablate.record.results import collect
from ablate.record.sweepdir import SweepDir
from ablate.trials.config import load_plan
sd = SweepDir.open(sys.argv[1]); plan = load_plan(sd); rows = collect(sd, plan); t.append(time.perf_counter())
v = V.analyse(plan, rows, V.resolve_options(plan)); t.append(time.perf_counter())
v.update(confounds={}, pins={}, config_drift=[]); V._write_plots(sd, v); t.append(time.perf_counter())
names = ["numpy+yaml", "scipy.stats", "matplotlib", "read trials", "statistics", "plots (2 PNGs)"]
print(", ".join(f"{n} {b - a:.2f}" for n, a, b in zip(names, t, t[1:])))
"""


def _wait_for_plots(root: Path) -> None:
    """Block until a background plot drawing in ``root`` is done (it holds the sweep dir's lock)."""
    subprocess.run([sys.executable, "-c", "import sys; from ablate.record.sweepdir import SweepDir; "
                    "sd = SweepDir.open(sys.argv[1]); sd.acquire(); sd.release()", str(root)], check=True)


def _timed(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + sys of the children waited for) of one command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, env=env, cwd=cwd)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arms", type=int, default=10)
    ap.add_argument("--seeds", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--old", metavar="REV", help="also time `ablate verdict` of this git revision")
    args = ap.parse_args()
    import numpy as np

    rng = np.random.default_rng(0)
    values = {"control": list(rng.normal(0.8, 0.01, args.seeds))}
    for i in range(1, args.arms):
        values[f"lr={i / 100}"] = list(rng.normal(0.8 + 0.002 * i, 0.01, args.seeds))
    tmp = Path(tempfile.mkdtemp())
    root = make_sweep(tmp / "sweep", values)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    cli = [sys.executable, "-m", "ablate.cli.main", "verdict", str(root)]
    modes = {"text": [*cli, "--recompute"], "wait-plots": [*cli, "--recompute", "--wait-plots"],
             "no-plots": [*cli, "--recompute", "--no-plots"], "reuse": cli}
    envs = {m: env for m in modes}
    if args.old:
        old = tmp / "old"
        old.mkdir()
        archive = subprocess.run(["git", "-C", str(REPO), "archive", args.old, "ablate"], check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(old)], input=archive, check=True)
        modes["old"] = cli
        envs["old"] = {**env, "PYTHONPATH": str(old)}
    got: dict[str, list[tuple[float, float]]] = {m: [] for m in modes}
    try:
        for r in range(args.repeat + 1):  # round 0 warms the page cache and writes the reuse key
            order = list(modes) if r % 2 else list(modes)[::-1]
            for m in order:
                if m == "reuse":  # the verdict on disk must be the current one: the last call may have been old
                    subprocess.run([*cli, "--wait-plots"], check=True, capture_output=True, env=env, cwd=tmp)
                res = _timed(modes[m], envs[m], tmp)  # cwd: not this checkout, which `-m` would put first
                _wait_for_plots(root)
                if r:
                    got[m].append(res)
        print(f"ablate verdict, {args.arms} arms x {args.seeds} seeds, median of {args.repeat} [min, max], "
              "interleaved:")
        for m, vals in got.items():
            w, c = [v[0] for v in vals], [v[1] for v in vals]
            print(f"  {m:10s} wall {statistics.median(w):.2f} s [{min(w):.2f}, {max(w):.2f}], "
                  f"CPU {statistics.median(c):.2f} s [{min(c):.2f}, {max(c):.2f}]")
        stages = subprocess.run([sys.executable, "-c", STAGES, str(root)], capture_output=True, text=True,
                                check=True, env=env)
        print("stages of one cold verdict (s):", stages.stdout.strip())
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
