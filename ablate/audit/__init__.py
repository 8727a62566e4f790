"""``ablate audit SOURCE...``: judge runs ablate did not launch (Hydra dirs, MLflow stores, W&B run dirs,
TensorBoard log dirs, DVC experiments, ablate sweep dirs): each run counted once however many records show it,
the arms (by config, else by data version, else by commit), every difference between them classified (variable,
derived, confounds), what is missing, the verdict's statistics post hoc, and the minimal ablation that settles the
comparison (written when the runs are confounded, too few, or give an indicative better/worse: then with the seeds
that make it firm).

Writes ``audit.json``, ``audit.md`` and its plots (``curves.png``, ``values.png``, and ``curve_verdict.png`` where
the runs logged step series: their curves compared as a curve verdict compares trials) into the output dir (each
written whole, or not at all) and, for a comparison ablate can vary, ``ablation/conf/{task,variable}/audit.yaml``.
Every check runs before any file is written, so bad input leaves nothing behind; no source is written to.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ablate.errors import ConfigError

if TYPE_CHECKING:
    from ablate.audit.sources import Selection


def run_audit(sources: Sequence[str], *, out: str | Path = "audit", variable: str | None = None,
              metric: str | Mapping[str, str] | None = None, goal: str | None = None, reduce: str = "last",
              seed_key: str | Mapping[str, str] = "seed", repo: str | None = None, app: str | None = None,
              selection: Selection | None = None, plots: bool = True) -> dict[str, Any]:
    """Audit the runs in ``sources`` and write audit.json, audit.md (with its plots) and the minimal ablation
    into ``out``. ``metric`` and ``seed_key`` are one name, or each side's (``{"A": ..., "B": ...}``);
    ``selection`` keeps the runs it names (:class:`ablate.audit.sources.Selection`).

    Returns
    -------
    dict
        The content of audit.json.

    Raises
    ------
    ConfigError
        Unreadable sources, no runs, no common metric, mixed or unknown directions, not two arms.
    """
    from ablate.audit.analysis import audit, indicative  # lazy: the verdict's machinery, after the CLI parsed
    from ablate.audit.minimal import plan, write
    from ablate.audit.report import render
    from ablate.audit.sources import read_source
    from ablate.record.sweepdir import to_json, write_atomic

    out = Path(out)
    if (out.exists() and not out.is_dir()) or any(p.exists() and not p.is_dir() for p in out.parents):
        raise ConfigError(f"--out {out} is not a dir (a file is in the way)", where="--out",
                          fix="give a dir for audit.md and audit.json, e.g. --out audit")
    left_out: list[str] = []
    runs = [r for s in sources for r in read_source(s, left_out, selection)]
    report = audit(runs, variable=variable, metric=metric, goal=goal, reduce=reduce, seed_key=seed_key, repo=repo)
    a, b = report.pop("_arms")
    report["left_out"] = left_out + report["unfinished"]
    where = repo or next((r.repo for r in a.runs + b.runs if r.repo), None)
    report["minimal"] = None
    stats = report["statistics"]
    if report["variable"] is not None and (report["confounds"] or stats["verdict"] is None or indicative(stats)):
        report["minimal"] = plan(a, b, report, app=app or _app(a.runs + b.runs, where), out=out, repo=where)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"--out {out} cannot be made ({exc.strerror})", where="--out",
                          fix="give a dir you can write to, e.g. --out audit") from None
    if report["minimal"]:
        report["minimal"]["files"] = [str(p) for p in write(report["minimal"])]
    report["plots"] = _plots(out, a, b, report) if plots else []
    write_atomic(out / "audit.json", to_json(report))
    write_atomic(out / "audit.md", render(report))
    return report


def _plots(out: Path, a: Any, b: Any, report: Mapping[str, Any]) -> list[str]:
    """curves.png (the two sides' metric curves), values.png (the per-run values) and, where the runs logged step
    series, curve_verdict.png (the curve comparison: the curve verdict's figure), written into ``out``."""
    from ablate.audit.plots import curves_plot, values_plot  # lazy: matplotlib only when plots are drawn
    from ablate.audit.report import CURVE_PLOT
    from ablate.judge.curves_report import curve_plots
    from ablate.record.sweepdir import write_atomic

    ms = report["metrics"]
    sides = [(arm.name, ms[arm.name], [r.metrics.get(ms[arm.name], []) for r in arm.runs]) for arm in (a, b)]
    vals = report["statistics"]["values"]
    made = []
    for name, png in (("curves.png", curves_plot(sides)),
                      ("values.png", values_plot([(a.name, list(vals["control"].values())),
                                                  (b.name, list(vals["treatment"].values()))], report["metric"]))):
        if png:
            write_atomic(out / name, png)
            made.append(name)
    cv = report["statistics"].get("curves")
    png = curve_plots({"curves": cv}).get("treatment") if cv else None
    if png:
        write_atomic(out / CURVE_PLOT, png)
        made.append(CURVE_PLOT)
    return made


def _app(runs: Sequence[Any], repo: str | None) -> str:
    """The training script the runs ran, relative to the repo (``train.py`` when nothing says)."""

    for r in runs:
        prog = r.context.get("program")
        if prog:
            return os.path.relpath(prog, repo) if repo and os.path.isabs(prog) else str(prog)
    return "train.py"
