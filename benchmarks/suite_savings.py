"""Compute saved by a suite's shared control: one suite of 3 one-variable ablations against running them one by one.

On the digits example (a real git + DVC project in a temp dir), with three variables of one treatment
each (``lr_hi``: task.optim.lr 0.2, ``momentum``: task.optim.momentum 0.5, ``hidden``: task.hidden 32):

- the suite ``ablate -m variable=lr_hi,momentum,hidden seeds=N`` runs the control's N seeds once:
  4 arms x N trials;
- one by one, ``ablate -m variable=<v> seeds=N`` three times: 3 x 2 arms x N trials.

Reports trials, wall and CPU seconds (user + system of the ablate process and every trial process it
started), and writes the suite's verdict.md table and forest plot to ``--out``.

Usage (from the repository root, after ``dvc repro prepare``)::

    python benchmarks/suite_savings.py [--seeds 10] [--epochs 5] [--out benchmarks/results]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import ABLATE, cleanup, tempdir, timed
from plan_pin import make_project

VARIABLES = {"lr_hi": "key: task.optim.lr\nvalues: [0.2]\n", "momentum": "key: task.optim.momentum\nvalues: [0.5]\n",
             "hidden": "key: task.hidden\nvalues: [32]\n"}


def _trials(sweep: Path) -> int:
    return len(list(sweep.glob("trials/*/seed=*/result.json")))


def table_png(markdown: str, path: Path) -> None:
    """Draw verdict.md's ablation table (its markdown rows and caption) as a PNG, for the README."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    lines = [ln for ln in markdown.splitlines() if ln.startswith("|") and not ln.startswith("|---")]
    cells = [[c.strip().replace("**", "") for c in ln.strip("|").split("|")] for ln in lines]
    bold = [("**" in ln) for ln in lines]
    fig = Figure(figsize=(11.5, 0.42 * len(cells) + 0.3), dpi=110)
    FigureCanvasAgg(fig)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.axis("off")
    tab = ax.table(cellText=cells[1:], colLabels=cells[0], loc="center", cellLoc="center")
    tab.auto_set_font_size(False)
    tab.set_fontsize(9)
    tab.auto_set_column_width(list(range(len(cells[0]))))
    for (r, _c), cell in tab.get_celld().items():
        cell.set_height(0.8 / len(cells))
        if r == 0 or bold[r]:
            cell.set_text_props(weight="bold")
    fig.savefig(path)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    args = p.parse_args(argv)
    tmp = tempdir("ablate-suite-")
    try:
        proj = make_project(tmp / "proj")
        for name, text in VARIABLES.items():
            (proj / "conf" / "variable" / f"{name}.yaml").write_text(text)
        env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "b",
               "GIT_COMMITTER_EMAIL": "b@b", "DVC_NO_ANALYTICS": "1"}
        for cmd in (["git", "add", "-A"], ["git", "commit", "-q", "-m", "variables"]):
            subprocess.run(cmd, cwd=proj, env=env, check=True, capture_output=True)
        common = [f"seeds={args.seeds}", f"task.epochs={args.epochs}", "progress=off", "launcher=local"]
        suite_t = timed([ABLATE, "-m", "variable=" + ",".join(VARIABLES), *common,
                         "hydra.sweep.dir=outputs/suite"], proj, env)
        suite_n = _trials(proj / "outputs" / "suite")
        alone_wall = alone_cpu = 0.0
        alone_n = 0
        for name in VARIABLES:
            t = timed([ABLATE, "-m", f"variable={name}", *common, f"hydra.sweep.dir=outputs/{name}"], proj, env)
            alone_wall += t.wall_s
            alone_cpu += t.cpu_s
            alone_n += _trials(proj / "outputs" / name)
        res = {"seeds": args.seeds, "epochs": args.epochs, "variables": list(VARIABLES),
               "suite": {"trials": suite_n, "wall_s": suite_t.wall_s, "cpu_s": suite_t.cpu_s},
               "one_by_one": {"trials": alone_n, "wall_s": alone_wall, "cpu_s": alone_cpu}}
        res["saved"] = {"trials": alone_n - suite_n, "cpu_s": alone_cpu - suite_t.cpu_s,
                        "cpu_fraction": 1 - suite_t.cpu_s / alone_cpu}
        print(json.dumps(res, indent=2))
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "suite_savings.json").write_text(json.dumps(res, indent=2) + "\n")
        sd = proj / "outputs" / "suite"
        md = (sd / "verdict.md").read_text()
        table = md[md.index("## Ablation table"):md.index("## Setup")]
        (args.out / "suite_table.md").write_text(table)
        table_png(table, args.out / "suite_table.png")
        for name in ("ablation_table.tex", "ablation_table.csv", "verdict_forest.png"):
            if (sd / name).is_file():
                shutil.copy2(sd / name, args.out / f"suite_{name}")
    finally:
        cleanup(tmp)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
