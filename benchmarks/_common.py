"""Shared pieces for the benchmarks: a throwaway no-op project, timing of whole processes, summaries."""

from __future__ import annotations

import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

BIN = Path(sys.executable).parent
ABLATE = str(BIN / "ablate")

NOOP_TASK = '''
def run(cfg):
    return {"m": float(cfg.seed)}
'''

HYDRA_APP = '''
import hydra


@hydra.main(version_base="1.3", config_path="hconf", config_name="config")
def main(cfg):
    return {"m": float(cfg.seed)}


if __name__ == "__main__":
    main()
'''

SUBMITIT_RUN = '''
import sys
import submitit


def noop(seed):
    return {"m": float(seed)}


n = int(sys.argv[1])
ex = submitit.LocalExecutor(folder=sys.argv[2])
ex.update_parameters(timeout_min=60)
jobs = ex.map_array(noop, range(n))
assert [j.result()["m"] for j in jobs] == [float(i) for i in range(n)]
'''


def make_noop_project(root: Path) -> Path:
    """A committed git project with a no-op ablate task, a Hydra app and a submitit script."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "conf" / "task").mkdir(parents=True)
    (root / "conf" / "variable").mkdir(parents=True)
    (root / "hconf").mkdir()
    (root / "conf" / "ablate.yaml").write_text("defaults:\n  - ablate_base\n  - task: noop\n  - _self_\n")
    (root / "conf" / "task" / "noop.yaml").write_text("fn: noop:run\nmetric: m\nx: 1\n")
    (root / "conf" / "variable" / "x.yaml").write_text("key: task.x\nvalues: [2]\n")
    (root / "hconf" / "config.yaml").write_text("seed: 0\nx: 1\n")
    (root / "noop.py").write_text(NOOP_TASK)
    (root / "noop_app.py").write_text(HYDRA_APP)
    (root / "submitit_run.py").write_text(SUBMITIT_RUN)
    (root / ".gitignore").write_text("outputs/\nmultirun/\nsubmitit/\n__pycache__/\n")
    env = {**os.environ, "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "bench",
           "GIT_COMMITTER_EMAIL": "b@b"}
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-q", "-m", "bench"]):
        subprocess.run(cmd, cwd=root, env=env, check=True, capture_output=True)
    return root


@dataclass
class Timing:
    """Wall and CPU seconds of one whole-process run (CPU = user + system of the process and its children)."""

    wall_s: float
    cpu_s: float
    stdout: str = ""


def timed(cmd: Sequence[str], cwd: Path, env: dict[str, str] | None = None) -> Timing:
    """Run ``cmd`` to completion and measure it; raise with its output if it fails."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(list(cmd), cwd=cwd, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd} failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Timing(wall, cpu, proc.stdout)


def summary(values: Sequence[float]) -> str:
    """``median [min, max]`` of repeated measurements."""
    return f"{statistics.median(values):.4g} [{min(values):.4g}, {max(values):.4g}]"


def tempdir(prefix: str) -> Path:
    return Path(tempfile.mkdtemp(prefix=prefix))


def cleanup(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


TORCH_TASK = '''
import torch  # at module top: what a trial process pays before its first step, unless forked warm


def run(cfg):
    return {"m": float(cfg.seed)}
'''


def make_torch_project(root: Path) -> Path:
    """:func:`make_noop_project` with its task importing torch at module top (committed)."""
    proj = make_noop_project(root)
    (proj / "noop.py").write_text(TORCH_TASK)
    env = {**os.environ, "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "bench",
           "GIT_COMMITTER_EMAIL": "b@b"}
    subprocess.run(["git", "commit", "-qam", "torch task"], cwd=proj, env=env, check=True, capture_output=True)
    return proj
