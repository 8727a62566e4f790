"""The command that runs an ablation again with more seeds per arm, as verdict.md's "Next:" line prints it.

The plan (``ablation.yaml``) records the command line it was planned from under ``command``
(:func:`ablate.plan.overrides.command_record`): the
overrides as typed (Hydra syntax, ``app.`` overrides included), and ``--config-path``/``--config-dir``/
``--config-name`` where they were given. :func:`rerun_command` renders that command with ``seeds=N`` in place of the
run's own seed setting (and, under ``sequential=group``, a last look at N), every other override kept, each word
quoted for a POSIX shell, so it runs as printed from the project's root. Pure: no I/O.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from ablate.plan.overrides import override_key

#: Overrides a rerun sets itself (``seeds``), or leaves out (``dry_run``: the rerun runs).
REPLACED = frozenset({"seeds", "dry_run"})
#: A transfer check's own overrides: one scale's sweep dir reruns as a plain ablation at that scale.
SCALE_KEYS = frozenset({"scale.key", "scale.values"})


def without_keys(command: Mapping[str, Any] | None, keys: frozenset[str], extra: Sequence[str] = ()
                 ) -> dict[str, Any] | None:
    """``command`` with the overrides of ``keys`` left out and ``extra`` added (one scale of a transfer check)."""
    if command is None:
        return None
    kept = [o for o in command.get("overrides") or [] if override_key(o) not in keys]
    return {**command, "overrides": [*kept, *extra]}


def shell_word(word: str) -> str:
    """``word`` quoted for a POSIX shell, readably: as it is when safe, in single quotes, or in double quotes when it
    holds a single quote and nothing a double-quoted word would expand (``"task.name='a b'"``)."""
    quoted = shlex.quote(word)
    if quoted == word or "'" not in word or any(ch in word for ch in '"$`\\!'):
        return quoted
    return f'"{word}"'


def recorded(command: Any) -> bool:
    """Whether a plan's ``command`` entry is one :func:`rerun_command` can render (a record read back is checked:
    a list of override strings, the other fields text or absent)."""
    if not isinstance(command, Mapping) or not isinstance(command.get("overrides"), list):
        return False
    texts = [*command["overrides"], *(command.get("config_dirs") or [])]
    others = [command.get("config_path"), command.get("config_name")]
    return all(isinstance(o, str) for o in texts) and all(o is None or isinstance(o, str) for o in others)


def rerun_command(command: Mapping[str, Any] | None, seeds: int, *, variables: Sequence[str] = (),
                  looks: Sequence[int] | None = None) -> str:
    """``ablate -m ...`` with ``seeds=N``: the same arms and overrides, N seeds per arm, a new sweep dir.

    Parameters
    ----------
    command : mapping or None
        The plan's ``command`` (:func:`ablate.plan.overrides.command_record`); None (or a record that is not one)
        for a plan written before it was recorded: the command is then ``ablate -m variable=<names> seeds=N``.
    seeds : int
        Seeds per arm.
    variables : sequence of str
        The variables' names (used only when ``command`` is None).
    looks : sequence of int, optional
        The looks of ``sequential=group``: the last look is raised to ``seeds`` when below it (the last look sets
        the seed count).

    Returns
    -------
    str
        The command, each word quoted for a POSIX shell where needed (:func:`shell_word`).
    """
    if not recorded(command):
        command = None
        overrides = [f"variable={','.join(variables) or '?'}"]
    else:
        overrides = list(command["overrides"])
    out: list[str] = []
    placed = False
    for o in overrides:
        k = override_key(o)
        if k == "seeds" and not placed:
            out.append(f"seeds={seeds}")
            placed = True
        elif k not in REPLACED and not (k == "looks" and looks):
            out.append(o)
    if not placed:
        at = next((i + 1 for i, o in enumerate(out) if override_key(o) == "variable"), len(out))
        out.insert(at, f"seeds={seeds}")
    if looks:
        last = list(looks) if looks[-1] >= seeds else [*[x for x in looks if x < seeds], seeds]
        out.append(f"looks=[{','.join(str(x) for x in last)}]")
    head = ["ablate", "-m"]
    if command is not None:  # recorded: checked above
        if command.get("config_path"):
            head += ["--config-path", str(command["config_path"])]
        for d in command.get("config_dirs") or []:
            head += ["--config-dir", str(d)]
        if command.get("config_name"):
            head += ["--config-name", str(command["config_name"])]
    return " ".join(shell_word(w) for w in [*head, *out])
