"""Cost of pinning data and of verifying it in every trial, for a large DVC-tracked directory.

Builds a throwaway git + DVC project whose task declares one directory of ``--size-mb`` MB
(``--files`` files of random bytes, ``dvc add``-ed), then measures:

- ``pin (launch)``: :func:`ablate.pins.pin_data` in a fresh process, as at launch (DVC's state
  database already knows the files from ``dvc add``);
- ``verify (trial)``: :func:`ablate.pins.data_seen` in a fresh process, as every trial does;
- ``verify, cold state``: the same after deleting DVC's state database (``.dvc/tmp``): every file
  is hashed again, the cost a trial would pay on every start without DVC's cache;
- for scale, ``md5sum`` of the whole directory.

Usage::

    python benchmarks/pin_data.py --size-mb 1024 --files 1024 --repeats 3
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHILD = """
import sys, time
t0 = time.perf_counter()
from ablate import pins
t1 = time.perf_counter()
fn = getattr(pins, sys.argv[1])
if sys.argv[1] == "pin_data":
    out = fn(["data/big"], ".")
else:
    out = fn({"arms": [{"config": {"task": {"data": ["data/big"]}}}], "project": {"cwd": "."}})
t2 = time.perf_counter()
assert "hash" in out["data/big"], out
print(f"{t2 - t1:.4f} {t1 - t0:.4f}")
"""


def sh(cmd: list[str], cwd: Path) -> str:
    env = {**os.environ, "DVC_NO_ANALYTICS": "1", "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b",
           "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@b"}
    return subprocess.run(cmd, cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


def timed_child(fn: str, cwd: Path) -> float:
    out = sh([sys.executable, "-c", CHILD, fn], cwd)
    return float(out.split()[0])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mb", type=int, default=1024)
    ap.add_argument("--files", type=int, default=1024)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="ablate-pindata-"))
    try:
        proj = root / "proj"
        big = proj / "data" / "big"
        big.mkdir(parents=True)
        per_file = args.size_mb * 1024 * 1024 // args.files
        for i in range(args.files):
            (big / f"{i:06d}.bin").write_bytes(os.urandom(per_file))
        (proj / ".gitignore").write_text("__pycache__/\n")
        sh(["git", "init", "-q"], proj)
        sh([sys.executable, "-m", "dvc", "init", "-q"], proj)
        t0 = time.perf_counter()
        sh([sys.executable, "-m", "dvc", "add", "-q", "data/big"], proj)
        dvc_add = time.perf_counter() - t0
        sh(["git", "add", "-A"], proj)
        sh(["git", "commit", "-q", "-m", "data"], proj)
        t0 = time.perf_counter()
        subprocess.run("find data/big -type f -print0 | xargs -0 md5sum > /dev/null", shell=True, cwd=proj, check=True)
        md5 = time.perf_counter() - t0
        pin = [timed_child("pin_data", proj) for _ in range(args.repeats)]
        verify = [timed_child("data_seen", proj) for _ in range(args.repeats)]
        cold = []
        for _ in range(args.repeats):
            shutil.rmtree(proj / ".dvc" / "tmp", ignore_errors=True)
            cold.append(timed_child("data_seen", proj))
        mb = args.size_mb

        def fmt(v: list[float]) -> str:
            return f"{statistics.median(v):.3f} s [{min(v):.3f}, {max(v):.3f}]"

        print(f"data: {mb} MB in {args.files} files; `dvc add` took {dvc_add:.1f} s; md5sum of all: {md5:.2f} s")
        print(f"pin (launch), fresh process:          {fmt(pin)}")
        print(f"verify (every trial), fresh process: {fmt(verify)}")
        print(f"verify with DVC's state db deleted:   {fmt(cold)}  (what re-hashing from scratch would cost)")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
