"""Progress while trials run: per arm done / running / failed / pending.

On a terminal a live table (rich) redraws in place; otherwise (CI logs, pipes) one line is printed
per finished trial. Everything goes to stderr, so stdout carries only what the command returns
(the path of verdict.md).
"""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter
from types import TracebackType
from typing import Any

from ablate.record.errorline import failure_line
from ablate.record.results import evaluation_rows, trial_state
from ablate.record.sweepdir import SweepDir
from ablate.trials.launchers.base import TrialRef


class Progress:
    """Counts trial events per arm and shows them (live table on a TTY, else a line per trial).

    Parameters
    ----------
    sd : SweepDir
    plan : dict
        The plan record (``ablation.yaml``).
    enabled : bool
        False shows nothing (``progress=off``).
    """

    def __init__(self, sd: SweepDir, plan: dict[str, Any], enabled: bool = True) -> None:
        trials = [(a["name"], s) for a in plan["arms"] for s in plan["seeds"]]
        if plan.get("tuning"):  # a tuned ablation's evaluation trials (under the arm's own name before its choice)
            trials += [(str(r["arm"]), int(r["seed"])) for r in evaluation_rows(sd, plan)]
        self.arms = list(dict.fromkeys(a for a, _ in trials))
        self.total = dict(Counter(a for a, _ in trials))
        #: latest outcome of each finished trial, "ok" or "failed" (a retried trial moves between them)
        self.outcome: dict[tuple[str, int], str] = {}
        for a, s in trials:
            status, _ = trial_state(sd, a, s)
            if status not in ("pending", "running"):
                self.outcome[(a, s)] = "ok" if status == "ok" else "failed"
        self.running: dict[str, int] = dict.fromkeys(self.arms, 0)
        self.enabled = enabled
        self.tty = enabled and sys.stderr.isatty()
        self._live: Any = None
        self._lock = threading.Lock()
        self._t0 = time.monotonic()
        self._done_at_start = len(self.outcome)
        self._finished_events = 0

    def __enter__(self) -> Progress:
        if self.tty:
            from rich.console import Console  # noqa: PLC0415  # lazy: rich only when progress is drawn
            from rich.live import Live  # noqa: PLC0415  # lazy: rich only when progress is drawn

            self._live = Live(self._table(), console=Console(stderr=True), refresh_per_second=4, transient=False)
            self._live.__enter__()
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        if self.enabled and not self.tty and self._finished_events and self._finished_events % 50:
            print(f"ablate: {self._summary()}", file=sys.stderr, flush=True)  # once, after the last trial of this run
        if self._live is not None:
            self._live.update(self._table())
            self._live.__exit__(et, ev, tb)
            self._live = None

    def event(self, kind: str, ref: TrialRef, record: dict[str, Any] | None) -> None:
        """Launcher callback: ``kind`` is ``started``, ``not_started`` (announced, never run) or ``finished``."""
        with self._lock:
            if kind == "started":
                self.running[ref.arm] += 1
                self.outcome.pop((ref.arm, ref.seed), None)  # a re-run of a failed trial is running, not done
            elif kind == "not_started":  # announced, then never run (its warm parent had died): pending
                self.running[ref.arm] = max(0, self.running[ref.arm] - 1)
            else:
                self.running[ref.arm] = max(0, self.running[ref.arm] - 1)
                status = (record or {}).get("status", "failed")
                self.outcome[(ref.arm, ref.seed)] = "ok" if status == "ok" else "failed"
                self._finished_events += 1
                if self.enabled and not self.tty:
                    done = len(self.outcome)
                    total = sum(self.total.values())
                    retry = f" (attempt {ref.attempt})" if ref.attempt > 1 else ""
                    err = "" if status == "ok" else f": {failure_line((record or {}).get('error'), 200)}"
                    dur = (record or {}).get("duration_s")
                    dur_s = f" in {dur:.1f}s" if isinstance(dur, int | float) else ""
                    print(f"[{done}/{total}] {ref.arm} seed={ref.seed}{retry} {status}{dur_s}{err}",
                          file=sys.stderr, flush=True)
                    if self._finished_events % 50 == 0:  # the final summary comes once, on exit
                        print(f"ablate: {self._summary()}", file=sys.stderr, flush=True)
            if self._live is not None:
                self._live.update(self._table())

    def _summary(self) -> str:
        """``7/12 trials, 5 s elapsed, about 4 s left`` (the estimate once a trial of this run finished)."""
        done = len(self.outcome)
        total = sum(self.total.values())
        failed = sum(1 for o in self.outcome.values() if o != "ok")
        elapsed = time.monotonic() - self._t0
        text = f"{done}/{total} trials" + (f" ({failed} failed)" if failed else "") + f", {_fmt_s(elapsed)} elapsed"
        new = self._finished_events
        if new > 0 and done < total:
            text += f", about {_fmt_s(elapsed / new * (total - done))} left"
        return text

    def _table(self) -> Any:
        from rich.table import Table  # noqa: PLC0415  # lazy: rich only when progress is drawn

        t = Table(title=f"ablate: {self._summary()}", title_justify="left")
        for col in ("arm", "done", "running", "failed", "pending"):
            t.add_column(col, justify="left" if col == "arm" else "right")
        counts = {a: Counter() for a in self.arms}
        for (a, _s), o in self.outcome.items():
            counts[a][o] += 1
        for a in self.arms:
            c = counts[a]
            pending = self.total[a] - c["ok"] - c["failed"] - self.running[a]
            t.add_row(a, str(c["ok"]), str(self.running[a]), str(c["failed"]), str(max(0, pending)))
        return t


def _fmt_s(seconds: float) -> str:
    """``42 s``, ``3 min 5 s``, ``2 h 10 min``."""
    s = round(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s"
    return f"{s // 3600} h {(s % 3600) // 60} min"
