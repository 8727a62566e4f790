"""A failed trial's error as one line (the line of its log that says why it died, not a traceback's head); the
statistics of failure counts are :mod:`ablate.stats.failures`."""

from __future__ import annotations

import re

_EXC_LINE = re.compile(r"^(?:[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning|Failure)|[\w.\-]+: error)\b.*")
#: How a trial's error introduces the end of its log (the command form, the local and SLURM launchers).
_LOG_HEADS = ("; end of its log", "; log tail", "log tail:")


def exception_line(text: str) -> str:
    """The line of a log that says why the script died: the last exception line of a traceback (``ValueError:
    ...``) or of an argparse error (``train.py: error: ...``), else the last non-empty line ('' for none)."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in reversed(lines):
        if _EXC_LINE.match(ln):
            return ln[:300]
    return lines[-1][:300] if lines else ""


def failure_line(error: object, limit: int = 300) -> str:
    """A trial's recorded error as one line: its first line, with the exception line from the end of the log
    it quotes when that first line does not already hold it."""
    text = str(error or "").strip()
    if not text:
        return ""
    first, _, rest = text.partition("\n")
    if rest:
        exc = exception_line(rest)
        for head in _LOG_HEADS:
            first = first.split(head, 1)[0]
        first = first.rstrip(" :;")
        if exc and exc not in first:
            first = f"{first}: {exc}"
    return first[:limit]


def log_end(error: object, n_lines: int = 5) -> list[str]:
    """The last ``n_lines`` lines of a trial's recorded error (the end of the log it quotes)."""
    lines = str(error or "").strip().splitlines()
    return lines[1:][-n_lines:]
