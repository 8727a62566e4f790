"""Planning an ``app`` task: compose each arm's config in-process (ablate's route) vs ``<app> --cfg job`` per arm.

Both routes ask Hydra with the app's own context (tests/fixtures/store_app: a ConfigStore schema, a
``pkg://`` search path, torch imported at module top):

- **in-process**: one process imports the app's module once (:func:`ablate.trials.tasks.app.import_app`),
  then composes every arm with Hydra's compose API (:func:`ablate.trials.tasks.app.compose_app`);
- **--cfg job**: one ``python src/train.py --cfg job hydra.mode=RUN <arm override>`` process per arm, the
  app composing itself (each one imports torch again).

Whole processes are timed, interleaved (A, B, B, A ...), wall and CPU (user + system). Usage::

    python benchmarks/app_compose.py [--repeats 5] [--arms 2 5]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
from pathlib import Path

from _common import cleanup, tempdir, timed

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "tests" / "fixtures" / "store_app"
OVERRIDES = ["optim.lr=0.2", "model=small", "optim.name=adam", "optim.lr=0.01", "model=mlp"]
IN_PROCESS = """
import sys
from pathlib import Path
from ablate.trials.tasks.app import compose_app, import_app
root = Path(sys.argv[1])
import_app(root / "src" / "train.py", root)
for ov in [[]] + [[o] for o in sys.argv[2:]]:
    compose_app(root / "configs", "train", "1.3", ov)
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--arms", type=int, nargs="+", default=[2, 5])
    args = ap.parse_args(argv)
    root = tempdir("ablate-bench-compose-")
    try:
        for part in ("src", "configs"):
            shutil.copytree(FIXTURE / part, root / part)
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        for n in args.arms:
            arms = OVERRIDES[: n - 1]
            a_cmd = [sys.executable, "-c", IN_PROCESS, str(root), *arms]
            b_cmds = [[sys.executable, "src/train.py", "--cfg", "job", "hydra.mode=RUN", *ov] for ov in [[]] +
                      [[o] for o in arms]]
            got: dict[str, list[tuple[float, float]]] = {"in-process": [], "--cfg job": []}
            for r in range(args.repeats):
                order = ["in-process", "--cfg job"] if r % 2 == 0 else ["--cfg job", "in-process"]
                for name in order:
                    if name == "in-process":
                        t = timed(a_cmd, root, env)
                        got[name].append((t.wall_s, t.cpu_s))
                    else:
                        ts = [timed(c, root, env) for c in b_cmds]
                        got[name].append((sum(t.wall_s for t in ts), sum(t.cpu_s for t in ts)))
            for name, vals in got.items():
                w = statistics.median(v[0] for v in vals)
                c = statistics.median(v[1] for v in vals)
                print(f"{n} arms  {name:<11} wall {w:6.2f} s  cpu {c:6.2f} s  (median of {args.repeats})")
    finally:
        cleanup(root)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
