"""SLURM packing (``launcher.trials_per_job=k``): warm packed jobs, fresh packed jobs, one trial per job.

Runs a task that imports torch at module top and does nothing else (``--task noop``: no import at all),
2 arms x ``--seeds`` seeds, through ``launcher=slurm`` with ``wait=true``, as three systems:

- ``warm``: ``trials_per_job=K``, ``launcher.warm=true`` (each trial a fork of one warm parent per job);
- ``fresh``: ``trials_per_job=K``, ``launcher.warm=false`` (each trial a fresh Python process);
- ``k1``: one trial per job (``trials_per_job=1``).

The systems are interleaved, rotating which goes first (warm, fresh, k1; fresh, k1, warm; ...), so that
machine drift falls on all alike. Per system it reports, per trial: the whole ``ablate`` run's wall
clock / N, the jobs' own wall (sum of ``sacct`` Elapsed over the jobs / N) and the jobs' CPU (sum of
``sacct`` TotalCPU, user + system of every process of the job, the warm parent and its forks included /
N). The jobs run under slurmd, outside this process's children, so their CPU comes from SLURM's
accounting, not from ``getrusage``. A bare ``python -c "import torch"`` is measured in the same run
for scale. Needs a SLURM cluster with accounting (``bash ablate/trials/launchers/slurm/cluster.sh start``
gives a local one).

Usage::

    python benchmarks/slurm_packing.py                         # 20 trials, k = 10, 2 repeats, torch task
    python benchmarks/slurm_packing.py --seeds 25 --k 25 --repeats 3 --systems warm fresh
    python benchmarks/slurm_packing.py --task noop --systems warm k1
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _common import ABLATE, Timing, cleanup, make_noop_project, make_torch_project, summary, tempdir, timed

SYSTEMS = ("warm", "fresh", "k1")


def slurm_seconds(text: str) -> float:
    """``sacct``'s ``[DD-][HH:]MM:SS[.mmm]`` as seconds."""
    days = 0
    if "-" in text:
        d, text = text.split("-", 1)
        days = int(d)
    parts = [float(p) for p in text.split(":")]
    while len(parts) < 3:
        parts.insert(0, 0.0)
    h, m, s = parts
    return days * 86400 + h * 3600 + m * 60 + s


def job_accounting(sd: Path, timeout_s: float = 60) -> tuple[float, float, int]:
    """Sum over the sweep's jobs of SLURM's Elapsed and TotalCPU (seconds), and the number of jobs.

    TotalCPU of a job's allocation row (without ``-X``, which shows 0 there) sums all its steps (the srun
    step runs submitit, the trials, the warm parent and its forks: every process the step waited for).
    Waits until accounting has every job COMPLETED with its CPU (slurmdbd lags).
    """
    ids = sorted({j["job_id"] for j in json.loads((sd / "slurm" / "jobs.json").read_text())["jobs"]})
    arrays = sorted({i.split("_")[0] for i in ids})
    end = time.monotonic() + timeout_s
    while True:
        out = subprocess.run(["sacct", "-n", "-P", "-j", ",".join(arrays),
                              "--format=JobID,State,Elapsed,TotalCPU"], capture_output=True, text=True,
                             check=True).stdout
        rows = {r[0]: r for r in (line.split("|") for line in out.splitlines()) if r[0] in ids}
        if len(rows) == len(ids) and all(r[1] == "COMPLETED" for r in rows.values()) and all(
                slurm_seconds(r[3]) > 0 for r in rows.values()):
            break
        if time.monotonic() > end:
            raise RuntimeError(f"sacct has not every job of {sd} completed with CPU recorded:\n{out}")
        time.sleep(1)
    return (sum(slurm_seconds(r[2]) for r in rows.values()), sum(slurm_seconds(r[3]) for r in rows.values()),
            len(rows))


