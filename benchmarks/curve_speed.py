"""Time ``ablate verdict DIR`` with curve verdicts against the same sweep without them (issue 38 target: at
10 arms x 50 seeds x 1,000 steps, within 2x of the verdict without curves).

Usage::

    python benchmarks/curve_speed.py [--arms 10] [--seeds 50] [--steps 1000] [--repeat 5]

Builds two synthetic sweep dirs with the same trials (ablation.yaml + result.json + manifest.json per trial):
``curves`` also holds each trial's ``curve.json`` (``steps`` logged points, the metric's last value equal to the
trial's result) and ``curve.enabled`` in its plan; ``plain`` has neither, as every verdict before curves. Then
runs, interleaved in each round (curves, plain, then plain, curves in the next), each as a fresh process,
``ablate verdict DIR --recompute`` in two modes, reporting the median wall and CPU (user + sys of the process and
the children it waited for) with [min, max] and the median of the per-round ratios curves / plain (wall and
CPU: on a shared machine the CPU ratio is the steadier one):

- ``text``: returns once verdict.json and verdict.md are written (the PNGs are drawn after it by a detached
  process, waited for outside the timing);
- ``wait-plots``: text, then every PNG in the same process (with curves: one curve plot per treatment more).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.verdict_speed import _timed, _wait_for_plots  # noqa: E402  (after the sys.path line)
from tests.helpers import make_sweep  # noqa: E402


def build(root: Path, arms: int, seeds: int, steps: int, curves: bool) -> Path:
    """One synthetic sweep dir; with ``curves``, each trial's curve.json (a decay to a plateau plus AR noise)."""
    import numpy as np

    rng = np.random.default_rng(0)
    x = np.arange(steps, dtype=float)
    finals: dict[str, list[float]] = {}
    ys: dict[tuple[str, int], np.ndarray] = {}
    for i in range(arms):
        name = "control" if i == 0 else f"lr={i / 100}"
        finals[name] = []
        for s in range(seeds):
            noise = np.cumsum(rng.normal(0, 0.002, steps)) * 0.1 + rng.normal(0, 0.01, steps)
            y = 0.8 + 0.002 * i - 0.5 * np.exp(-x / (100 + 10 * i)) + noise
            ys[name, s] = y
            finals[name].append(float(y[-1]))
    opts = {"curve": {"enabled": True, "metric": "val_acc", "x": "step", "summary": "auc", "threshold": None,
                      "points": 200, "width": None}} if curves else None
    sd = make_sweep(root, finals, options=opts)
    if curves:
        for (name, s), y in ys.items():
            rec = {"metric": "val_acc", "x": "step", "source": "log_step", "path": None, "n_logged": steps,
                   "stride": 1, "xs": x.tolist(), "ys": y.tolist()}
            (sd / "trials" / name / f"seed={s}" / "curve.json").write_text(json.dumps(rec, separators=(",", ":")))
    return sd


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arms", type=int, default=10)
    ap.add_argument("--seeds", type=int, default=50)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp())
    dirs = {k: build(tmp / k, args.arms, args.seeds, args.steps, k == "curves") for k in ("curves", "plain")}
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    got: dict[tuple[str, str], list[tuple[float, float]]] = {}
    try:
        for r in range(args.repeat + 1):  # round 0 warms the page cache
            for mode, flags in (("text", ["--recompute"]), ("wait-plots", ["--recompute", "--wait-plots"])):
                order = ["curves", "plain"] if r % 2 else ["plain", "curves"]
                for k in order:
                    cmd = [sys.executable, "-m", "ablate.cli.main", "verdict", str(dirs[k]), *flags]
                    res = _timed(cmd, env, tmp)
                    _wait_for_plots(dirs[k])
                    if r:
                        got.setdefault((mode, k), []).append(res)
        print(f"ablate verdict, {args.arms} arms x {args.seeds} seeds x {args.steps} steps, median of {args.repeat} "
              "[min, max], interleaved:")
        for mode in ("text", "wait-plots"):
            for k in ("curves", "plain"):
                w, c = [v[0] for v in got[mode, k]], [v[1] for v in got[mode, k]]
                print(f"  {mode:10s} {k:6s} wall {statistics.median(w):.2f} s [{min(w):.2f}, {max(w):.2f}], "
                      f"CPU {statistics.median(c):.2f} s [{min(c):.2f}, {max(c):.2f}]")
            for i, what in ((0, "wall"), (1, "CPU")):
                ratios = [a[i] / b[i] for a, b in zip(got[mode, "curves"], got[mode, "plain"], strict=True)]
                print(f"  {mode:10s} curves / plain {what}, per round: median {statistics.median(ratios):.2f} "
                      f"[{min(ratios):.2f}, {max(ratios):.2f}]")
        v = json.loads((dirs["curves"] / "verdict.json").read_text())
        print("curve comparisons:", len(v["curves"]["comparisons"]), "grid points:",
              v["curves"]["comparisons"][0]["grid"]["points"])
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
