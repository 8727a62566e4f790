"""Cost of pinning data and of verifying it in every trial, for a large DVC-tracked directory.

Builds a throwaway git + DVC project whose task declares one directory of ``--size-mb`` MB
(``--files`` files of random bytes, ``dvc add``-ed), then measures:

- ``pin (launch)``: :func:`ablate.pin.pins.pin_data` in a fresh process, as at launch: DVC's md5 computed
  from the bytes (its state cache bypassed, so metadata tricks cannot fool it) plus the XXH3-128
  content digest of each path (:mod:`ablate.pin.digest`);
- ``verify (trial)``: :func:`ablate.pin.pins.data_seen` in a fresh process with the pins recorded at
  launch, as every trial does twice (before and after its task): a content digest, no DVC import
  (checked);
- the same two checks on the bundled example (``data/digits.npz``) and the code snapshot check
  (:func:`ablate.pin.pins.code_seen`) on a snapshot of this repository (``git archive HEAD``);
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
import json, sys, time
t0 = time.perf_counter()
from ablate.pin import pins
t1 = time.perf_counter()
fn, path = sys.argv[1], sys.argv[2]
c1 = time.process_time()
if fn == "pin_data":
    out = pins.pin_data([path], ".")
    open("pins.json", "w").write(json.dumps(out))
elif fn == "data_seen":
    plan = {"arms": [{"config": {"task": {"data": [path]}}}], "project": {"cwd": "."},
            "pins": {"data": json.loads(open("pins.json").read())}}
    out = pins.data_seen(plan)
    assert out[path]["hash"], out
    assert "dvc" not in sys.modules, "a trial's check imported DVC"
else:  # code_seen on a snapshot dir
    from ablate.record.sweepdir import SweepDir
    sd = SweepDir(path)
    plan = {"pins": {"code": {"commit": "x", "snapshot": "x"}}}
    out = pins.code_seen(sd, plan, sd.code_dir)
    assert out["snapshot"], out
t2 = time.perf_counter()
print(f"{t2 - t1:.4f} {time.process_time() - c1:.4f}")
"""


def sh(cmd: list[str], cwd: Path) -> str:
    env = {**os.environ, "DVC_NO_ANALYTICS": "1", "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b",
           "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@b"}
    return subprocess.run(cmd, cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


CPU: dict[str, list[float]] = {}


def timed_child(fn: str, cwd: Path, path: str = "data/big") -> float:
    """Wall seconds of ``fn`` in a fresh process (its CPU seconds are kept in CPU[fn:path])."""
    out = sh([sys.executable, "-c", CHILD, fn, path], cwd)
    wall, cpu = map(float, out.split())
    CPU.setdefault(f"{fn}:{path}", []).append(cpu)
    return wall


def example(root: Path, repeats: int) -> tuple[list[float], list[float], list[float], int, int]:
    """The bundled example: pin and verify data/digits.npz, check a code snapshot of this repository."""
    repo = Path(__file__).resolve().parents[1]
    proj = root / "example"
    (proj / "data").mkdir(parents=True)
    shutil.copy2(repo / "data" / "digits.npz", proj / "data" / "digits.npz")
    sh(["git", "init", "-q"], proj)
    sh([sys.executable, "-m", "dvc", "init", "-q"], proj)
    sh([sys.executable, "-m", "dvc", "add", "-q", "data/digits.npz"], proj)
    sweep = root / "sweep"
    (sweep / "code").mkdir(parents=True)
    subprocess.run(f"git -C {repo} archive HEAD | tar -x -C {sweep / 'code'}", shell=True, check=True)
    (sweep / "code" / ".ablate_commit").write_text("HEAD\nclean\n")
    code_bytes = sum(p.stat().st_size for p in (sweep / "code").rglob("*") if p.is_file())
    pin = [timed_child("pin_data", proj, "data/digits.npz") for _ in range(repeats)]
    verify = [timed_child("data_seen", proj, "data/digits.npz") for _ in range(repeats)]
    code = [timed_child("code_seen", proj, str(sweep)) for _ in range(repeats)]
    return pin, verify, code, (proj / "data" / "digits.npz").stat().st_size, code_bytes


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
        ex_pin, ex_verify, ex_code, ex_bytes, code_bytes = example(root, args.repeats)
        mb = args.size_mb

        def fmt(v: list[float]) -> str:
            return f"{statistics.median(v) * 1e3:.1f} ms [{min(v) * 1e3:.1f}, {max(v) * 1e3:.1f}]"

        print(f"data: {mb} MB in {args.files} files; `dvc add` took {dvc_add:.1f} s; md5sum of all: {md5:.2f} s")
        print(f"pin (launch, md5 without DVC's state + content digest): {fmt(pin)}")
        print(f"verify (each trial, twice: before and after the task):   {fmt(verify)} each, no DVC import")
        print(f"example data/digits.npz ({ex_bytes / 1e6:.2f} MB): pin {fmt(ex_pin)}, verify {fmt(ex_verify)} each")
        print("CPU seconds (median; the wall times above include waiting on a shared machine): "
              + ", ".join(f"{k} {statistics.median(v) * 1e3:.1f} ms" for k, v in CPU.items()))
        print(f"code snapshot check ({code_bytes / 1e6:.2f} MB, this repository): {fmt(ex_code)} "
              "(before launch and in each trial, twice)")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
