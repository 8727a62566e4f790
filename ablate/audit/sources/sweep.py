"""ablate's own sweep dirs, read as runs (each trial a run): the composed config and pins from each trial's
``manifest.json``, the metrics from ``result.json``. Everything the other sources lack is recorded there:
commit, data hashes, libraries, hardware, determinism mode. For an app task the config is the app's own
(``task.params``), so the keys read as the app's users write them."""

from __future__ import annotations

from typing import Any

from ablate.audit.runs import Run, commit_id, flatten
from ablate.record.results import iter_manifests
from ablate.record.sweepdir import SweepDir


def read(source: str, left_out: list[str] | None = None, selection: Any = None) -> list[Run]:
    """Every ok trial of the sweep dir ``source``; the others are named in ``left_out``."""
    sd = SweepDir.open(source)
    plan = sd.plan()
    runs = []
    for (arm, seed), man in iter_manifests(sd, plan):
        rec = sd.read_result(arm, seed)
        if True:
            if not isinstance(rec, dict) or rec.get("status") != "ok" or not isinstance(man, dict):
                if left_out is not None:
                    left_out.append(f"trial {arm}/seed={seed}: "
                                    + (str(rec.get("status")) if isinstance(rec, dict) else "no result"))
                continue
            code = man.get("code") or {}
            env = man.get("environment") or {}
            data = {k: (v or {}).get("md5") if isinstance(v, dict) else v for k, v in (man.get("data") or {}).items()}
            context: dict[str, Any] = {"goal": plan.get("goal", "maximize"), "data": data,
                                       "determinism": (man.get("determinism") or {}).get("mode")}
            if env:
                context["libraries"] = dict(env.get("packages") or {})
                context["python"] = env.get("python")
                context["hardware"] = {k: env[k] for k in ("gpu", "cpu", "host") if env.get(k)}
            metrics = {k: [(None, float(v))] for k, v in (rec.get("metrics") or {}).items()
                       if isinstance(v, int | float) and not isinstance(v, bool)}
            cfg = man.get("config") or {}
            params = (cfg.get("task") or {}).get("params")  # an app task: the app's own composed config
            runs.append(Run(source="ablate", id=f"{source}:{arm}/{seed}",
                            config=flatten(params if isinstance(params, dict) else cfg),
                            metrics=metrics, commit=commit_id(code.get("commit")), commit_how="recorded by ablate",
                            context={k: v for k, v in context.items() if v}, status="finished",
                            started=None))
    return runs
