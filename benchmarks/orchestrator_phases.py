"""Where the orchestrator's fixed cost goes, phase by phase (issue 42).

Runs ``ablate -m variable=lr seeds=N`` on a git + DVC copy of the digits example in this process (the CLI's own
``main``), with each phase's function wrapped to measure this process's CPU time (``time.process_time``: every
thread of the orchestrator) and wall clock, exclusive of the phases nested in it, and the CPU of the processes it
waited for in that phase (git, DVC, the warm parent with its trials: ``RUSAGE_CHILDREN``). The phases:

- **start-up**: interpreter start and imports until the command line is parsed (measured as this process's CPU
  before ``main``, imports of ``ablate.cli.main`` included, plus what ``main`` does before composing);
- **compose**: Hydra's composition of the config;
- **planning**: options, arms and their proofs (:func:`ablate.orchestrate.pipeline.prepare`), with the start of
  the early warm parent;
- **pinning**: the git snapshot, untracked and ignored files, DVC hashes and content digests, the environment,
  the config files' hashes;
- **sweep dir**: claiming it and writing ``ablation.yaml`` (the rest of ``create``);
- **warm parent start**: taking over (or starting) the warm parent and waiting for its ready report, less the
  verdict's pre-import;
- **verdict pre-import**: :func:`ablate.judge.verdict.preimport`;
- **trials**: the launch less the two above: forking, monitoring and the orchestrator's per-trial records; its
  children column is the warm parent's and the trials' CPU (training included);
- **collection**: ``results.csv``;
- **verdict**: statistics, ``verdict.json``, ``verdict.md``;
- **plots**: starting the detached drawer (its own CPU is not the command's; the time it takes after the command
  returns is printed);
- **rest**: whatever the phases above leave of the whole command (the loading of the plan, locks, exit).

Usage::

    python benchmarks/orchestrator_phases.py                # seeds=10 (the README example) and seeds=3
    python benchmarks/orchestrator_phases.py --seeds 3 --repeats 3

The table it prints (median of the repeats per phase) is in docs/design-notes.md ("The fixed cost of an ablation").
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

PHASES = ("start-up", "compose", "planning", "pinning", "sweep dir", "warm parent start", "verdict pre-import",
          "trials", "collection", "verdict", "plots", "rest")

CHILD = r'''
import json, os, resource, sys, time
t_start = time.process_time()
sys.path.insert(0, sys.argv[1])
from orchestrator_phases import instrument
import ablate.cli.main as cli
totals = instrument()
totals["start-up"] = [time.process_time(), 0.0, 0.0]  # wall from exec is not known here: CPU only
w0 = time.perf_counter()
code = cli.main(sys.argv[3:])
wall = time.perf_counter() - w0
c = resource.getrusage(resource.RUSAGE_CHILDREN)
out = {"phases": totals, "cpu": time.process_time(), "wall": wall, "children": c.ru_utime + c.ru_stime,
       "code": code}
with open(sys.argv[2], "w") as fh:
    json.dump(out, fh)
os._exit(0)  # as the command ends (ablate.cli.main.leave): no teardown of the modules
'''


def instrument() -> dict[str, list[float]]:
    """Wrap the orchestrator's phase functions; returns ``{phase: [cpu_s, wall_s, children_cpu_s]}`` (exclusive of
    nested phases), filled in as the command runs."""
    import ablate.orchestrate.pipeline as pipeline
    import ablate.plan.compose as compose
    import ablate.record.results as results
    from ablate.pin import ignored
    from ablate.pin import pins as pins_mod
    from ablate.trials.launchers import local
    from ablate.trials.warm import starter

    totals: dict[str, list[float]] = {p: [0.0, 0.0, 0.0] for p in PHASES}
    stack: list[list[float]] = []  # per open phase: time taken by the phases nested in it

    def now() -> tuple[float, float, float]:
        c = resource.getrusage(resource.RUSAGE_CHILDREN)
        return time.process_time(), time.perf_counter(), c.ru_utime + c.ru_stime

    def wrap(phase: str, fn):  # type: ignore[no-untyped-def]
        def wrapped(*args, **kwargs):  # type: ignore[no-untyped-def]
            start = now()
            stack.append([0.0, 0.0, 0.0])
            try:
                return fn(*args, **kwargs)
            finally:
                nested = stack.pop()
                spent = [b - a for a, b in zip(start, now(), strict=True)]
                for i in range(3):
                    totals[phase][i] += spent[i] - nested[i]
                    if stack:
                        stack[-1][i] += spent[i]
        return wrapped

    compose.compose = wrap("compose", compose.compose)
    pipeline.prepare = wrap("planning", pipeline.prepare)
    for name in ("pin_code", "pin_data", "snapshot_code", "capture_environment"):
        setattr(pins_mod, name, wrap("pinning", getattr(pins_mod, name)))
    ignored.find = wrap("pinning", ignored.find)
    pipeline.hash_config_files = wrap("pinning", pipeline.hash_config_files)
    pipeline.create = wrap("sweep dir", pipeline.create)
    starter.WarmParent.__init__ = wrap("warm parent start", starter.WarmParent.__init__)
    local.LocalLauncher.launch = wrap("trials", local.LocalLauncher.launch)
    pipeline.write_results = wrap("collection", pipeline.write_results)
    results.write_results = pipeline.write_results
    execute = pipeline.execute

    def execute_wrapped(*args, **kwargs):  # type: ignore[no-untyped-def]
        # execute imports the verdict's module itself (numpy: off the command's start): wrapped once it is needed
        import ablate.judge.verdict as verdict

        verdict.preimport = wrap("verdict pre-import", verdict.preimport)
        verdict.write_verdict = wrap("verdict", verdict.write_verdict)
        verdict.draw_plots_in_background = wrap("plots", verdict.draw_plots_in_background)
        return execute(*args, **kwargs)

    pipeline.execute = wrap("rest", execute_wrapped)
    return totals


def plots_done(sweep: Path, timeout_s: float = 120.0) -> float:
    """Seconds until the detached drawer has written the plots (verdict.json no longer marks them pending)."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout_s:
        try:
            if not (json.loads((sweep / "verdict.json").read_text()).get("plots") or {}).get("pending"):
                return time.perf_counter() - t0
        except (OSError, ValueError):
            pass
        time.sleep(0.05)
    return float("nan")


