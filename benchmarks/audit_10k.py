"""``ablate audit`` of 10,000 Hydra run dirs: CPU time and the progress lines (issue 36: within a minute of CPU,
a progress line on stderr).

The run dirs are real: the audit test app (tests/fixtures/audit_app, a ``@hydra.main`` app in a git repo) is run
by Hydra as two multiruns of 3 seeds (``lr=0.1``, ``lr=0.2``), then each side's run dirs are copied to 5,000
(the seed in ``.hydra/config.yaml`` and ``overrides.yaml`` rewritten, ``metrics.jsonl`` kept). ``ablate audit
multirun/ --no-plots`` then runs as a whole process; the benchmark reports its wall time, its CPU time (user +
system, of the process and its children: git included) and the progress lines it printed.

Usage::

    python benchmarks/audit_10k.py [--runs 10000]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _common import ABLATE, cleanup, tempdir

REPO = Path(__file__).resolve().parent.parent
MAKE = REPO / "tests" / "fixtures" / "audit_app" / "make_runs.py"


def fan_out(side: Path, n: int) -> None:
    """Copy ``side``'s run dirs to ``n`` run dirs, seeds 1..n."""
    src = sorted(d for d in side.iterdir() if (d / ".hydra").is_dir())
    for k in range(len(src), n):
        d = side / str(k)
        shutil.copytree(src[k % len(src)], d)
        for name in ("config.yaml", "overrides.yaml"):
            f = d / ".hydra" / name
            f.write_text("\n".join(("seed: " + str(k + 1)) if line.startswith("seed:") else
                                   ("- seed=" + str(k + 1)) if line.startswith("- seed=") else line
                                   for line in f.read_text().splitlines()) + "\n")


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=10000)
    args = p.parse_args()
    root = tempdir("audit10k")
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "WANDB_"))}
        subprocess.run([sys.executable, str(MAKE), str(root), "--scenario", "clean"], check=True, env=env)
        repo = root / "repo"
        for side in ("a", "b"):
            fan_out(repo / "multirun" / side, args.runs // 2)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.monotonic()
        res = subprocess.run([ABLATE, "audit", "multirun/", "--no-plots", "--out", str(root / "audit")], cwd=repo,
                             capture_output=True, text=True, env=env)
        wall = time.monotonic() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        progress = [x for x in res.stderr.splitlines() if x.startswith("ablate audit: read")]
        print(f"ablate audit of {args.runs:,} Hydra run dirs: exit {res.returncode}, wall {wall:.1f} s, "
              f"CPU {cpu:.1f} s, {len(progress)} progress lines")
        for line in progress[:3] + (["..."] if len(progress) > 4 else []) + progress[-1:]:
            print("  " + line)
        if res.returncode != 0:
            print(res.stderr[-2000:])
        return res.returncode
    finally:
        cleanup(root)


if __name__ == "__main__":
    raise SystemExit(main())
