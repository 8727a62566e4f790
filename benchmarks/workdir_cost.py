"""Disk cost of a trial's work dir, per trial: entries (inodes) and bytes (blocks on disk), before and after.

Every trial runs in ``<trial dir>/work`` (:func:`ablate.trials.workdir.trial_workdir`). A deep mirror of the code
snapshot (a real dir per snapshot dir, a link per file, absolute link targets) cost about 460 entries and 1.1 MB
per trial on this repository's snapshot (600 trivial trials made a 638 MB sweep dir; issue 35). This measures one
trial's work dir, built by this tree's ``workdir.py`` and (``--against REF``) by ``REF``'s, on three snapshots:

- **repo**: this repository's HEAD (``git archive``: what the README's example run from here snapshots);
- **digits**: the digits example as the test projects hold it (``conf/``, ``examples/``, DVC files), with its
  ``task.data`` (``data/digits.npz``, 475 KB: placed once per ablation, as a read-only copy with this tree);
- **noop**: the benchmarks' no-op project (``_common.make_noop_project``).

Then a real ``ablate -m`` of the no-op task (``launcher=inline``, 10 seeds x 2 arms) with this tree: entries and
bytes per trial dir, whole (config, manifest, result, run dir, work dir), and the sweep dir's total per trial.
Bytes are ``st_blocks * 512`` of every entry below the dir, links not followed (what ``du`` counts).

Usage::

    python benchmarks/workdir_cost.py --against main
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

from _common import ABLATE, cleanup, make_noop_project, tempdir
from trial_workdir import DIGITS, REPO, make_snapshot

#: In a fresh interpreter: N trials' work dirs of one snapshot, with the given ``workdir.py``; prints JSON.
ROUND = r'''
import json, os, sys
from pathlib import Path
if sys.argv[4] != "-":  # the workdir module of another ref, loaded in place of this tree's
    import importlib.util
    spec = importlib.util.spec_from_file_location("ablate.trials.workdir", sys.argv[4])
    mod = importlib.util.module_from_spec(spec)
    sys.modules["ablate.trials.workdir"] = mod
    spec.loader.exec_module(mod)
from ablate.record.sweepdir import SweepDir
from ablate.trials import workdir
sd = SweepDir(sys.argv[1])
plan = {"pins": {"code": {"subdir": ""}}, "project": {"cwd": sys.argv[3]}}
task = json.loads(sys.argv[6])
for i in range(int(sys.argv[2])):
    workdir.trial_workdir(sd, plan, task, sd.root / sys.argv[5] / "control" / f"seed={i}")
'''


def cost(root: Path) -> tuple[int, int]:
    """(entries, bytes on disk) below ``root``, links not followed."""
    n = size = 0
    for d, dirs, files in os.walk(root):
        for name in dirs + files:
            n += 1
            size += os.lstat(os.path.join(d, name)).st_blocks * 512
    return n, size


def per_trial(dirs: list[Path]) -> tuple[float, float]:
    costs = [cost(d) for d in dirs]
    return statistics.median(c[0] for c in costs), statistics.median(c[1] for c in costs)


def work_dirs(sweep: Path, n: int, module: str, name: str, project: Path, data: list[str]) -> list[Path]:
    subprocess.run([sys.executable, "-c", ROUND, str(sweep), str(n), str(project), module, name,
                    json.dumps({"data": data})], check=True, capture_output=True, text=True)
    return [sweep / name / "control" / f"seed={i}" / "work" for i in range(n)]


def noop_run(root: Path) -> str:
    """A real ``ablate -m`` of the no-op task with this tree: cost per trial dir and per trial of the sweep dir."""
    proj = make_noop_project(root / "noop-run")
    subprocess.run([ABLATE, "-m", "variable=x", "seeds=10", "launcher=inline", "progress=off"], cwd=proj,
                   check=True, capture_output=True, text=True)
    (sd,) = [p.parent for p in proj.glob("outputs/ablate/*/*/ablation.yaml")]
    trials = sorted(sd.glob("trials/*/seed=*"))
    n_t, b_t = per_trial(trials)
    n_w, b_w = per_trial([t / "work" for t in trials])
    n_s, b_s = cost(sd)
    return (f"  noop ablation, this tree ({len(trials)} trials): trial dir {n_t:.0f} entries, {b_t / 1024:.0f} KB "
            f"(its work dir {n_w:.0f} entries, {b_w / 1024:.0f} KB); sweep dir {n_s} entries, "
            f"{b_s / 1024:.0f} KB in all, {b_s / len(trials) / 1024:.0f} KB per trial")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trials", type=int, default=10)
    ap.add_argument("--against", default=None, help="a git ref whose ablate/trials/workdir.py to compare with")
    args = ap.parse_args()
    root = tempdir("ablate-bench-workdir-cost-")
    try:
        systems = {"this tree": "-"}
        if args.against:
            old = root / "workdir_against.py"
            old.write_text(subprocess.run(["git", "show", f"{args.against}:ablate/trials/workdir.py"], cwd=REPO,
                                          capture_output=True, text=True, check=True).stdout)
            systems[args.against] = str(old)
        noop = make_noop_project(root / "noop-src")
        shapes = (("repo", None, REPO, ["data/digits.npz"]), ("digits", DIGITS, REPO, ["data/digits.npz"]),
                  ("noop", "noop", noop, []))
        for name, paths, project, data in shapes:
            if paths == "noop":
                sweep = root / "noop" / "sweep"
                sweep.mkdir(parents=True)
                shutil.copytree(noop, sweep / "code", ignore=shutil.ignore_patterns(".git"))
            else:
                sweep = make_snapshot(root / name, paths)
            files = sum(len(f) for _, _, f in os.walk(sweep / "code"))
            for s, module in systems.items():
                dirs = work_dirs(sweep, args.trials, module, f"trials-{s.replace(' ', '')}", project, data)
                n, b = per_trial(dirs)
                print(f"  {name} snapshot ({files} files), {s}: {n:.0f} entries, {b / 1024:.1f} KB per trial's work "
                      f"dir (median of {args.trials})", flush=True)
            placed = sweep / "code" / "data" / "digits.npz"
            if data and placed.exists() and not placed.is_symlink():
                print(f"  {name}: task.data placed once per ablation as a read-only copy: "
                      f"{placed.stat().st_blocks * 512 / 1024:.0f} KB", flush=True)
        print(noop_run(root), flush=True)
    finally:
        cleanup(root)


if __name__ == "__main__":
    main()