def run_once(proj: Path, seeds: int, i: int) -> dict:
    out = proj / f"phases-{seeds}-{i}.json"
    sweep = proj / "outputs" / f"p{seeds}_{i}"
    w0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", CHILD, str(Path(__file__).parent), str(out), "-m", "variable=lr",
                           f"seeds={seeds}", "progress=off", f"hydra.sweep.dir={sweep}"], cwd=proj,
                          capture_output=True, text=True, check=False)
    whole = time.perf_counter() - w0
    if proc.returncode != 0 or not out.exists():
        raise RuntimeError(f"ablate failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    rec = json.loads(out.read_text())
    rec["whole_wall"] = whole
    rec["plots_after"] = plots_done(sweep)
    ph = rec["phases"]
    measured = [sum(v[i] for k, v in ph.items() if k != "rest") for i in range(3)]
    ph["rest"][0] = rec["cpu"] - measured[0]  # everything not inside a named phase (rest's own wrapper included)
    ph["rest"][1] = whole - measured[1]
    ph["rest"][2] = rec["children"] - measured[2]
    return rec


def main(argv: list[str] | None = None) -> int:
    from _common import cleanup, tempdir
    from warm_trials import make_digits_project

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[10, 3], help="seeds per arm, one profile each")
    p.add_argument("--repeats", type=int, default=3, help="runs per profile; the table shows medians (default 3)")
    args = p.parse_args(argv)
    root = tempdir("ablate-phases-")
    try:
        proj = make_digits_project(root / "digits")
        for seeds in args.seeds:
            recs = [run_once(proj, seeds, i) for i in range(args.repeats)]
            loads = os.getloadavg()[0]
            print(f"\nseeds={seeds} ({3 * seeds} trials), median of {args.repeats} (load {loads:.1f} at the end)")
            print("| phase | orchestrator CPU (s) | wall (s) | its children's CPU (s) |")
            print("|---|---|---|---|")
            for phase in PHASES:
                cols = [statistics.median(r["phases"][phase][i] for r in recs) for i in range(3)]
                wall = "" if phase == "start-up" else f"{cols[1]:.2f}"
                print(f"| {phase} | {cols[0]:.2f} | {wall} | {cols[2]:.2f} |")
            cpu = statistics.median(r["cpu"] for r in recs)
            ch = statistics.median(r["children"] for r in recs)
            wall = statistics.median(r["whole_wall"] for r in recs)
            print(f"| **whole command** | {cpu:.2f} | {wall:.2f} | {ch:.2f} |")
            print(f"plots drawn {statistics.median(r['plots_after'] for r in recs):.1f} s after the command returned")
    finally:
        cleanup(root)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
