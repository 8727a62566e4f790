"""Cold start of the command line, whole process: ``ablate --help`` and ``ablate -m ... dry_run=true``.

Targets: ``ablate --help`` under 0.3 s wall. Also shows ``python -c pass`` and ``import hydra``
as floors for comparison.

Usage (from the repository root)::

    python benchmarks/cli_startup.py [--repeats 10]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ABLATE = str(Path(sys.executable).with_name("ablate"))


def wall(cmd: list[str], repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        subprocess.run(cmd, cwd=REPO, capture_output=True, check=True)
        out.append(time.perf_counter() - t0)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=10)
    args = ap.parse_args(argv)
    cases = [
        ("python -c pass", [sys.executable, "-c", "pass"]),
        ("python -c 'import hydra'", [sys.executable, "-c", "import hydra"]),
        ("ablate --help", [ABLATE, "--help"]),
        ("ablate -m variable=lr seeds=10 dry_run=true", [ABLATE, "-m", "variable=lr", "seeds=10", "dry_run=true"]),
    ]
    for name, cmd in cases:
        w = wall(cmd, args.repeats)
        print(f"{name:48s} median {statistics.median(w):.3f} s [{min(w):.3f}, {max(w):.3f}]")
    print("target: ablate --help under 0.3 s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
