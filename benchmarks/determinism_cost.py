"""What strict determinism costs: the same trial under ``seeded`` and ``strict``, side by side.

    python benchmarks/determinism_cost.py                       # digits_mlp and charlm, 5 runs per mode
    python benchmarks/determinism_cost.py --tasks charlm --repeats 9 --threads 2 --json cost.json
    python benchmarks/determinism_cost.py --ops --threads 2     # single ops on the nondeterministic list

Each run is a fresh process (``--worker``) that seeds with :func:`ablate.trials.seeding.seed_everything` at
the same seed and calls the example task's function on its config from ``conf/task/<task>.yaml``
(``--set key=value`` overrides it), as a trial would. Runs alternate between the modes (seeded
first in even rounds, strict first in odd ones) so drifting machine load hits both alike; round ``i``
pairs the ``i``-th seeded run with the ``i``-th strict one.

Reported per task and mode: the task's own throughput metrics, ``samples_per_s`` (wall clock) and
``samples_per_cpu_s`` (process CPU time: steadier on a shared machine, meaningful with one thread),
as median [25th-75th percentile]; the slowdown strict/seeded as the median over rounds of
``seeded / strict`` throughput with its [min-max] over rounds; and whether every run's final
per-step fingerprint (``ablate.log_step``: loss and parameter digest) was bitwise the same.

``--ops`` times single ops from PyTorch's nondeterministic list instead (same input every time,
modes alternating, in one process) and counts the distinct results each mode gave: on a
multi-threaded CPU ``index_put_(accumulate=True)`` adds in a thread-dependent order under ``seeded``.

The load average is printed before and after: on a machine shared with other work, read the CPU-time
ratio. What this measures is CPU cost; on GPUs the ops on PyTorch's nondeterministic list are
reported to cost 2-5x under strict, which the examples here (CPU only) cannot show.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
MODES = ("seeded", "strict")
METRICS = ("samples_per_s", "samples_per_cpu_s")


# -- one run, in its own process -------------------------------------------------------------------
def worker(task: str, mode: str, seed: int, threads: int, sets: list[str]) -> dict[str, Any]:
    """Run ``conf/task/<task>.yaml``'s function once under ``mode`` and return its metrics and fingerprint."""
    import torch
    import yaml
    from omegaconf import OmegaConf

    from ablate.trials import fingerprint, seeding
    from ablate.trials.trial import import_callable

    torch.set_num_threads(threads)
    task_cfg = OmegaConf.load(REPO / "conf" / "task" / f"{task}.yaml")
    cfg = OmegaConf.create({"seed": seed, "determinism": mode, "task": task_cfg})
    for kv in sets:
        key, _, value = kv.partition("=")
        if OmegaConf.select(cfg, key) is not None or key.startswith("task."):
            OmegaConf.update(cfg, key, yaml.safe_load(value), merge=False)
    cfg = OmegaConf.create(OmegaConf.to_container(cfg, resolve=True))
    fn = import_callable(str(cfg.task.fn), REPO)
    applied = seeding.seed_everything(seed, mode)
    with tempfile.TemporaryDirectory() as tmp:
        steps = Path(tmp) / "steps.jsonl"
        t0 = time.perf_counter()
        with fingerprint.recording(steps):
            metrics = fn(cfg)
        wall_s = time.perf_counter() - t0
        lines = steps.read_text().splitlines() if steps.exists() else []
    return {"task": task, "mode": mode, "metrics": {k: float(v) for k, v in metrics.items()}, "wall_s": wall_s,
            "n_steps": len(lines), "last_step": json.loads(lines[-1]) if lines else None,
            "torch_flags": applied.get("torch_flags"), "threads": torch.get_num_threads()}


def _run_worker(task: str, mode: str, args: argparse.Namespace) -> dict[str, Any]:
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "MKL_NUM_THREADS": str(args.threads)}
    from ablate.trials.seeding import environment_for

    env.update(environment_for(mode, args.seed))  # as the local launcher sets them before the trial starts
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", task, mode, "--seed", str(args.seed),
           "--threads", str(args.threads), *[f"--set={s}" for s in args.set]]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{task} under {mode} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# -- statistics ------------------------------------------------------------------------------------
def _quartiles(xs: list[float]) -> tuple[float, float, float]:
    if len(xs) < 2:
        return xs[0], xs[0], xs[0]
    q = statistics.quantiles(xs, n=4, method="inclusive")
    return q[0], statistics.median(xs), q[2]


