"""Helpers for tests: run real commands (git, dvc, the ablate console script) and check them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None, check: bool = True,
        timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """Run a command, capturing text output; raise with the output when ``check`` and it fails."""
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    if check and proc.returncode != 0:
        raise AssertionError(f"{cmd} exited {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
    return proc


def git(cwd: Path, *args: str) -> str:
    return run(["git", *args], cwd).stdout


def commit_all(cwd: Path, message: str = "update") -> str:
    git(cwd, "add", "-A")
    git(cwd, "commit", "-q", "-m", message)
    return git(cwd, "rev-parse", "HEAD").strip()


def ablate_cli(cwd: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """Run the real ``ablate`` console script in ``cwd`` (a separate process)."""
    exe = shutil.which("ablate") or str(Path(sys.executable).with_name("ablate"))
    env = {**os.environ, "DVC_NO_ANALYTICS": "1"}
    env.pop("PYTHONPATH", None)
    return run([exe, *args], cwd, env=env, check=False, timeout=timeout)
