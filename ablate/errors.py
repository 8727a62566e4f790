"""Exceptions raised by ablate.

The tree::

    AblateError                      root; ``exit_code`` says how the CLI exits
    ├── UserError (ValueError)       a mistake in the user's input; exit 2, one message, no traceback
    │   ├── ConfigError              a config value, key or override is wrong
    │   ├── PlanError                the treatments cannot be derived or proved to differ only in the variable
    │   ├── PinError                 code or data cannot be pinned (dirty tree, untracked data, no git ...)
    │   ├── SweepDirError            a sweep dir is missing, locked by another process, or unreadable
    │   ├── SchedulerError           the scheduler (SLURM) is missing, does not answer, or refuses the jobs
    │   └── TrackerError             MLflow / W&B refused or could not be reached while logging
    └── AblationFailed (RuntimeError) the ablation ran but failed (abort on failure, invalid verdict); exit 1

User errors carry ``what`` went wrong, ``where`` (a parameter, file or key) and ``fix`` (what to do), so
every message has the same shape.
"""

from __future__ import annotations

from collections.abc import Iterable


class AblateError(Exception):
    """Root of every error ablate raises on purpose."""

    exit_code = 1


class UserError(AblateError, ValueError):
    """A mistake in what the user asked for: printed as one message, exit code 2, no traceback.

    Parameters
    ----------
    what : str
        What was wrong, in one sentence.
    where : str, optional
        The parameter, key or file at fault (printed first, in backticks).
    fix : str, optional
        How to fix it.
    """

    exit_code = 2

    def __init__(self, what: str, *, where: str | None = None, fix: str | None = None) -> None:
        self.what = what
        self.where = where
        self.fix = fix
        super().__init__(self.message)

    @property
    def message(self) -> str:
        parts = []
        if self.where:
            parts.append(f"`{self.where}`: ")
        parts.append(self.what.rstrip("."))
        parts.append(".")
        if self.fix:
            parts.append(f" Fix: {self.fix.rstrip('.')}.")
        return "".join(parts)

    def __str__(self) -> str:
        return self.message


class ConfigError(UserError):
    """A config value, key or command-line override is wrong."""


class PlanError(UserError):
    """The treatments cannot be derived, or differ from control in more than the variable."""


class PinError(UserError):
    """Code, data or environment cannot be pinned, or a trial saw something other than the pins."""


class SweepDirError(UserError):
    """A sweep dir is missing, not an ablate sweep dir, or locked by another running process."""


class SchedulerError(UserError):
    """The scheduler's tools are missing, it does not answer, or it refuses the jobs (``launcher=slurm``)."""


class TrackerError(UserError):
    """The tracker (MLflow, W&B) refused what was logged or could not be reached; ``ablate track DIR`` retries
    without logging anything twice."""


class AblationFailed(AblateError, RuntimeError):
    """The ablation ran but did not finish (``on_failure=abort``) or its verdict is invalid: exit 1."""


def close_matches(word: str, candidates: Iterable[str], n: int = 5) -> list[str]:
    """Return up to ``n`` candidates that look like ``word`` (difflib ratio >= 0.5), best first.

    Candidates that contain ``word`` (or its last dotted part) as a substring are included too, so
    ``lr`` finds ``task.optim.lr``.
    """
    import difflib  # noqa: PLC0415  # lazy: difflib only for a did-you-mean, kept off `ablate --help`'s import

    cands = list(dict.fromkeys(candidates))
    found = difflib.get_close_matches(word, cands, n=n, cutoff=0.5)
    leaf = word.rsplit(".", 1)[-1]
    for c in cands:
        if len(found) >= n:
            break
        if c not in found and (leaf and (c.endswith("." + leaf) or c == leaf)):
            found.append(c)
    return found

