"""What every reader of :mod:`ablate.audit.sources` shares: the run selection, the progress line of a long
read, and the recognition of trials ablate launched itself."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ablate.audit.runs import Run
from ablate.errors import ConfigError

#: Which kinds record what a selection asks for.
SELECTS = {"experiment": ("mlflow", "wandb"), "run_id": ("mlflow", "wandb", "dvc", "ablate"),
           "tag": ("mlflow", "wandb")}
#: Runs read before a progress line is printed (and between two of them).
PROGRESS_EVERY = 1000


@dataclass(frozen=True)
class Selection:
    """Which runs of the sources to audit (``--experiment``, ``--run-id``, ``--tag``, ``--since``, ``--until``);
    empty: every run."""

    experiments: tuple[str, ...] = ()
    run_ids: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    since: float | None = None
    until: float | None = None

    def keeps(self, run: Run) -> bool:
        """Whether ``run`` is selected (its experiment, id or name, tags and start time)."""
        if self.experiments and run.experiment not in self.experiments:
            return False
        if self.run_ids and not ({run.id} | run.names) & set(self.run_ids):
            return False
        for t in self.tags:
            k, sep, v = t.partition("=")
            if not (t in run.tags or (sep and run.tags.get(k) == v)):
                return False
        if self.since is not None and (run.started is None or run.started < self.since):
            return False
        return not (self.until is not None and (run.started is None or run.started >= self.until))

    def check(self, source: str, kind: str) -> None:
        """Refuse a selector ``kind``'s records cannot answer (rather than read every run of it)."""
        asked = {"experiment": self.experiments, "run_id": self.run_ids, "tag": self.tags}
        for what, given in asked.items():
            if given and kind not in SELECTS[what]:
                flag = "--" + what.replace("_", "-")
                raise ConfigError(f"{flag} selects runs of {', '.join(SELECTS[what])} records; {source} is {kind} "
                                  f"records, which have no {what.replace('_', ' ')}", where=flag,
                                  fix=f"give the {kind} runs you mean as sources of their own, or leave {flag} out")


def progress(source: str, what: str = "runs") -> Callable[[int, int], None]:
    """A callback ``(done, total)`` printing a line on stderr every :data:`PROGRESS_EVERY` runs of a long read."""
    start = time.monotonic()

    def say(done: int, total: int) -> None:
        if total >= PROGRESS_EVERY and (done % PROGRESS_EVERY == 0 or done == total) and done:
            print(f"ablate audit: read {done:,} of {total:,} {what} of {source} ({time.monotonic() - start:.0f} s)",
                  file=sys.stderr, flush=True)

    return say


def ablate_trial(run: Run) -> str | None:
    """Why ``run`` is a trial ablate launched (its tracker's tags, the tags the audit's minimal ablation gives its
    trials, a run dir inside a sweep dir), or None."""
    audit = run.tags.get("ablate.audit") or next((t for t in run.tags if t.startswith("ablate-audit")), None)
    if audit:
        return f"a trial of the minimal ablation an audit wrote (tag {audit if '=' in audit else 'ablate.audit'})"
    ablation = run.tags.get("ablate.ablation_id") or run.config.get("ablate.ablation_id")
    if ablation:
        return f"a trial of ablate ablation {ablation}: its verdict is in its sweep dir"
    for where in (run.id if run.source in ("hydra", "tensorboard") else None, run.context.get("program")):
        if isinstance(where, str) and where and os.path.exists(where):
            for d in Path(where).absolute().parents:
                if (d / "ablation.yaml").is_file():
                    return f"a trial of the ablate sweep dir {d}"
    return None


