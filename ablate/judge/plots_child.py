"""The detached process that draws ``ablate verdict``'s plots after the text (see
:func:`ablate.judge.verdict.draw_plots_in_background`).

Usage (internal): ``python -m ablate.judge.plots_child SWEEP_DIR LOCK_FD``. ``LOCK_FD`` is the sweep dir's lock,
inherited from ``ablate verdict``, which wrote verdict.json and verdict.md; this process draws the PNGs,
rewrites both files to show them, removes the debris of dead writers (:meth:`SweepDir.clean_debris`, the
lock-taker's duty ``ablate verdict`` left to it), removes ``plots.log`` (its stderr) and closes the lock. A crash leaves
the traceback in ``plots.log``.
"""

from __future__ import annotations

import os
import sys

from ablate.judge.verdict import draw_plots
from ablate.record.sweepdir import PLOTS_LOG, SweepDir, write_plots_holder


def main(argv: list[str]) -> int:
    """Draw the plots of ``argv[0]`` holding the inherited lock ``argv[1]``; returns the exit code."""
    root, fd = argv[0], int(argv[1])
    try:
        write_plots_holder(fd)  # this pid, still ending with the marker: waiters keep waiting
        sd = SweepDir.open(root)
        draw_plots(sd)
        sd.clean_debris()  # left to this process by `ablate verdict` (SweepDir.try_acquire(clean=False))
        (sd.root / PLOTS_LOG).unlink(missing_ok=True)  # before the lock goes: a later verdict's log is its own
    finally:
        # closing drops the lock; the holder line stays (never read while the lock is free, replaced by the
        # next holder): truncating it first would show waiters an empty line while the lock is still held
        os.close(fd)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
