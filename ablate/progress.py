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

from ablate.launchers.base import TrialRef
from ablate.sweepdir import SweepDir


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
        from ablate.results import trial_state

        self.arms = [a["name"] for a in plan["arms"]]
        self.total = {a: len(plan["seeds"]) for a in self.arms}
        self.counts: dict[str, Counter[str]] = {a: Counter() for a in self.arms}
        for a in self.arms:
            for s in plan["seeds"]:
                status, _ = trial_state(sd, a, s)
                if status not in ("pending", "running"):
                    self.counts[a]["ok" if status == "ok" else "failed"] += 1
        self.running: dict[str, int] = dict.fromkeys(self.arms, 0)
        self.enabled = enabled
        self.tty = enabled and sys.stderr.isatty()
        self._live: Any = None
        self._lock = threading.Lock()
        self._t0 = time.monotonic()

    def __enter__(self) -> Progress:
        if self.tty:
            from rich.console import Console
            from rich.live import Live

            self._live = Live(self._table(), console=Console(stderr=True), refresh_per_second=4, transient=False)
            self._live.__enter__()
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        if self._live is not None:
            self._live.update(self._table())
            self._live.__exit__(et, ev, tb)
            self._live = None

    def event(self, kind: str, ref: TrialRef, record: dict[str, Any] | None) -> None:
        """Launcher callback: ``kind`` is ``started`` or ``finished``."""
        with self._lock:
            if kind == "started":
                self.running[ref.arm] += 1
            else:
                self.running[ref.arm] = max(0, self.running[ref.arm] - 1)
                status = (record or {}).get("status", "failed")
                self.counts[ref.arm]["ok" if status == "ok" else "failed"] += 1
                if self.enabled and not self.tty:
                    done = sum(sum(c.values()) for c in self.counts.values())
                    total = sum(self.total.values())
                    err = "" if status == "ok" else f": {str((record or {}).get('error') or '')[:160]}"
                    dur = (record or {}).get("duration_s")
                    dur_s = f" in {dur:.1f}s" if isinstance(dur, int | float) else ""
                    print(f"[{done}/{total}] {ref.arm} seed={ref.seed} {status}{dur_s}{err}",
                          file=sys.stderr, flush=True)
            if self._live is not None:
                self._live.update(self._table())

    def _table(self) -> Any:
        from rich.table import Table

        t = Table(title=f"ablate: trials per arm ({time.monotonic() - self._t0:.0f} s)", title_justify="left")
        for col in ("arm", "done", "running", "failed", "pending"):
            t.add_column(col, justify="left" if col == "arm" else "right")
        for a in self.arms:
            c = self.counts[a]
            pending = self.total[a] - c["ok"] - c["failed"] - self.running[a]
            t.add_row(a, str(c["ok"]), str(self.running[a]), str(c["failed"]), str(max(0, pending)))
        return t
