"""``launcher=inline``: every trial in the ablate process, one after another (debugging and tests)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from ablate.launchers.base import Launcher, Monitor, TrialRef
from ablate.sweepdir import SweepDir


class InlineLauncher(Launcher):
    """Runs trials sequentially in this process; breakpoints in the task work. No process isolation:
    the task's global state (imports, torch flags) is shared between trials, and ``timeout_min`` is
    enforced with SIGALRM, which interrupts Python code but not a long C call."""

    name = "inline"
    OPTIONS: ClassVar[dict[str, Any]] = {}

    def launch(self, sd: SweepDir, trials: Sequence[TrialRef], monitor: Monitor) -> None:
        from ablate.trial import run_trial

        for ref in trials:
            if monitor.should_stop():
                break
            monitor.started(ref)
            rec = run_trial(sd.root, ref.arm, ref.seed, in_process=True, attempt=ref.attempt)
            monitor.finished_trial(ref, rec)
