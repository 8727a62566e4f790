"""Per-trial orchestration overhead with a no-op task, side by side in one run.

Systems, each run as a whole process on the same no-op task:

- ``ablate inline``: ``ablate -m variable=x seeds=N/2 launcher=inline`` (2 arms x N/2 seeds = N trials)
- ``ablate local``: the same with ``launcher=local`` (a process per trial, forked from a warm parent)
- ``hydra multirun``: a ``@hydra.main`` no-op app, ``-m seed='range(N)'`` (Hydra's basic sweeper/launcher)
- ``submitit local``: submitit's ``LocalExecutor.map_array`` of N no-op jobs

The systems run interleaved (each repeat in the opposite order to the last). The per-trial cost is
the slope between two sizes, (T(N2) - T(N1)) / (N2 - N1), which removes each
tool's fixed start-up cost (imports, composing the config once, writing the verdict). For the local
launchers the cost of a bare interpreter start (``python -c pass``) is also reported, since the
target counts overhead beyond the task's own interpreter start.

Usage::

    python benchmarks/overhead.py                 # sizes 10 100 1000, 3 repeats (about 15 min here)
    python benchmarks/overhead.py --sizes 10 100 --repeats 3 --submitit-max 100
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _common import ABLATE, Timing, cleanup, make_noop_project, summary, tempdir, timed


def run_system(name: str, n: int, proj: Path, run_id: int) -> Timing:
    py = sys.executable
    if name == "ablate inline":
        return timed([ABLATE, "-m", "variable=x", f"seeds={n // 2}", "launcher=inline", "progress=off",
                      f"hydra.sweep.dir=outputs/{name.replace(' ', '_')}_{n}_{run_id}"], proj)
    if name == "ablate local":
        return timed([ABLATE, "-m", "variable=x", f"seeds={n // 2}", "launcher=local", "progress=off",
                      f"hydra.sweep.dir=outputs/{name.replace(' ', '_')}_{n}_{run_id}"], proj)
    if name == "hydra multirun":
        return timed([py, "noop_app.py", "-m", f"seed=range({n})",
                      f"hydra.sweep.dir=multirun/{n}_{run_id}"], proj)
    if name == "submitit local":
        return timed([py, "submitit_run.py", str(n), f"submitit/{n}_{run_id}"], proj)
    raise ValueError(name)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--submitit-max", type=int, default=100,
                    help="largest N for submitit (its LocalExecutor starts every job at once)")
    args = ap.parse_args(argv)
    systems = ["ablate inline", "hydra multirun", "ablate local", "submitit local"]
    root = tempdir("ablate-bench-")
    proj = make_noop_project(root / "proj")
    try:
        bare = [timed([sys.executable, "-c", "pass"], proj) for _ in range(10)]
        interp_wall = statistics.median(t.wall_s for t in bare)
        interp_cpu = statistics.median(t.cpu_s for t in bare)
        results: dict[str, dict[int, list[Timing]]] = {s: {} for s in systems}
        for r in range(args.repeats):  # interleaved: A, B, C, D then D, C, B, A, so drift falls on all alike
            for n in args.sizes:
                for s in (systems if r % 2 == 0 else systems[::-1]):
                    if s == "submitit local" and n > args.submitit_max:
                        continue
                    results[s].setdefault(n, []).append(run_system(s, n, proj, r))
        for n in args.sizes:
            for s in systems:
                if n not in results[s]:
                    continue
                walls = [t.wall_s for t in results[s][n]]
                cpus = [t.cpu_s for t in results[s][n]]
                print(f"{s:15s} N={n:5d}  wall {summary(walls)} s  cpu {summary(cpus)} s", flush=True)
        print()
        print(f"bare interpreter start (python -c pass): wall {interp_wall * 1000:.1f} ms, "
              f"cpu {interp_cpu * 1000:.1f} ms")
        print()
        print("per-trial cost = slope between sizes (median of repeats), milliseconds:")
        slopes: dict[str, tuple[float, float]] = {}
        for s in systems:
            ns = sorted(results[s])
            if len(ns) < 2:
                continue
            n1, n2 = ns[0], ns[-1]
            w = [(b.wall_s - a.wall_s) / (n2 - n1) for a, b in zip(results[s][n1], results[s][n2], strict=True)]
            c = [(b.cpu_s - a.cpu_s) / (n2 - n1) for a, b in zip(results[s][n1], results[s][n2], strict=True)]
            slopes[s] = (statistics.median(w), statistics.median(c))
            print(f"  {s:15s} N {n1}->{n2}: wall {summary([x * 1000 for x in w])}  "
                  f"cpu {summary([x * 1000 for x in c])}")
        print()
        if "ablate inline" in slopes and "hydra multirun" in slopes:
            a, h = slopes["ablate inline"], slopes["hydra multirun"]
            print(f"inline vs Hydra basic multirun, per trial: cpu {a[1] * 1000:.1f} ms vs {h[1] * 1000:.1f} ms "
                  f"= 1/{h[1] / a[1]:.1f}  (target: at most 1/10); wall 1/{h[0] / a[0]:.1f}")
        if "ablate local" in slopes and "submitit local" in slopes:
            a, s2 = slopes["ablate local"], slopes["submitit local"]
            a_net = (a[0] - interp_wall, a[1] - interp_cpu)
            s_net = (s2[0] - interp_wall, s2[1] - interp_cpu)
            print(f"local vs submitit LocalExecutor, per trial beyond an interpreter start: "
                  f"wall {a_net[0] * 1000:.0f} ms vs {s_net[0] * 1000:.0f} ms = 1/{s_net[0] / a_net[0]:.1f}, "
                  f"cpu {a_net[1] * 1000:.0f} ms vs {s_net[1] * 1000:.0f} ms = 1/{s_net[1] / a_net[1]:.1f}  "
                  "(target: at most 1/3)")
    finally:
        cleanup(root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
