"""Trials at the speed of their training (issue 25, and 22's warm apps), measured side by side in one run.

Five measurements; within each, the systems run interleaved (A, B, then B, A ...) so that machine drift falls
on both alike. CPU is user + system of the whole command and every process it waited for (prefer it to
wall on a shared machine); the load average is printed before and after.

1. **digits**: ``ablate -m variable=lr seeds=10`` (30 trials, 2 slots, warm): wall clock against the per-slot
   sum of the trials' own training time (``train_s``, the loop alone, returned by the task). Target ≤ 2x.
   The command returns with the verdict's text; its PNGs are drawn after it by a detached process (not a
   child: its CPU is not in the figure), and the time until it is done is printed too. With ``--old REV``
   the same run of git revision REV (its ``ablate`` and its digits example, exported with ``git archive``,
   run with it first on ``PYTHONPATH``) is interleaved with it, and the per-seed verdict values of the two
   compared (the same seeds must give the same numbers). Without it, interleaved, the **bare floor**: no ablate
   at all, one ``python`` process that imports the example's module (numpy, torch, ``torch._dynamo``) and
   forks one worker per slot, each training its half of the same 30 configs and seeds (read from the ablate
   run's manifests) one after the other, with the same seeding and thread count, writing nothing. Its ratio
   is what the machine's interpreter start and imports leave of the target before ablate does anything.
2. **learned imports**: a task importing torch at module top whose first ``optimizer.step()`` imports
   ``torch._dynamo``; 1 slot, warm, ``launcher.learn_imports=true`` against ``false``. Per trial, the task
   returns its own process's CPU time at its end (a fork starts at 0: this is the trial's CPU up to the
   task's return). Target: learned ≤ 1/5 of unlearned from the third trial on.
3. **inline vs Hydra multirun**, no-op task: per-trial CPU as the slope (T(N2) - T(N1)) / (N2 - N1) of whole
   runs. Target ≤ 1/25.
4. **warm local no-op** (task importing torch at top, 2 slots) against the **fork floor**: the CPU of
   ``os.fork()`` + ``os._exit`` + ``waitpid`` of a process holding torch, per fork. Target ≤ 3x.
5. **app**: a ``@hydra.main`` app importing torch at module top, trained for a few steps; warm (the fork
   calls ``main()``) against fresh (``python app.py`` per trial): per-trial CPU (slope) beyond the app's own
   training CPU (``train_cpu_s`` it returns). Target warm ≤ 1/5 of fresh.

Usage::

    python benchmarks/trial_floor.py                     # all five, 2 repeats
    python benchmarks/trial_floor.py --only learn app --repeats 3
    python benchmarks/trial_floor.py --only digits --repeats 2 --old 73613bb   # before/after, interleaved
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _common import ABLATE, Timing, cleanup, make_noop_project, make_torch_project, summary, tempdir, timed
from warm_trials import REPO, make_digits_project

DYNAMO_TASK = '''
import time

import torch
from torch import nn


def run(cfg):
    model = nn.Linear(8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = model(torch.randn(4, 8)).sum()
    loss.backward()
    opt.step()  # the first step imports torch._dynamo (about 1 s of CPU) unless the warm parent holds it
    return {"m": float(cfg.seed), "cpu_s": time.process_time()}
'''

APP = '''
import time

import hydra
import torch
from torch import nn


@hydra.main(version_base="1.3", config_path="appconf", config_name="config")
def main(cfg):
    c0 = time.process_time()
    torch.manual_seed(cfg.seed)
    model = nn.Linear(16, 4)
    opt = torch.optim.SGD(model.parameters(), lr=cfg.lr)
    for _ in range(20):
        opt.zero_grad()
        model(torch.randn(32, 16)).pow(2).mean().backward()
        opt.step()
    return {"m": float(model.weight.sum()), "train_cpu_s": time.process_time() - c0}


if __name__ == "__main__":
    main()
'''


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def commit(proj: Path, msg: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "bench",
           "GIT_COMMITTER_EMAIL": "b@b"}
    for cmd in (["git", "add", "-A"], ["git", "commit", "-qm", msg]):
        subprocess.run(cmd, cwd=proj, env=env, check=True, capture_output=True)


def ablate(proj: Path, sweep: str, *args: str) -> Timing:
    return timed([ABLATE, "-m", "progress=off", f"hydra.sweep.dir={sweep}", *args], proj)


def results(sweep: Path) -> list[dict]:
    recs = [json.loads(p.read_text()) for p in sweep.glob("trials/*/seed=*/result.json")]
    return sorted(recs, key=lambda r: (r["started_at"], r.get("finished_at", "")))


def order(i: int, systems: tuple[str, str]) -> tuple[str, str]:
    return systems if i % 2 == 0 else (systems[1], systems[0])


def slope(a: list[Timing], b: list[Timing], dn: int) -> tuple[float, float]:
    return (statistics.median((y.cpu_s - x.cpu_s) / dn for x, y in zip(a, b, strict=True)),
            statistics.median((y.wall_s - x.wall_s) / dn for x, y in zip(a, b, strict=True)))


def plots_done(sweep: Path) -> float:
    """Seconds until the detached plot drawer of ``sweep`` lets go of its lock (0 when it already had)."""
    sys.path.insert(0, str(REPO))
    from ablate.record.sweepdir import SweepDir

    t0 = time.perf_counter()
    sd = SweepDir(sweep)
    sd.acquire()  # waits while the holder is the plot drawer
    sd.release()
    return time.perf_counter() - t0


def export(rev: str, dest: Path) -> Path:
    """``ablate``, its Hydra plugin and the examples of git revision ``rev``, with the project files the digits
    project copies, exported to ``dest``."""
    dest.mkdir(parents=True)
    names = ["ablate", "hydra_plugins", "examples", "conf", "dvc.yaml", "dvc.lock", "params.yaml"]
    archive = subprocess.run(["git", "-C", str(REPO), "archive", rev, *names], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    (dest / "data").mkdir()
    shutil.copy2(REPO / "data" / "digits.npz", dest / "data" / "digits.npz")
    return dest


def verdict_values(sweep: Path) -> dict[str, dict[str, float]]:
    return {a["arm"]: a["values"] for a in json.loads((sweep / "verdict.json").read_text())["arms"]}


BARE_DIGITS = '''
import json, os, random, sys
sys.path.insert(0, os.getcwd())
from examples.digits import task  # numpy, torch, torch._dynamo (and ablate, for log_step) at its top
import numpy as np, torch
trials, threads = json.load(open(sys.argv[1]))


class NS(dict):
    __getattr__ = dict.__getitem__


def ns(x):
    return NS({k: ns(v) for k, v in x.items()}) if isinstance(x, dict) else x


pipes = []
for half in (trials[0::2], trials[1::2]):
    r, w = os.pipe()
    if os.fork() == 0:
        torch.set_num_threads(threads)
        out = []
        for cfg, seed in half:
            random.seed(seed); np.random.seed(seed); torch.manual_seed(seed)
            out.append(task.train(ns(cfg))["train_s"])
        os.write(w, json.dumps(out).encode())
        os._exit(0)
    os.close(w)
    pipes.append(r)
done = []
for r in pipes:
    with os.fdopen(r) as f:
        done += json.loads(f.read())
    os.wait()
print(sum(done))
'''


def bare_trials(sweep: Path) -> tuple[list[tuple[dict, int]], int]:
    """The (config, seed) of every trial of an ablate run of the digits example, in start order, and its threads."""
    mans = [json.loads(p.read_text()) for p in sweep.glob("trials/*/seed=*/manifest.json")]
    mans.sort(key=lambda m: m["started_at"])
    return [(m["config"], m["seed"]) for m in mans], int(mans[0]["determinism"]["threads"] or 1)


def bench_digits(root: Path, repeats: int, old: str | None = None) -> None:
    systems = ("new", "old") if old else ("new", "bare")
    projs = {"new": make_digits_project(root / "digits")}
    envs: dict[str, dict[str, str] | None] = {"new": None}
    if old:
        src = export(old, root / "old-src")
        projs["old"] = make_digits_project(root / "digits-old", src)
        envs["old"] = {**os.environ, "PYTHONPATH": str(src)}
    values: dict[str, dict[str, dict[str, float]]] = {}
    ratios: dict[str, list[float]] = {}
    trials_file = root / "bare-trials.json"
    for r in range(repeats):
        for s in order(r, systems):  # the first repeat runs ablate first: the bare floor trains its configs
            if s == "bare":
                t = timed([sys.executable, "-c", BARE_DIGITS, str(trials_file)], projs["new"])
                train = float(t.stdout)
                ratios.setdefault(s, []).append(t.wall_s / (train / 2))
                print(f"  bare run {r}: wall {t.wall_s:.1f} s, cpu {t.cpu_s:.1f} s; sum(train_s) {train:.1f} s -> "
                      f"{train / 2:.1f} s per slot; wall / per-slot training = {ratios[s][-1]:.2f} "
                      f"(load {load()})", flush=True)
                continue
            proj = projs[s]
            sweep = proj / "outputs" / f"d{r}"
            t = timed([ABLATE, "-m", "progress=off", f"hydra.sweep.dir={sweep}", "variable=lr", "seeds=10",
                       "launcher.max_parallel=2"], proj, envs[s])
            drawn = plots_done(sweep)
            recs = results(sweep)
            train = sum(x["metrics"]["train_s"] for x in recs)
            task = sum(x["task_s"] for x in recs)
            values.setdefault(s, verdict_values(sweep))
            if s == "new" and not trials_file.exists():
                trials_file.write_text(json.dumps(bare_trials(sweep)))
            ratios.setdefault(s, []).append(t.wall_s / (train / 2))
            print(f"  {s} run {r}: wall {t.wall_s:.1f} s, cpu {t.cpu_s:.1f} s; sum(train_s) {train:.1f} s -> "
                  f"{train / 2:.1f} s per slot; wall / per-slot training = {ratios[s][-1]:.2f} (target <= 2); "
                  f"sum(task_s) {task:.1f} s; plots done {drawn:.1f} s after it returned "
                  f"(load {load()})", flush=True)
    for s, rs in ratios.items():
        print(f"  {s}: wall / per-slot training {summary(rs)} (median [min, max] of {len(rs)})")
    if "bare" in ratios:
        print(f"  ablate's ratio / the bare floor's (medians): "
              f"{statistics.median(ratios['new']) / statistics.median(ratios['bare']):.2f}")
    if old:
        same = values["new"] == values["old"]
        print(f"  per-seed verdict values of {old} and this tree: {'identical' if same else 'DIFFERENT'}")


def bench_learn(root: Path, repeats: int, n: int) -> None:
    proj = make_torch_project(root / "learn")
    (proj / "noop.py").write_text(DYNAMO_TASK)
    commit(proj, "dynamo task")
    per: dict[str, list[list[float]]] = {"learn": [], "no-learn": []}
    for r in range(repeats):
        for s in order(r, ("learn", "no-learn")):
            sweep = proj / "outputs" / f"{s}{r}"
            t = ablate(proj, str(sweep), "variable=x", f"seeds={n // 2}", "launcher.max_parallel=1",
                       f"launcher.learn_imports={'true' if s == 'learn' else 'false'}")
            cpu = [x["metrics"]["cpu_s"] for x in results(sweep)]
            per[s].append(cpu)
            print(f"  {s:8s} run {r}: whole run cpu {t.cpu_s:.1f} s; per-trial cpu in order (ms): "
                  f"{', '.join(f'{c * 1000:.0f}' for c in cpu)}", flush=True)
    learned = statistics.median(c for run in per["learn"] for c in run[2:])
    unlearned = statistics.median(c for run in per["no-learn"] for c in run[2:])
    print(f"  trials 3+: learned {learned * 1000:.0f} ms, unlearned {unlearned * 1000:.0f} ms CPU per trial: "
          f"1/{unlearned / learned:.1f} (target at most 1/5)")


def bench_inline(root: Path, repeats: int, sizes: tuple[int, int]) -> None:
    proj = make_noop_project(root / "inline")
    n1, n2 = sizes
    runs: dict[tuple[str, int], list[Timing]] = {}
    for r in range(repeats):
        for n in sizes:
            for s in order(r, ("inline", "hydra")):
                if s == "inline":
                    t = ablate(proj, f"outputs/i{n}_{r}", "variable=x", f"seeds={n // 2}", "launcher=inline")
                else:
                    t = timed([sys.executable, "noop_app.py", "-m", f"seed=range({n})",
                               f"hydra.sweep.dir=multirun/{n}_{r}"], proj)
                runs.setdefault((s, n), []).append(t)
    ic, _ = slope(runs["inline", n1], runs["inline", n2], n2 - n1)
    hc, _ = slope(runs["hydra", n1], runs["hydra", n2], n2 - n1)
    print(f"  per-trial CPU, slope N {n1}->{n2}: inline {ic * 1000:.1f} ms, Hydra multirun {hc * 1000:.1f} ms: "
          f"1/{hc / ic:.1f} (target at most 1/25)")


FORK_FLOOR = '''
import os, resource, sys, torch
n = int(sys.argv[1])
r0 = resource.getrusage(resource.RUSAGE_SELF); c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
for _ in range(n):
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
r1 = resource.getrusage(resource.RUSAGE_SELF); c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
cpu = (r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime + c1.ru_utime - c0.ru_utime + c1.ru_stime - c0.ru_stime)
print(cpu / n)
'''


def bench_local(root: Path, repeats: int, sizes: tuple[int, int]) -> None:
    proj = make_torch_project(root / "local")
    n1, n2 = sizes
    runs: dict[int, list[Timing]] = {n1: [], n2: []}
    floors = []
    for r in range(repeats):
        for n in (sizes if r % 2 == 0 else sizes[::-1]):
            runs[n].append(ablate(proj, f"outputs/l{n}_{r}", "variable=x", f"seeds={n // 2}",
                                  "launcher.max_parallel=2"))
            for _ in range(3):  # the floor's own measurement moves 2-3x between runs: many, beside every run
                out = subprocess.run([sys.executable, "-c", FORK_FLOOR, "100"], capture_output=True, text=True,
                                     check=True)
                floors.append(float(out.stdout))
    wc, ww = slope(runs[n1], runs[n2], n2 - n1)
    floor = statistics.median(floors)
    print(f"  warm local no-op (torch at top), slope N {n1}->{n2}: {wc * 1000:.1f} ms CPU, {ww * 1000:.0f} ms wall "
          f"per trial; fork floor (fork + exit + wait of a process holding torch, ms, {len(floors)} runs of 100 "
          f"beside the ablate runs) {summary([f * 1000 for f in floors])}: {wc / floor:.1f}x the median "
          f"(target at most 3x)")


def bench_app(root: Path, repeats: int, sizes: tuple[int, int]) -> None:
    proj = make_noop_project(root / "app")
    (proj / "app.py").write_text(APP)
    (proj / "appconf").mkdir()
    (proj / "appconf" / "config.yaml").write_text("seed: 1\nlr: 0.1\n")
    (proj / "conf" / "task" / "app.yaml").write_text("app: app.py\nmetric: m\nmetric_source: return\n")
    (proj / "conf" / "variable" / "lr.yaml").write_text("key: lr\nvalues: [0.2]\n")
    commit(proj, "torch app")
    n1, n2 = sizes
    runs: dict[tuple[str, int], list[Timing]] = {}
    train: dict[str, list[float]] = {"warm": [], "fresh": []}
    for r in range(repeats):
        for n in sizes:
            for s in order(r, ("warm", "fresh")):
                sweep = proj / "outputs" / f"{s}{n}_{r}"
                t = ablate(proj, str(sweep), "task=app", "variable=lr", f"seeds={n // 2}", "launcher.max_parallel=2",
                           f"launcher.warm={'true' if s == 'warm' else 'false'}")
                runs.setdefault((s, n), []).append(t)
                train[s] += [x["metrics"]["train_cpu_s"] for x in results(sweep)]
                print(f"  {s:5s} N={n:3d} run {r}: wall {t.wall_s:.1f} s, cpu {t.cpu_s:.1f} s", flush=True)
    beyond = {}
    for s in ("warm", "fresh"):
        c, w = slope(runs[s, n1], runs[s, n2], n2 - n1)
        tr = statistics.median(train[s])
        beyond[s] = c - tr
        print(f"  {s:5s}: per-trial CPU (slope N {n1}->{n2}) {c * 1000:.0f} ms, wall {w * 1000:.0f} ms; the app's own "
              f"training {tr * 1000:.1f} ms; beyond training {beyond[s] * 1000:.0f} ms")
    print(f"  warm / fresh beyond training: 1/{beyond['fresh'] / beyond['warm']:.1f} (target at most 1/5)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", nargs="*", default=["digits", "learn", "inline", "local", "app"])
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--learn-trials", type=int, default=8)
    ap.add_argument("--noop-sizes", type=int, nargs=2, default=[10, 100])
    ap.add_argument("--app-sizes", type=int, nargs=2, default=[6, 16])
    ap.add_argument("--old", metavar="REV", help="digits: also run git revision REV, interleaved")
    args = ap.parse_args(argv)
    root = tempdir("ablate-floor-")
    t0 = time.time()
    print(f"load average before: {load()} ({os.cpu_count()} CPUs)", flush=True)
    try:
        for name in args.only:
            print(f"\n{name}:", flush=True)
            if name == "digits":
                bench_digits(root, args.repeats, args.old)
            elif name == "learn":
                bench_learn(root, args.repeats, args.learn_trials)
            elif name == "inline":
                bench_inline(root, args.repeats, tuple(args.noop_sizes))
            elif name == "local":
                bench_local(root, args.repeats, tuple(args.noop_sizes))
            elif name == "app":
                bench_app(root, args.repeats, tuple(args.app_sizes))
            print(f"  (load average now: {load()})", flush=True)
    finally:
        cleanup(root)
    print(f"\n{time.time() - t0:.0f} s in all")
    return 0


if __name__ == "__main__":
    sys.exit(main())
