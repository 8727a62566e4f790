"""``ablate status``, ``ablate verdict`` and ``ablate.load`` on a 10,000-trial sweep dir (10 arms x 1,000 seeds).

The sweep dir is real: a no-op ablation of 10 arms x 2 seeds is run with ``launcher=inline`` (real
plan, pins, manifests and results), then each trial's files are copied to seeds 0..999 (the seed
fields rewritten) and ``ablation.yaml`` lists the 1,000 seeds. Each command then runs as a whole
process, the three interleaved (status, verdict, load, status, ...), and the benchmark reports the
wall time and the peak resident memory (``ru_maxrss`` of that process) of each, plus the sweep dir's
file count, its bytes of content and its size on disk. Targets (issue 15): each under 3 s, the
verdict under 150 MiB. The verdict is timed three ways: ``--recompute`` (the default path: it returns
with the text, the plots are drawn after it by a detached process whose time and memory are not in
that figure), ``--recompute --wait-plots`` (everything in one process) and unchanged (reprinted from
verdict.json after checking the inputs' digests). Each command waits for a background plot drawing
to end before the next one starts.

Usage::

    python benchmarks/scale_10k.py [--seeds 1000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).parent))

from _common import ABLATE, cleanup, make_noop_project, tempdir, timed

#: Runs a command and prints its peak RSS in KiB (Linux ru_maxrss) as the last line.
PEAK = "import resource, subprocess, sys; r = subprocess.run(sys.argv[1:], capture_output=True); " \
       "sys.exit(r.returncode) if r.returncode not in (0, 1) else None; " \
       "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"


def build(proj: Path, seeds: int) -> Path:
    """A sweep dir of 10 arms x ``seeds`` seeds from a real 10 x 3 inline run (3: the fewest seeds ablate plans)."""
    sd = proj / "outputs" / "scale"
    timed([ABLATE, "-m", "variable=x", "seeds=3", "launcher=inline", "progress=off",
           "variable.values=[2,3,4,5,6,7,8,9,10]", f"hydra.sweep.dir={sd}"], proj)
    plan = yaml.safe_load((sd / "ablation.yaml").read_text())
    plan["seeds"] = list(range(seeds))
    (sd / "ablation.yaml").write_text(yaml.safe_dump(plan, sort_keys=False))
    for arm_dir in (sd / "trials").iterdir():
        src = arm_dir / "seed=0"
        files = {p.name: p.read_text() for p in src.iterdir() if p.is_file()}
        for seed in range(3, seeds):
            dest = arm_dir / f"seed={seed}"
            dest.mkdir(mode=0o700)
            for name, text in files.items():
                if name.endswith(".json"):
                    rec = json.loads(text)
                    rec["seed"] = seed
                    if "metrics" in rec:
                        rec["metrics"] = {k: float(seed) for k in rec["metrics"]}
                    if isinstance(rec.get("config"), dict):
                        rec["config"]["seed"] = seed
                    text = json.dumps(rec)
                (dest / name).write_text(text)
    for name in ("verdict.json", "verdict.md", "results.csv"):
        (sd / name).unlink(missing_ok=True)
    return sd


def wait_for_plots(sd: Path) -> None:
    """Block until a background plot drawing in ``sd`` is done (it holds the sweep dir's lock)."""
    subprocess.run([sys.executable, "-c", "import sys; from ablate.record.sweepdir import SweepDir; "
                    "d = SweepDir.open(sys.argv[1]); d.acquire(); d.release()", str(sd)], check=True)


def measure(cmd: list[str], cwd: Path) -> tuple[float, float]:
    """Wall seconds and peak RSS (MiB) of ``cmd`` as a whole process."""
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", PEAK, *cmd], cwd=cwd, capture_output=True, text=True, check=True)
    wall = time.perf_counter() - t0
    return wall, int(out.stdout.strip().splitlines()[-1]) / 1024


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    root = tempdir("ablate-scale-")
    try:
        proj = make_noop_project(root / "proj")
        sd = build(proj, args.seeds)
        files = [p for p in sd.rglob("*") if p.is_file() and "code" not in p.relative_to(sd).parts[:1]]
        content = sum(p.stat().st_size for p in files)
        disk = sum(p.stat().st_blocks * 512 for p in files)
        n_trials = 10 * args.seeds
        print(f"sweep dir: {n_trials} trials, {len(files)} files ({len(files) / n_trials:.1f} per trial), "
              f"{content / 2**20:.1f} MiB of content, {disk / 2**20:.1f} MiB on disk (code snapshot excluded)")
        cmds = {"status": [ABLATE, "status", str(sd)],
                "verdict": [ABLATE, "verdict", str(sd), "--recompute"],
                "verdict --wait-plots": [ABLATE, "verdict", str(sd), "--recompute", "--wait-plots"],
                "verdict (reuse)": [ABLATE, "verdict", str(sd)],
                "load": [sys.executable, "-c", f"import ablate; ablate.load({str(sd)!r})"]}
        got: dict[str, list[tuple[float, float]]] = {k: [] for k in cmds}
        for r in range(args.repeats):
            names = list(cmds) if r % 2 == 0 else list(cmds)[::-1]
            for k in names:
                got[k].append(measure(cmds[k], proj))
                wait_for_plots(sd)  # `ablate verdict` draws them after returning: not in the next timing
        for k, vals in got.items():
            walls, rss = [v[0] for v in vals], [v[1] for v in vals]
            print(f"{k:21s} wall {statistics.median(walls):.2f} s [{min(walls):.2f}, {max(walls):.2f}], "
                  f"peak RSS {statistics.median(rss):.0f} MiB  (targets: < 3 s; verdict < 150 MiB)")
    finally:
        cleanup(root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
