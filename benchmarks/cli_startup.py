"""Cold start of the command line, whole process: ``ablate --help`` and ``ablate -m ... dry_run=true``.

Targets: ``ablate --help`` under 0.3 s wall. Also shows ``python -c pass`` and ``import hydra``
as floors for comparison. The cases run interleaved, each repeat in the opposite order to the last,
and each reports wall and CPU time (CPU is the fairer figure on a shared machine).

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


def wall(cmd: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds (user + system of the process) of one whole-process run."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(cmd, cwd=REPO, capture_output=True, check=True)
    w = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return w, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


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
    got: dict[str, list[tuple[float, float]]] = {name: [] for name, _ in cases}
    for r in range(args.repeats):  # interleaved (A, B, C, D, D, C, B, A ...): drift falls on every case alike
        for name, cmd in (cases if r % 2 == 0 else cases[::-1]):
            got[name].append(wall(cmd))
    for name, _ in cases:
        w, c = [x[0] for x in got[name]], [x[1] for x in got[name]]
        print(f"{name:48s} median {statistics.median(w):.3f} s [{min(w):.3f}, {max(w):.3f}], "
              f"cpu {statistics.median(c):.3f} s")
    print("target: ablate --help under 0.3 s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
