"""``launcher=inline``: every trial in the ablate process, one after another (debugging and tests)."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Any, ClassVar

from ablate.record.sweepdir import SweepDir
from ablate.trials import proctree, seeding
from ablate.trials.config import arm_record
from ablate.trials.launchers.base import Launcher, Monitor, TrialRef
from ablate.trials.trial import run_trial


class InlineLauncher(Launcher):
    """Runs trials sequentially in this process; breakpoints in the task work. No process isolation:
    the task's global state (imports, torch flags) is shared between trials, and ``timeout_min`` is
    enforced with SIGALRM, which interrupts Python code but not a long C call. A task that calls
    ``sys.exit``/``os._exit`` or raises ``KeyboardInterrupt`` fails its trial (the cause recorded) and the
    rest run; a real Ctrl-C stops ablate (``ablate resume`` finishes). String hashing is this process's:
    a warning is printed when determinism is asked for and ``PYTHONHASHSEED`` is not set."""

    name = "inline"
    OPTIONS: ClassVar[dict[str, Any]] = {}

    def launch(self, sd: SweepDir, trials: Sequence[TrialRef], monitor: Monitor) -> None:
        plan = sd.plan()
        warning = seeding.inline_hash_warning(
            {seeding.trial_mode(plan, arm_record(plan, a)) for a in {r.arm for r in trials}})
        if warning:
            print(warning, file=sys.stderr, flush=True)
        proctree.become_subreaper()  # orphans of a task (setsid grandchildren too) come back to this process
        for ref in trials:
            if monitor.should_stop():
                break
            monitor.started(ref)
            before = set(proctree.descendants(os.getpid()))
            try:
                rec = run_trial(sd.root, ref.arm, ref.seed, in_process=True, attempt=ref.attempt)
            finally:  # the trial's processes end with it, also when it timed out or was interrupted
                left = [p for p in proctree.descendants(os.getpid()) if p not in before]
                proctree.reap(p for p, _ in proctree.kill(left))
            monitor.finished_trial(ref, rec)
