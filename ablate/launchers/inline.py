"""``launcher=inline``: every trial in the ablate process, one after another (debugging and tests)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from ablate.launchers.base import Launcher, Monitor, TrialRef
from ablate.sweepdir import SweepDir


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
        import sys

        from ablate import seeding
        from ablate.trial import arm_record, run_trial

        plan = sd.plan()
        warning = seeding.inline_hash_warning(
            {seeding.trial_mode(plan, arm_record(plan, a)) for a in {r.arm for r in trials}})
        if warning:
            print(warning, file=sys.stderr, flush=True)
        for ref in trials:
            if monitor.should_stop():
                break
            monitor.started(ref)
            rec = run_trial(sd.root, ref.arm, ref.seed, in_process=True, attempt=ref.attempt)
            monitor.finished_trial(ref, rec)
