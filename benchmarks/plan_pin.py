"""Time to plan and pin an ablation of 1000 trials (10 arms x 100 seeds) on the digits example.

Measured in-process: compose the config, derive and prove the 10 arms, pin the code (git commit and
snapshot), pin the data (DVC hash of data/digits.npz, cached by DVC's state database after the
first run), capture the environment and write ablation.yaml -- everything before the first trial.
A cold run (fresh DVC state) and warm repeats are reported separately. Target: under 2 s.

Usage (from the repository root, after `dvc repro`)::

    python benchmarks/plan_pin.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def make_project(dest: Path) -> Path:
    for name in ("conf", "examples", "dvc.yaml", "dvc.lock", "params.yaml"):
        src = REPO / name
        (shutil.copytree if src.is_dir() else shutil.copy2)(src, dest / name)
    (dest / ".gitignore").write_text("/data/\n/outputs/\n__pycache__/\n")
    env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "b",
           "GIT_COMMITTER_EMAIL": "b@b", "DVC_NO_ANALYTICS": "1"}
    (dest / "data").mkdir()
    shutil.copy2(REPO / "data" / "digits.npz", dest / "data" / "digits.npz")
    for cmd in (["git", "init", "-q"], [sys.executable, "-m", "dvc", "init", "-q"],
                [sys.executable, "-m", "dvc", "config", "core.analytics", "false"],
                [sys.executable, "-m", "dvc", "commit", "-f", "-q", "prepare"], ["git", "add", "-A"],
                ["git", "commit", "-q", "-m", "bench"]):
        subprocess.run(cmd, cwd=dest, env=env, check=True, capture_output=True)
    return dest


def plan_and_pin(proj: Path, out: Path) -> float:
    from ablate.orchestrate.pipeline import create
    from ablate.plan.compose import compose

    values = "[" + ",".join(str(0.001 * (i + 1)) for i in range(9)) + "]"
    t0 = time.perf_counter()
    c = compose(["variable=lr", f"variable.values={values}", "seeds=100", f"hydra.sweep.dir={out}"],
                config_path=str(proj / "conf"))
    sd = create(c.cfg, sweep_dir=c.sweep_dir, variable_name=c.variable_name, available_variables=c.variables,
                compose=c.compose, cwd=proj, config_dirs=c.config_dirs, choices=c.choices)
    elapsed = time.perf_counter() - t0
    assert sd is not None and sd.plan_file.exists()
    return elapsed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args(argv)
    import tempfile

    root = Path(tempfile.mkdtemp(prefix="ablate-planpin-"))
    try:
        proj = make_project(root / "proj")
        os.chdir(proj)
        import contextlib
        import io

        with contextlib.redirect_stderr(io.StringIO()):
            cold = plan_and_pin(proj, root / "run_cold")
            warm = [plan_and_pin(proj, root / f"run_{i}") for i in range(args.repeats)]
        print("plan + pin of 1000 trials (10 arms x 100 seeds), digits example, in-process:")
        print(f"  cold (first DVC hash): {cold:.3f} s")
        print(f"  warm: median {statistics.median(warm):.3f} s [{min(warm):.3f}, {max(warm):.3f}] "
              f"over {len(warm)} repeats  (target: under 2 s)")
    finally:
        os.chdir(REPO)
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
