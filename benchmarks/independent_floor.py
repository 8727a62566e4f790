"""The fixed cost of an ablation, against a floor written outside the project (issue 42).

**The floor** (``floor`` sub-command) is what the README example's compute needs with no orchestrator at all: one
``python`` process imports the example's task module (``examples.digits.task``: numpy, torch and ``torch._dynamo``
at its top), composes the ablation's configs with Hydra's own compose API (one composition per arm, the variable's
key overridden, the same ``conf/``; each of the arms x seeds trial configs is then that arm's config with its
``seed``), forks ``--slots`` workers that pull trials from one shared queue, and in each trial seeds python's
``random``, numpy and torch from the trial's seed with 1 torch thread (what ablate does under
``determinism=seeded``), then calls ``task.train(cfg)``. It writes nothing: no record, no pin, no verdict; it prints
one line, the sum of the trials' ``train_s`` (the training loops' own wall-clock seconds).

**The comparison** (the default) builds a git + DVC copy of the digits example (as ``tests/conftest.py`` does), then
for each ``--seeds`` value runs ``ablate -m variable=lr seeds=N`` and the floor with the same arms and seeds in
interleaved pairs (ablate, floor; floor, ablate; ...), so drift in the machine's speed falls on both alike. Each run
is a whole process timed from outside: wall clock, and CPU = user + system of it and every process it waited for
(``resource.getrusage(RUSAGE_CHILDREN)``; the PNG plots ablate draws in a detached process after it returns are not
in it, as they are not in its wall clock: the next run starts once they are drawn). The 1-minute load average is
printed beside each run. It reports per seeds value ablate's and the floor's medians [min, max], and the ratios
ablate / floor of the medians and of each pair (min-max over the pairs).

``--busy`` runs one busy loop (a ``python`` process spinning, the issue's "busy loop beside it") for the whole
comparison: on a 2-core machine it takes a core from both alike.

``--own-session`` puts each floor worker in a session of its own, as ablate puts each trial: on a kernel that shares
CPU among sessions (autogroup), a busy machine otherwise gives ablate's trials more CPU per second than the floor's
workers, and the wall ratio under load says more about the scheduler than about ablate (its CPU is unchanged).

Usage::

    python benchmarks/independent_floor.py                          # README example (seeds=10) and seeds=3, 3 pairs
    python benchmarks/independent_floor.py --seeds 10 --pairs 4 --busy --own-session
    cd PROJECT && python /path/to/benchmarks/independent_floor.py floor --seeds 10   # the floor alone

Results: docs/design-notes.md ("The fixed cost of an ablation") and README's Performance table.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _common import ABLATE, Timing, cleanup, summary, tempdir, timed
from orchestrator_phases import plots_done
from warm_trials import make_digits_project

#: The README example: its variable, whose treatment values are read from ``conf/variable/lr.yaml``.
VARIABLE = "lr"


def floor(seeds: int, slots: int, conf: Path, own_session: bool = False) -> float:
    """Run the floor in the current directory (a project with ``conf/`` and ``examples/digits``).

    Parameters
    ----------
    seeds : int
        Seeds per arm: 0..seeds-1, as ``ablate`` gives an ``fn`` task.
    slots : int
        Worker processes forked from this one (ablate's ``launcher.max_parallel``, 2 by default on 2 cores).
    conf : Path
        The project's config dir (``conf/``).
    own_session : bool
        Each worker calls ``os.setsid()``, as each of ablate's trials runs in a session of its own. Where the kernel
        groups CPU time by session (``/proc/sys/kernel/sched_autogroup_enabled`` = 1), every session gets an equal
        share of a busy machine, so under load a worker in its own session gets more CPU per second than one in
        the floor's: wall ratios under load compare alike only with this set (CPU time is the same either way).

    Returns
    -------
    float
        The sum of the trials' ``train_s`` (s).
    """
    import multiprocessing
    import random

    sys.path.insert(0, os.getcwd())
    import numpy as np
    import torch
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from examples.digits import task  # numpy, torch and torch._dynamo at its top (and ablate, for its log_step)

    with initialize_config_dir(config_dir=str(conf.absolute()), version_base="1.3"):
        control = compose("ablate", overrides=[f"variable={VARIABLE}"])
        key = control.variable.key
        arms = [control] + [compose("ablate", overrides=[f"variable={VARIABLE}", f"{key}={v}"])
                            for v in control.variable["values"]]
    configs = []
    for arm in arms:
        for seed in range(seeds):
            cfg = OmegaConf.to_container(arm, resolve=True)
            cfg["seed"] = seed
            configs.append(OmegaConf.create(cfg))

    ctx = multiprocessing.get_context("fork")
    queue, done = ctx.SimpleQueue(), ctx.SimpleQueue()
    for i in range(len(configs)):
        queue.put(i)
    for _ in range(slots):
        queue.put(None)

    def worker() -> None:
        if own_session:
            os.setsid()
        torch.set_num_threads(1)
        while (i := queue.get()) is not None:
            cfg = configs[i]
            random.seed(cfg.seed)
            np.random.seed(cfg.seed)
            torch.manual_seed(cfg.seed)
            done.put(task.train(cfg)["train_s"])

    procs = [ctx.Process(target=worker) for _ in range(slots)]
    for p in procs:
        p.start()
    train_s = [done.get() for _ in configs]
    for p in procs:
        p.join()
        if p.exitcode != 0:
            raise SystemExit(f"a floor worker exited with {p.exitcode}")
    return sum(train_s)


def load() -> str:
    return f"{os.getloadavg()[0]:.1f}"


def compare(seeds_list: list[int], pairs: int, busy: bool, own_session: bool = False) -> None:
    root = tempdir("ablate-floor-")
    spinner = None
    try:
        proj = make_digits_project(root / "digits")
        if busy:
            spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        print(f"load before: {' '.join(f'{x:.1f}' for x in os.getloadavg())}; busy loop: {'on' if busy else 'off'}",
              flush=True)
        for seeds in seeds_list:
            runs: dict[str, list[Timing]] = {"ablate": [], "floor": []}
            for i in range(pairs):
                for system in ("ablate", "floor") if i % 2 == 0 else ("floor", "ablate"):
                    if system == "ablate":
                        cmd = [ABLATE, "-m", f"variable={VARIABLE}", f"seeds={seeds}", "progress=off",
                               f"hydra.sweep.dir=outputs/s{seeds}_{i}"]
                    else:
                        cmd = [sys.executable, __file__, "floor", "--seeds", str(seeds),
                               *(["--own-session"] if own_session else [])]
                    t = timed(cmd, proj)
                    if system == "ablate":  # its detached plot drawer ends before the next run starts, untimed
                        plots_done(proj / "outputs" / f"s{seeds}_{i}")
                    runs[system].append(t)
                    print(f"  seeds={seeds} pair {i + 1} {system:6}: wall {t.wall_s:5.1f} s, CPU {t.cpu_s:5.1f} s "
                          f"(load {load()})", flush=True)
            a, f = runs["ablate"], runs["floor"]
            for what in ("wall_s", "cpu_s"):
                xa, xf = [getattr(t, what) for t in a], [getattr(t, what) for t in f]
                pair = [x / y for x, y in zip(xa, xf, strict=True)]
                print(f"seeds={seeds} {what[:-2]:4}: ablate {summary(xa)} s, floor {summary(xf)} s; ratio of medians "
                      f"{statistics.median(xa) / statistics.median(xf):.2f}x, per pair {summary(pair)}", flush=True)
    finally:
        if spinner is not None:
            spinner.kill()
            spinner.wait()
        cleanup(root)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd")
    f = sub.add_parser("floor", help="run the floor in the current directory (the project root)")
    f.add_argument("--seeds", type=int, default=10, help="seeds per arm (default 10)")
    f.add_argument("--slots", type=int, default=2, help="worker processes (default 2)")
    f.add_argument("--conf", type=Path, default=Path("conf"), help="the project's config dir (default conf/)")
    f.add_argument("--own-session", action="store_true", help="each worker in a session of its own (os.setsid)")
    p.add_argument("--seeds", type=int, nargs="+", default=[10, 3], help="seeds per arm, one comparison each")
    p.add_argument("--pairs", type=int, default=3, help="interleaved pairs per comparison (default 3)")
    p.add_argument("--busy", action="store_true", help="run a busy loop beside the comparison")
    p.add_argument("--own-session", action="store_true", help="the floor's workers each in a session of their own")
    args = p.parse_args(argv)
    if args.cmd == "floor":
        print(f"{floor(args.seeds, args.slots, args.conf, args.own_session):.3f}")
        return 0
    compare(args.seeds, args.pairs, args.busy, args.own_session)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