def summarise(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Medians, spreads and paired slowdowns from ``{mode: [run, ...]}`` (runs paired by index)."""
    out: dict[str, Any] = {"modes": {}, "slowdown": {}}
    for mode, rs in runs.items():
        m: dict[str, Any] = {}
        for metric in METRICS:
            lo, med, hi = _quartiles([r["metrics"][metric] for r in rs])
            m[metric] = {"median": med, "q25": lo, "q75": hi, "values": [r["metrics"][metric] for r in rs]}
        m["distinct_final_fingerprints"] = len({json.dumps(r["last_step"], sort_keys=True) for r in rs})
        m["final_metrics"] = {k: v for k, v in rs[0]["metrics"].items() if k not in METRICS}
        out["modes"][mode] = m
    for metric in METRICS:
        ratios = [s["metrics"][metric] / t["metrics"][metric] for s, t in zip(runs["seeded"], runs["strict"],
                                                                                strict=True)]
        out["slowdown"][metric] = {"median": statistics.median(ratios), "min": min(ratios), "max": max(ratios),
                                   "per_round": ratios}
    seeded_bits = {json.dumps(r["last_step"], sort_keys=True) for r in runs["seeded"]}
    strict_bits = {json.dumps(r["last_step"], sort_keys=True) for r in runs["strict"]}
    out["same_bits_across_modes"] = seeded_bits == strict_bits and len(seeded_bits) == 1
    return out


def _fmt(d: dict[str, float]) -> str:
    return f"{d['median']:9.1f} [{d['q25']:.1f}-{d['q75']:.1f}]"


def report(results: dict[str, dict[str, Any]], header: dict[str, Any]) -> str:
    """The side-by-side table printed at the end."""
    lines = [
        f"determinism cost: seeded vs strict, {header['repeats']} interleaved runs per mode, seed {header['seed']}, "
        f"{header['threads']} thread(s)",
        f"  torch {header['torch']}, python {header['python']}, {header['cpu']} ({header['cpu_count']} cores); "
        f"load average {header['load_before']:.2f} before, {header['load_after']:.2f} after",
        "",
        f"{'task':<12}{'mode':<8}{'samples/s (wall) median [IQR]':>34}{'samples/CPU-s median [IQR]':>34}"
        f"{'final fingerprints':>22}",
    ]
    for task, res in results.items():
        for mode in MODES:
            m = res["modes"][mode]
            n_bits = m["distinct_final_fingerprints"]
            bits = "identical" if n_bits == 1 else f"{n_bits} distinct"
            lines.append(f"{task:<12}{mode:<8}{_fmt(m['samples_per_s']):>34}{_fmt(m['samples_per_cpu_s']):>34}"
                         f"{bits:>22}")
        w, c = res["slowdown"]["samples_per_s"], res["slowdown"]["samples_per_cpu_s"]
        lines.append(f"{'':<12}{'strict slowdown (seeded/strict per round): wall':<50} {w['median']:.2f}x "
                     f"[{w['min']:.2f}-{w['max']:.2f}]   CPU {c['median']:.2f}x [{c['min']:.2f}-{c['max']:.2f}]")
        same = "yes" if res["same_bits_across_modes"] else "no"
        lines.append(f"{'':<12}seeded and strict ended with the same bits: {same}")
    return "\n".join(lines)


# -- single ops -------------------------------------------------------------------------------------
def op_costs(threads: int, repeats: int) -> dict[str, dict[str, Any]]:
    """Time ops on PyTorch's nondeterministic list under both modes (400k rows of 16 floats into 1000).

    Returns, per op: per mode the median wall and CPU milliseconds and the number of distinct results
    over ``repeats`` runs on the same input, and the slowdowns strict/seeded (ratio of medians).
    """
    import hashlib

    import torch
    import torch.nn.functional as F

    from ablate.trials import seeding

    torch.set_num_threads(threads)
    g = torch.Generator().manual_seed(0)
    n, rows, dim = 400_000, 1000, 16
    idx = torch.randint(0, rows, (n,), generator=g)
    src = torch.randn(n, dim, generator=g)
    weight0 = torch.randn(rows, dim, generator=g)
    offsets = torch.arange(0, n, 8)

    def grad_of(loss_fn: Any) -> Any:
        w = weight0.clone().requires_grad_()
        loss_fn(w).backward()
        return w.grad

    ops = {
        "index_add_": lambda: torch.zeros(rows, dim).index_add_(0, idx, src),
        "scatter_add_": lambda: torch.zeros(rows, dim).scatter_add_(0, idx[:, None].expand(n, dim), src),
        "index_put_(accumulate=True)": lambda: torch.zeros(rows, dim).index_put_((idx,), src, accumulate=True),
        "embedding backward": lambda: grad_of(lambda w: (F.embedding(idx, w) * src).sum()),
        "embedding_bag backward": lambda: grad_of(lambda w: F.embedding_bag(idx, w, offsets, mode="sum").sum()),
    }
    out: dict[str, dict[str, Any]] = {}
    for name, op in ops.items():
        times: dict[str, list[tuple[float, float]]] = {m: [] for m in MODES}
        bits: dict[str, set[str]] = {m: set() for m in MODES}
        for i in range(repeats + 1):  # round 0 warms up and is not counted
            for mode in (MODES if i % 2 == 0 else MODES[::-1]):
                seeding.seed_everything(0, mode)
                t0, c0 = time.perf_counter(), time.process_time()
                result = op()
                wall, cpu = time.perf_counter() - t0, time.process_time() - c0
                if i:
                    times[mode].append((wall * 1e3, cpu * 1e3))
                    bits[mode].add(hashlib.sha256(result.numpy().tobytes()).hexdigest())
        rec: dict[str, Any] = {}
        for mode in MODES:
            rec[mode] = {"wall_ms": statistics.median(t[0] for t in times[mode]),
                         "cpu_ms": statistics.median(t[1] for t in times[mode]), "distinct": len(bits[mode])}
        rec["slowdown_wall"] = rec["strict"]["wall_ms"] / rec["seeded"]["wall_ms"]
        rec["slowdown_cpu"] = rec["strict"]["cpu_ms"] / rec["seeded"]["cpu_ms"]
        out[name] = rec
    seeding.seed_everything(0, "seeded")
    return out


def op_report(res: dict[str, dict[str, Any]], header: dict[str, Any]) -> str:
    lines = [
        f"single ops, seeded vs strict: median of {header['repeats']} runs per mode on the same input, "
        f"{header['threads']} thread(s)",
        f"  torch {header['torch']}, python {header['python']}, {header['cpu']} ({header['cpu_count']} cores); "
        f"load average {header['load_before']:.2f} before, {header['load_after']:.2f} after",
        "",
        f"{'op':<30}{'seeded ms (wall/CPU)':>24}{'strict ms (wall/CPU)':>24}{'slowdown wall/CPU':>20}"
        f"{'distinct results seeded/strict':>33}",
    ]
    for name, r in res.items():
        s, t = r["seeded"], r["strict"]
        lines.append(f"{name:<30}{s['wall_ms']:>13.1f} / {s['cpu_ms']:<8.1f}{t['wall_ms']:>13.1f} / {t['cpu_ms']:<8.1f}"
                     f"{r['slowdown_wall']:>10.2f}x / {r['slowdown_cpu']:.2f}x"
                     f"{s['distinct']:>22} / {t['distinct']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tasks", nargs="+", default=["digits_mlp", "charlm"], help="conf/task/<name>.yaml to run")
    p.add_argument("--repeats", type=int, default=5, help="runs per mode and task (paired rounds)")
    p.add_argument("--threads", type=int, default=1, help="torch threads per run (1: CPU time is meaningful)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override the task config, e.g. --set task.steps=50")
    p.add_argument("--json", type=Path, help="also write every run and the summary here")
    p.add_argument("--ops", action="store_true", help="time single nondeterministic-list ops instead of tasks")
    p.add_argument("--worker", nargs=2, metavar=("TASK", "MODE"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args.worker[0], args.worker[1], args.seed, args.threads, args.set)))
        return 0
    if args.repeats < 2:
        p.error("--repeats must be at least 2 (a spread needs two rounds)")
    import torch

    from ablate.pin.pins import _cpu_model

    header = {"repeats": args.repeats, "seed": args.seed, "threads": args.threads, "torch": torch.__version__,
              "python": platform.python_version(), "cpu": _cpu_model(), "cpu_count": os.cpu_count(),
              "load_before": os.getloadavg()[0]}
    if args.ops:
        ops = op_costs(args.threads, args.repeats)
        header["load_after"] = os.getloadavg()[0]
        print(op_report(ops, header))
        if args.json:
            args.json.write_text(json.dumps({"header": header, "ops": ops}, indent=2))
        return 0
    results: dict[str, dict[str, Any]] = {}
    raw: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for task in args.tasks:
        runs: dict[str, list[dict[str, Any]]] = {m: [] for m in MODES}
        for i in range(args.repeats):
            for mode in (MODES if i % 2 == 0 else MODES[::-1]):
                r = _run_worker(task, mode, args)
                runs[mode].append(r)
                rate, cpu_rate = r["metrics"]["samples_per_s"], r["metrics"]["samples_per_cpu_s"]
                print(f"  {task} round {i + 1}/{args.repeats} {mode:<6}: {rate:.1f} samples/s, "
                      f"{cpu_rate:.1f} samples/CPU-s", file=sys.stderr, flush=True)
        raw[task] = runs
        results[task] = summarise(runs)
    header["load_after"] = os.getloadavg()[0]
    print(report(results, header))
    if args.json:
        args.json.write_text(json.dumps({"header": header, "results": results, "runs": raw}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
