"""Per-trial cost of a trial's own working dir: the mirror of the code snapshot, and the two scans of the guard.

Every trial (``fn``, ``command``, ``app``; every launcher) runs in ``<trial dir>/work``, a mirror of the shared code
snapshot (:func:`ablate.trials.workdir.trial_workdir`), between two scans of that snapshot
(:func:`ablate.trials.workdir.guard_snapshot`). This measures both, per trial, on two real snapshots:

- **repo**: this repository's own commit (``git archive HEAD``: the README's example run from here snapshots
  all of it, about 315 files);
- **digits**: the digits example as the test projects hold it (``conf/``, ``examples/``, DVC files).

Each is measured in a fresh process per round (``mirror cold``: the first trial of a process, which lists the
snapshot; a fresh ``launcher=local`` trial) and for the later trials of one process (``mirror warm``:
``launcher=inline``, or a fork of a warm parent, which listed it before forking). CPU is the process's own
user + system time (``time.process_time``), median per trial over rounds; the load average is printed. With
``--against REF`` the same is measured, interleaved round by round, for ``ablate/trials/workdir.py`` as it is at
the git ref ``REF`` (e.g. ``main``).

Usage::

    python benchmarks/trial_workdir.py                    # 9 rounds of 40 trials
    python benchmarks/trial_workdir.py --against main --rounds 15
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import subprocess
import sys
import tarfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _common import cleanup, tempdir

REPO = Path(__file__).resolve().parents[1]
DIGITS = ("conf", "examples", "dvc.yaml", "dvc.lock", "params.yaml")

#: One round, in a fresh interpreter: N trials' mirrors and guard scans of one snapshot; prints JSON (ms per trial).
ROUND = r'''
import json, os, sys, time
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
n = int(sys.argv[2])
plan = {"pins": {"code": {"subdir": ""}}, "project": {"cwd": sys.argv[3]}}
task = {"data": ["data/digits.npz"]}
mirror = []
for i in range(n):
    t0 = time.process_time()
    workdir.trial_workdir(sd, plan, task, sd.root / sys.argv[5] / "control" / f"seed={i}")
    mirror.append(time.process_time() - t0)
t0 = time.process_time()
for _ in range(n):
    with workdir.guard_snapshot(sd.code_dir):
        pass
scan = (time.process_time() - t0) / n
print(json.dumps({"cold": mirror[0] * 1e3, "warm": sorted(mirror[1:])[len(mirror[1:]) // 2] * 1e3,
                  "guard": scan * 1e3}))
'''


def make_snapshot(root: Path, paths: tuple[str, ...] | None) -> Path:
    """A sweep dir whose ``code/`` holds this repository's HEAD (``paths``: only those), as ablate extracts it."""
    data = subprocess.run(["git", "archive", "--format=tar", "HEAD", *(paths or ())], cwd=REPO, capture_output=True,
                          check=True).stdout
    sweep = root / "sweep"
    (sweep / "code").mkdir(parents=True)
    os.chmod(sweep, 0o700)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(sweep / "code", filter="tar")
    return sweep


def one_round(sweep: Path, n: int, module: str, name: str) -> dict[str, float]:
    """One round into ``<sweep>/<name>`` (a new dir each round: deleting the last round's thousands of links just
    before would charge the file system's deferred work to this one's)."""
    out = subprocess.run([sys.executable, "-c", ROUND, str(sweep), str(n), str(REPO), module, name],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--trials", type=int, default=40)
    ap.add_argument("--against", default=None, help="a git ref whose ablate/trials/workdir.py to compare with")
    args = ap.parse_args()
    root = tempdir("ablate-bench-workdir-")
    try:
        systems = {"this tree": "-"}
        if args.against:
            old = root / "workdir_against.py"
            old.write_text(subprocess.run(["git", "show", f"{args.against}:ablate/trials/workdir.py"], cwd=REPO,
                                          capture_output=True, text=True, check=True).stdout)
            systems[args.against] = str(old)
        print(f"load average before: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
        for name, paths in (("repo", None), ("digits", DIGITS)):
            sweep = make_snapshot(root / name, paths)
            files = sum(len(f) for _, _, f in os.walk(sweep / "code"))
            got: dict[str, list[dict[str, float]]] = {s: [] for s in systems}
            for r in range(args.rounds):
                for s in (list(systems) if r % 2 == 0 else list(systems)[::-1]):
                    got[s].append(one_round(sweep, args.trials, systems[s], f"trials{r}{s.replace(' ', '')}"))
            for s, rounds in got.items():
                med = {k: statistics.median(x[k] for x in rounds) for k in ("cold", "warm", "guard")}
                print(f"  {name} snapshot ({files} files), {s}: mirror cold {med['cold']:.2f} ms, mirror warm "
                      f"{med['warm']:.2f} ms, guard (two scans) {med['guard']:.2f} ms CPU per trial "
                      f"(median of {args.rounds} rounds x {args.trials} trials)", flush=True)
        print(f"load average after: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    finally:
        cleanup(root)


if __name__ == "__main__":
    main()
