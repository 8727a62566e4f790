"""Metrics from printed lines: ``key: value`` / ``key=value`` pairs in a line, or the user's ``task.metric_pattern``."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Sequence
from typing import Any

from ablate.errors import ConfigError
from ablate.metrics.series import Series

#: A metric's value in a ``key: value`` pair (a number, nan or inf).
_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|infinity|inf)"
#: A ``key: value`` / ``key=value`` pair anywhere in a line, as people print them (``epoch 2 val_acc: 0.80``,
#: ``step 10 | loss=0.3 acc: 0.9``, Lightning's ``[..., loss=0.3, v_num=0]``, a printed dict ``{'loss': 0.3}``):
#: the name starts where no name character precedes it, may be quoted, and the number is taken whole (what
#: follows it is the line's end, a space or a separator; ``0.9.1``, ``95%``, ``3.2s`` or ``12:30`` is no value).
_PAIR = re.compile(rf"(?<![\w./\-'\"])(['\"]?)([A-Za-z_][\w./\-]*)\1\s*(?::|=)\s*({_NUMBER})(?=$|[\s,;|)\]}}])",
                   re.IGNORECASE)


def line_pairs(text: str) -> dict[str, float]:
    """The ``key: value`` / ``key=value`` pairs of one printed line: the last occurrence of each name.

    >>> line_pairs("step 10 | loss=0.3 acc: 0.9 loss=0.25")
    {'loss': 0.25, 'acc': 0.9}
    """
    out: dict[str, float] = {}
    for m in _PAIR.finditer(text):
        out[m.group(2)] = float(m.group(3))  # a later occurrence replaces an earlier one
    return out


def compile_patterns(patterns: Any) -> list[re.Pattern[str]]:
    """``task.metric_pattern`` (a regular expression, or a list of them) compiled; each needs a named group.

    Raises
    ------
    ConfigError
        Not a string or list of strings, a pattern that does not compile, or one without a named group.
    """
    if patterns is None:
        return []
    items = [patterns] if isinstance(patterns, str) else patterns
    if not isinstance(items, list | tuple) or not all(isinstance(x, str) for x in items):
        raise ConfigError(f"must be a regular expression or a list of them, got {patterns!r}",
                          where="task.metric_pattern",
                          fix=r"e.g. `metric_pattern: 'val loss (?P<val_loss>[0-9.eE+-]+)'`")
    out = []
    for x in items:
        try:
            rx = re.compile(x)
        except re.error as exc:
            raise ConfigError(f"{x!r} is not a regular expression ({exc})", where="task.metric_pattern",
                              fix="quote it in single quotes in YAML, and escape regex characters with \\") from None
        if not set(rx.groupindex) - {"step"}:
            raise ConfigError(f"{x!r} has no named group, so it names no metric", where="task.metric_pattern",
                              fix=r"name the number's group after the metric: `(?P<val_loss>[0-9.eE+-]+)`")
        out.append(rx)
    return out


def read_lines(lines: Iterable[str], patterns: Sequence[re.Pattern[str]] = ()
               ) -> tuple[dict[str, Series], dict[str, list[str]]]:
    """Metrics in printed lines, and the line each value came from.

    With ``patterns``, every named group of a pattern found in a line is a metric (a group ``step`` gives
    the step, else the line number from 1); without, ``key: value`` / ``key=value`` pairs anywhere in a line
    (:func:`line_pairs`: the last of each name per line). A group whose text is no number is skipped.
    """
    out: dict[str, Series] = {}
    where: dict[str, list[str]] = {}
    for i, line in enumerate(lines, 1):
        text = line.rstrip("\n")
        if not patterns:
            for name, num in line_pairs(text).items():
                out.setdefault(name, []).append((i, num))
                where.setdefault(name, []).append(f"line {i}: {text.strip()[:200]}")
            continue
        for rx in patterns:
            m = rx.search(text)
            if not m:
                continue
            groups = m.groupdict()
            step: int | None = i
            if groups.get("step") is not None:
                try:
                    step = int(float(groups["step"]))
                except ValueError:
                    step = i
            for name, val in groups.items():
                if name == "step" or val is None:
                    continue
                try:
                    num = float(val)
                except ValueError:
                    continue
                _whole_number(m, name, text, i)
                out.setdefault(name, []).append((step, num))
                where.setdefault(name, []).append(f"line {i}: {text.strip()[:200]}")
    return out, where


#: A number as Python's ``float`` reads one (sign, digits, a point, an exponent): what a metric's group must take whole.
_WHOLE_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def _whole_number(m: re.Match[str], name: str, text: str, lineno: int) -> None:
    """Refuse a pattern whose group ``name`` took only the start of a number in the line (``[0-9.]+`` on
    ``1.1e-06`` takes ``1.1``; ``\\d+`` on ``0.97`` takes ``0``): the value recorded would be wrong, silently.

    Raises
    ------
    ConfigError
        Naming the group, what it took, the whole number and the line, with a pattern that takes it.
    """
    whole = _WHOLE_NUMBER.match(text, m.start(name))
    if whole is not None and whole.end() > m.end(name):
        raise ConfigError(f"the group {name!r} took {m.group(name)!r} of the number {whole.group()!r} in printed "
                          f"line {lineno} ({text.strip()[:200]!r}): the metric would be recorded wrong",
                          where="task.metric_pattern",
                          fix=f"capture the whole number, e.g. `(?P<{name}>[-+0-9.eE]+)` or "
                          f"`(?P<{name}>[-+]?\\d*\\.?\\d+(?:[eE][-+]?\\d+)?)`")


def read_stdout(lines: Iterable[str]) -> dict[str, Series]:
    """``key: value`` / ``key=value`` pairs anywhere in a line (:func:`line_pairs`); the step is the line number
    (from 1)."""
    return read_lines(lines)[0]


def closest_lines(lines: Sequence[str], patterns: Sequence[re.Pattern[str]], metric: str, n: int = 3,
                  window: int = 400) -> list[str]:
    """The printed lines (of the last ``window``) that came closest to ``patterns`` (or to ``metric``), in log
    order, numbered from 1: what to compare the pattern with when it matched nothing."""
    start = max(0, len(lines) - window)
    recent = [(start + i + 1, ln.strip()) for i, ln in enumerate(lines[start:]) if ln.strip()]
    if not recent:
        return []
    literals = [re.sub(r"\(\?P<\w+>(?:[^()]|\([^()]*\))*\)|\\[dDsSwW]|[\\^$.*+?()\[\]{}|]", " ", rx.pattern)
                for rx in patterns] or [metric]

    def score(text: str) -> float:  # the share of the pattern's literal text found, in order, in the line
        best = 0.0
        for lit in literals:
            lit = " ".join(lit.split())
            if lit:
                sm = difflib.SequenceMatcher(None, lit, text[:300], autojunk=False)
                best = max(best, sum(b.size for b in sm.get_matching_blocks()) / len(lit))
        return best

    best = sorted(recent, key=lambda t: (-score(t[1]), -t[0]))[:n]  # the closest; among equals, the latest
    return [f"line {i}: {text[:200]}" for i, text in sorted(best)]


