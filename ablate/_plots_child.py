"""The detached process that draws ``ablate verdict``'s plots after the text (see
:func:`ablate.verdict.draw_plots_in_background`).

Usage (internal): ``python -m ablate._plots_child SWEEP_DIR LOCK_FD``. ``LOCK_FD`` is the sweep dir's lock,
inherited from ``ablate verdict``, which wrote verdict.json and verdict.md; this process draws the PNGs,
rewrites both files to show them, removes ``plots.log`` (its stderr) and closes the lock. A crash leaves
the traceback in ``plots.log``.
"""

from __future__ import annotations

import os
import sys
import time


def main(argv: list[str]) -> int:
    """Draw the plots of ``argv[0]`` holding the inherited lock ``argv[1]``; returns the exit code."""
    from ablate.sweepdir import PLOTS_HOLDER, PLOTS_LOG, SweepDir
    from ablate.verdict import draw_plots

    root, fd = argv[0], int(argv[1])
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} on {os.uname().nodename} since {time.ctime()}: {PLOTS_HOLDER}".encode(), 0)
        sd = SweepDir.open(root)
        draw_plots(sd)
        (sd.root / PLOTS_LOG).unlink(missing_ok=True)  # before the lock goes: a later verdict's log is its own
    finally:
        os.ftruncate(fd, 0)  # as SweepDir.release: no holder line left behind
        os.close(fd)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
