"""Where a test run's CPU goes, by process: every Python process's own CPU, recorded as it exits.

``install VENV DIR`` puts a ``.pth`` hook into the venv's site-packages: each Python process of that venv (the
pytest workers, ``ablate`` commands, warm parents and their forks, trial processes, apps, SLURM jobs) writes one
JSON line file into DIR as it exits (``atexit``, and ``os._exit``, which forks and ablate's own exit use): its
pid, argv, own user and system CPU (``os.times``: children not included, so nothing is counted twice), the test
it ran under (``PYTEST_CURRENT_TEST``, where the environment carried it) and whether it had imported torch,
scipy.stats or MLflow. A process killed by a signal writes nothing; processes that are not Python (git, the
SLURM daemons, W&B's service) are not seen. ``uninstall VENV`` takes the hook out again. ``report DIR`` sums by
kind of process (an ``ablate`` command, a warm parent, a trial process, an app's script, a pytest worker), and
``--test PATTERN`` shows the processes of the tests whose id holds PATTERN.

Measured with it (stop 50, a whole run of the suite, 3,143 processes, 1,923 s of CPU): the 279 ``ablate -m``
processes the tests started took 2.0 s each, 564 s in all, about 1.4 s of each the interpreter start and ablate's
imports (``scipy.stats`` 0.8 s); the four pytest workers 333 s; warm parents 0.47 s each (351); fresh trial
processes 0.48 s each (226).

Usage (from the repository root; a venv of its own, since the hook runs in every process of it)::

    python benchmarks/process_cpu.py install .venv /tmp/proc-cpu
    ABLATE_TEST_CPU=/tmp/test-cpu python -m pytest -q -n 4 --dist loadgroup tests/integration/test_extend.py
    python benchmarks/process_cpu.py report /tmp/proc-cpu
    python benchmarks/process_cpu.py uninstall .venv
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import sys
import sysconfig
from pathlib import Path

HOOK_MODULE = "_ablate_process_cpu"
HOOK_PTH = "zz_ablate_process_cpu.pth"
HOOK = '''"""Written by benchmarks/process_cpu.py: records this process's own CPU as it exits."""
import atexit
import os
import sys
import time

_DIR = {out!r}
_done = [False]


def _write():
    if _done[0]:
        return
    _done[0] = True
    try:
        import json

        t = os.times()
        rec = {{"pid": os.getpid(), "ppid": os.getppid(), "argv": sys.argv[:8], "user": t.user, "system": t.system,
               "test": os.environ.get("PYTEST_CURRENT_TEST", ""), "torch": "torch" in sys.modules,
               "scipy": "scipy.stats" in sys.modules, "mlflow": "mlflow" in sys.modules}}
        with open(os.path.join(_DIR, f"{{os.getpid()}}-{{time.monotonic_ns()}}.json"), "w") as fh:
            json.dump(rec, fh)
    except Exception:
        pass


def _after_fork():
    _done[0] = False  # a fork's CPU starts at 0: it records its own


_exit = os._exit


def _recorded_exit(code):
    _write()
    _exit(code)


atexit.register(_write)
os._exit = _recorded_exit
os.register_at_fork(after_in_child=_after_fork)
'''


def site_packages(venv: Path) -> Path:
    """The venv's ``purelib`` directory (``lib/pythonX.Y/site-packages``)."""
    rel = Path(sysconfig.get_path("purelib")).relative_to(sysconfig.get_paths()["data"])
    return venv / rel


def install(venv: Path, out: Path) -> None:
    """Put the hook into ``venv``: every process of it records into ``out`` (created owner-only)."""
    out.mkdir(mode=0o700, parents=True, exist_ok=True)
    sp = site_packages(venv)
    (sp / f"{HOOK_MODULE}.py").write_text(HOOK.format(out=str(out.resolve())))
    (sp / HOOK_PTH).write_text(f"import {HOOK_MODULE}\n")
    print(f"installed in {sp}; records go to {out}")


def uninstall(venv: Path) -> None:
    """Take the hook out of ``venv``."""
    sp = site_packages(venv)
    for name in (HOOK_PTH, f"{HOOK_MODULE}.py"):
        (sp / name).unlink(missing_ok=True)
    print(f"removed from {sp}")


def kind(argv: list[str]) -> str:
    """What a process was, from its argv: an ``ablate`` command, a module run with ``-m``, a script."""
    a0 = argv[0] if argv else ""
    if a0.endswith(("/ablate", "ablate/cli/main.py")):
        sub = argv[1] if len(argv) > 1 and "=" not in argv[1] and not argv[1].startswith("-") else "-m (a run)"
        return f"ablate {sub}"
    if a0 == "-c":
        return "python -c (pytest workers among them)"
    if "site-packages/" in a0:
        return a0.split("site-packages/", 1)[1]
    return re.sub(r"^/tmp/\S*/", "<tmp>/", a0)[-60:]


def report(out: Path, top: int, test: str | None) -> None:
    """Sum the records in ``out`` by kind of process, largest first."""
    recs = []
    for f in out.glob("*.json"):
        try:
            recs.append(json.loads(f.read_text()))
        except (OSError, ValueError):
            continue  # a process that died while writing
    if test:
        recs = [r for r in recs if test in r["test"]]
    by: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0, 0, 0, 0])
    for r in recs:
        b = by[kind(r["argv"])]
        b[0] += 1
        b[1] += r["user"] + r["system"]
        b[2] += r["torch"]
        b[3] += r["scipy"]
        b[4] += r["mlflow"]
    total = sum(b[1] for b in by.values())
    print(f"{len(recs)} processes, {total:.0f} s of CPU (each process's own)")
    print(f"{'CPU s':>8} {'procs':>6} {'s/proc':>7} {'torch':>6} {'scipy':>6} {'mlflow':>6}  kind")
    for k, b in sorted(by.items(), key=lambda kv: -kv[1][1])[:top]:
        print(f"{b[1]:8.1f} {b[0]:6d} {b[1] / b[0]:7.2f} {b[2]:6d} {b[3]:6d} {b[4]:6d}  {k}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    i = sub.add_parser("install")
    i.add_argument("venv", type=Path)
    i.add_argument("out", type=Path)
    u = sub.add_parser("uninstall")
    u.add_argument("venv", type=Path)
    r = sub.add_parser("report")
    r.add_argument("out", type=Path)
    r.add_argument("--top", type=int, default=30)
    r.add_argument("--test", default=None, help="only the processes of tests whose id holds this")
    args = ap.parse_args(argv)
    if args.cmd == "install":
        install(args.venv, args.out)
    elif args.cmd == "uninstall":
        uninstall(args.venv)
    else:
        report(args.out, args.top, args.test)
    return 0


if __name__ == "__main__":
    sys.exit(main())
