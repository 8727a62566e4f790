"""``ablate`` without ``-m``: one trial of the control, in this process, like a Hydra single run.

It runs in Hydra's run dir (``hydra.run.dir``) and writes config.yaml, manifest.json and
result.json there. The code is the live working tree (as with any Hydra run); the commit and
whether the tree is dirty are recorded in the manifest. The task (any form) runs in ``<run dir>/work``,
a mirror of the live project (:func:`ablate.trials.workdir.live_workdir`), so what it writes to a
relative path (a ``chdir=false`` app's metrics file, a checkpoint) lands in the run dir, never in the
live tree.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from omegaconf import OmegaConf

from ablate.errors import ConfigError, PinError, UserError
from ablate.orchestrate.options import parse_options
from ablate.pin import pins
from ablate.plan.app_config import resolve_container
from ablate.plan.hydra_semantics import trial_hydra
from ablate.record.sweepdir import TrialPaths, dump_yaml, write_atomic, write_json
from ablate.trials import seeding
from ablate.trials.tasks.interface import TaskOutput, attach, check_app_seed_key, get_form, import_callable, run_fn
from ablate.trials.trial import TaskContractError, coerce_metrics
from ablate.trials.workdir import live_workdir


def single_trial(cfg: Any) -> dict[str, float]:
    """Hydra task function: run the control once at ``cfg.seed`` and record it in the run dir.

    A user mistake (bad task path, missing metric ...) prints one line and exits 2.
    """
    try:
        return _single_trial(cfg)
    except UserError as exc:
        print(f"ablate: error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except TaskContractError as exc:  # the task returned no number (a string, a list ...): the user's to fix
        print(f"ablate: error: `task.fn`: {exc}. Fix: return a dict of metric name to number, e.g. "
              f"{{'{cfg.task.get('metric') or 'val_acc'}': 0.97}}", file=sys.stderr)
        sys.exit(2)


def _single_trial(cfg: Any) -> dict[str, float]:
    out_dir = Path(HydraConfig.get().runtime.output_dir)
    container = OmegaConf.to_container(cfg, resolve=not cfg.task.get("app"))
    opts = parse_options(container)  # type: ignore[arg-type]
    try:
        code = pins.pin_code(Path.cwd(), allow_dirty=True)
    except PinError as exc:
        code = {"error": str(exc)}
    manifest = {"mode": "single run", "code": code, "environment": pins.capture_environment(light=True),
                "config": container}
    write_atomic(out_dir / "config.yaml", dump_yaml(container))
    t0 = time.perf_counter()
    source: dict[str, Any] | None = None
    if cfg.task.get("app"):  # an existing @hydra.main app, run in the live tree with its own composed config
        metrics = _single_app(cfg, out_dir, opts, manifest)
    elif not cfg.task.get("fn") and cfg.task.get("command"):  # an existing script, run in the live tree

        manifest["determinism"] = {"mode": opts.determinism, "seed": int(cfg.seed), "via": "command"}
        write_json(out_dir / "manifest.json", manifest)
        run_opts = {"determinism": opts.determinism, "timeout_min": opts.timeout_min}
        with contextlib.chdir(live_workdir(Path.cwd(), out_dir)):  # its relative writes land in the run dir
            out = get_form("command").run(container, TrialPaths(out_dir), run_opts, plan={"variable": {}},
                                          arm={"name": "control"})
        metrics = coerce_metrics(out.metrics if isinstance(out, TaskOutput) else out, opts.metric)  # type: ignore[arg-type]
    else:
        fn = import_callable(str(cfg.task.fn), Path.cwd())
        manifest["determinism"] = seeding.seed_everything(int(cfg.seed), opts.determinism)
        write_json(out_dir / "manifest.json", manifest)
        os.environ.update({"ABLATE_RUN_DIR": str(out_dir), "ABLATE_TRIAL_DIR": str(out_dir),
                           **seeding.seed_environment(int(cfg.seed))})  # as in a trial: where it logs
        work = live_workdir(Path.cwd(), out_dir)
        t0 = time.perf_counter()
        with contextlib.chdir(work):  # its relative writes land in the run dir
            out = run_fn(lambda: fn(cfg), container["task"], opts.metric, TrialPaths(out_dir), out_dir,  # type: ignore[index]
                         work_dir=work)
        if isinstance(out, TaskOutput):
            source = out.source
            print(f"metric {opts.metric!r} from {source['kind']} ({source['path']}): {source['match']}",
                  file=sys.stderr)
            out = out.metrics
        metrics = coerce_metrics(out, opts.metric)
    write_json(out_dir / "result.json", {"status": "ok", "seed": int(cfg.seed), "metrics": metrics,
                                          "duration_s": time.perf_counter() - t0,
                                          **({"metric_source": source} if source else {})})
    shown = ", ".join(f"{k}={v:.6g}" for k, v in metrics.items())
    print(f"control, seed {int(cfg.seed)}: {shown}", file=sys.stderr)
    print(out_dir / "result.json")
    return metrics


#: ``app.`` overrides from the command line of a single run (set by the CLI before Hydra runs).
APP_OVERRIDES: list[str] = []


def _single_app(cfg: Any, out_dir: Path, opts: Any, manifest: dict[str, Any]) -> dict[str, float]:
    """One control run of an ``app`` task: compose its config, run it like a trial, read its metric."""
    seed = int(cfg.seed)
    if seed == 0:
        raise ConfigError("is 0, which scripts that seed only `if cfg.get('seed')` read as no seed", where="seed",
                          fix="pass a seed from 1, e.g. `seed=1`")
    raw = OmegaConf.to_container(cfg, resolve=False)
    raw.pop("hydra", None)  # type: ignore[union-attr]
    raw["task"]["overrides"] = [*list(raw["task"].get("overrides") or []), *APP_OVERRIDES]  # type: ignore[index]
    attached, _, _ = attach(raw, None, None, Path.cwd())  # type: ignore[arg-type]
    check_app_seed_key(attached["task"], Path.cwd())  # as planning refuses it: Hydra would refuse `seed=<k>`
    with trial_hydra(out_dir / "run", attached["task"]):
        container = resolve_container({**attached, "seed": seed})
    manifest["config"] = container
    manifest["determinism"] = {"mode": opts.determinism, "seed": seed, "via": "app overrides"}
    write_json(out_dir / "manifest.json", manifest)
    run_opts = {"determinism": opts.determinism, "timeout_min": opts.timeout_min}
    with contextlib.chdir(live_workdir(Path.cwd(), out_dir)):  # its relative writes land in the run dir
        out = get_form("app").run(container, TrialPaths(out_dir), run_opts, plan={"variable": {}},
                                  arm={"name": "control"})
    print(f"metric {opts.metric!r} from {out.source['kind']} ({out.source['path']})", file=sys.stderr)
    return out.metrics