def run_once(proj: Path, system: str, seeds: int, k: int, i: int) -> tuple[Timing, float, float, int]:
    """One ablation of ``system``: its whole run's Timing, its jobs' summed Elapsed and TotalCPU, its job count."""
    sweep = proj / "outputs" / f"{system}-{i}"
    env = {k_: v for k_, v in os.environ.items() if not k_.startswith("SLURM_")}
    k_sys = 1 if system == "k1" else k
    t = timed([ABLATE, "-m", "variable=x", f"seeds={seeds}", "launcher=slurm", f"launcher.trials_per_job={k_sys}",
               f"launcher.warm={'false' if system == 'fresh' else 'true'}", "wait=true", "progress=off",
               f"hydra.sweep.dir={sweep}"], cwd=proj, env=env)
    bad = [p for p in sweep.glob("trials/*/seed=*/result.json") if json.loads(p.read_text())["status"] != "ok"]
    if bad or len(list(sweep.glob("trials/*/seed=*/result.json"))) != 2 * seeds:
        raise RuntimeError(f"{system} run {i}: not every trial ok ({bad})")
    elapsed, cpu, n_jobs = job_accounting(sweep)
    return t, elapsed, cpu, n_jobs


def main(argv: list[str] | None = None) -> int:
    """Measure and print the comparison; ``--json PATH`` also writes it."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=10, help="seeds per arm (2 arms)")
    ap.add_argument("--k", type=int, default=10, help="trials per job of the packed systems")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--task", choices=("torch", "noop"), default="torch")
    ap.add_argument("--systems", nargs="+", choices=SYSTEMS, default=list(SYSTEMS))
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    n = 2 * args.seeds
    systems = list(args.systems)
    root = tempdir("ablate-bench-pack-")
    rows: dict[str, list[dict[str, float]]] = {s: [] for s in systems}
    bare: list[Timing] = []
    try:
        proj = (make_torch_project if args.task == "torch" else make_noop_project)(root / "proj")
        for i in range(args.repeats):
            order = systems[i % len(systems):] + systems[:i % len(systems)]  # each system goes first in turn
            for s in order:
                t, elapsed, cpu, n_jobs = run_once(proj, s, args.seeds, args.k, i)
                rows[s].append({"wall_s": t.wall_s, "jobs_elapsed_s": elapsed, "jobs_cpu_s": cpu, "jobs": n_jobs})
                print(f"{s:5s} run {i}: {t.wall_s:.2f} s wall, {n_jobs} job(s): {elapsed:.1f} s elapsed, "
                      f"{cpu:.2f} s cpu", file=sys.stderr, flush=True)
                if args.task == "torch":
                    bare.append(timed([sys.executable, "-c", "import torch"], proj))
    finally:
        cleanup(root)
    out: dict[str, object] = {"trials": n, "k": args.k, "task": args.task, "runs": rows}
    print(f"{n} trials ({args.task} task), per trial, median [min, max] of {args.repeats} interleaved run(s):")
    med: dict[str, dict[str, float]] = {}
    for s in systems:
        w = [r["wall_s"] / n for r in rows[s]]
        e = [r["jobs_elapsed_s"] / n for r in rows[s]]
        c = [r["jobs_cpu_s"] / n for r in rows[s]]
        med[s] = {"wall_s": statistics.median(w), "jobs_elapsed_s": statistics.median(e),
                  "jobs_cpu_s": statistics.median(c)}
        label = "k=1" if s == "k1" else f"k={args.k} {s}"
        print(f"  {label:10s}: ablate wall {summary(w)} s, jobs' own wall {summary(e)} s, jobs' cpu {summary(c)} s")
    if bare:
        bc = statistics.median(b.cpu_s for b in bare)
        bw = statistics.median(b.wall_s for b in bare)
        print(f"bare `python -c \"import torch\"`: wall {bw:.3f} s, cpu {bc:.3f} s (median of {len(bare)})")
        out["bare_import_torch"] = {"wall_s": bw, "cpu_s": bc}
    if "warm" in med and "fresh" in med:
        f, w_ = med["fresh"], med["warm"]
        print(f"fresh / warm per trial: {f['jobs_cpu_s'] / w_['jobs_cpu_s']:.2f} x cpu, "
              f"{f['jobs_elapsed_s'] / w_['jobs_elapsed_s']:.2f} x jobs' wall, "
              f"{f['wall_s'] / w_['wall_s']:.2f} x ablate wall")
    if "warm" in med and "k1" in med:
        k1, w_ = med["k1"], med["warm"]
        print(f"one trial per job / k={args.k} warm: {k1['jobs_cpu_s'] / w_['jobs_cpu_s']:.2f} x cpu, "
              f"{k1['wall_s'] / w_['wall_s']:.2f} x ablate wall")
    out["median_per_trial"] = med
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
