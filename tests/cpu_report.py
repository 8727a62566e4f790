"""Sum the per-test CPU that ``ABLATE_TEST_CPU=DIR python -m pytest ...`` wrote (tests/conftest.py).

``python -m tests.cpu_report DIR [N]`` prints the N (default 30) costliest files and tests by CPU (user + system s
of the test's worker and the child processes it waited for) with their wall time, and the totals.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path


def main(argv: list[str]) -> int:
    """Print the report for ``argv[0]`` (a directory of ``*.jsonl``), ``argv[1]`` rows (default 30)."""
    rows = [json.loads(line) for f in sorted(Path(argv[0]).glob("*.jsonl")) for line in f.read_text().splitlines()]
    top = int(argv[1]) if len(argv) > 1 else 30
    per_file: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
    for r in rows:
        acc = per_file[r["test"].split("::", 1)[0]]
        acc[0] += r["cpu_s"]
        acc[1] += r["wall_s"]
        acc[2] += 1
    cpu, wall = sum(r["cpu_s"] for r in rows), sum(r["wall_s"] for r in rows)
    print(f"{len(rows)} tests: CPU {cpu:.0f} s, wall {wall:.0f} s (summed over workers)")
    print("\nfiles by CPU (s): cpu  wall  tests")
    for name, (c, w, n) in sorted(per_file.items(), key=lambda kv: -kv[1][0])[:top]:
        print(f"{c:8.1f} {w:8.1f} {n:4d}  {name}")
    print("\ntests by CPU (s): cpu  wall")
    for r in sorted(rows, key=lambda r: -r["cpu_s"])[:top]:
        print(f"{r['cpu_s']:8.1f} {r['wall_s']:8.1f}  {r['test']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
