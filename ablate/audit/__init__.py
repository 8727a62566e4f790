"""``ablate audit SOURCE...``: judge runs ablate did not launch (Hydra dirs, MLflow stores, W&B run dirs,
ablate sweep dirs): the arms, every difference between them classified (variable, derived, confounds), what
is missing, the verdict's statistics post hoc, and the minimal ablation that settles the comparison (written when
the runs are confounded, too few, or give an indicative better/worse: then with the seeds that make it firm).

Writes ``audit.json`` and ``audit.md`` into the output dir (each written whole, or not at all) and, for a
comparison with a variable, ``ablation/conf/{task,variable}/audit.yaml``. Every check runs before any file
is written, so bad input leaves nothing behind.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any


def run_audit(sources: Sequence[str], *, out: str | Path = "audit", variable: str | None = None,
              metric: str | None = None, goal: str | None = None, reduce: str = "last", seed_key: str = "seed",
              repo: str | None = None, app: str | None = None) -> dict[str, Any]:
    """Audit the runs in ``sources`` and write audit.json, audit.md (and the minimal ablation) into ``out``.

    Returns
    -------
    dict
        The content of audit.json.

    Raises
    ------
    ConfigError
        Unreadable sources, no runs, no common metric, mixed directions, not two arms.
    """
    from ablate.audit.analysis import audit, indicative
    from ablate.audit.arms import group
    from ablate.audit.minimal import plan, write
    from ablate.audit.report import render
    from ablate.audit.sources import read_source
    from ablate.record.sweepdir import to_json, write_atomic

    left_out: list[str] = []
    runs = [r for s in sources for r in read_source(s, left_out)]
    report = audit(runs, variable=variable, metric=metric, goal=goal, reduce=reduce, seed_key=seed_key, repo=repo)
    report["left_out"] = left_out
    where = repo or next((r.repo for r in runs if r.repo), None)
    report["minimal"] = None
    out = Path(out)
    stats = report["statistics"]
    if report["variable"] is not None and (report["confounds"] or stats["verdict"] is None or indicative(stats)):
        a, b = group(runs, seed_key)
        report["minimal"] = plan(a, b, report, app=app or _app(runs, where), out=out, repo=where)
    out.mkdir(parents=True, exist_ok=True)
    if report["minimal"]:
        report["minimal"]["files"] = [str(p) for p in write(report["minimal"])]
    write_atomic(out / "audit.json", to_json(report))
    write_atomic(out / "audit.md", render(report))
    return report


def _app(runs: Sequence[Any], repo: str | None) -> str:
    """The training script the runs ran, relative to the repo (``train.py`` when nothing says)."""
    import os

    for r in runs:
        prog = r.context.get("program")
        if prog:
            return os.path.relpath(prog, repo) if repo and os.path.isabs(prog) else str(prog)
    return "train.py"
