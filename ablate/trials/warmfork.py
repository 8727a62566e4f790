"""What a trial forked from the warm parent knows about that parent: the modules it held at the fork.

The warm parent (:mod:`ablate.trials.launchers.zygote`) calls :func:`forked` in each fork, first thing. The
trial (:func:`ablate.trials.trial.run_trial`) then records in its manifest, under ``warm``, what the parent
had preloaded (``preloaded``: the declared ``launcher.preload`` list and what it learned from earlier trials)
and which modules this trial imported that the parent had not (``imported``, from :func:`new_roots`); the
fork reports the same list to its parent, which imports those modules (when that is safe) before its next
fork, so later trials start with them loaded (docs/howto.md, "Fast warm trials").
"""

from __future__ import annotations

import sys
import weakref
from collections.abc import Iterable, Sequence
from typing import Any

#: Set in a fork of the warm parent (:func:`forked`): the parent's module names at the fork, and what it preloaded.
_STATE: dict[str, Any] = {}
#: Module names never reported: the running script, and the app modules the warm parent loads by path.
_NOT_IMPORTABLE = ("__main__", "__mp_main__", "_ablate_app_")


def forked(preloaded: Sequence[str], learned: Sequence[str]) -> None:
    """In a fork, before anything else runs: remember the parent's modules and what it had preloaded."""
    _STATE.clear()
    _STATE.update(modules=frozenset(sys.modules), declared=list(preloaded), learned=list(learned),
                  finalizers=tuple(getattr(weakref.finalize, "_registry", ())))


def leave_parent_finalizers() -> None:
    """In a fork about to exit: keep the exit from running the ``weakref.finalize`` callbacks the warm parent
    registered before the fork. They belong to the parent's objects (a ``TemporaryDirectory`` a task module made
    at import, torch's operator libraries): run in each fork, the first trial's exit deleted such a directory
    under every later trial, and torch's alone cost about 20 ms of CPU per trial (each one deregisters an
    operator library, writing to pages shared with the parent). The parent runs them when it exits; the
    finalizers the trial registered itself, and every ``atexit`` function, still run."""
    for fin in _STATE.get("finalizers") or ():
        fin.atexit = False


def is_fork() -> bool:
    """True in a trial forked from the warm parent (after :func:`forked`)."""
    return "modules" in _STATE


def preloaded() -> dict[str, list[str]]:
    """What the warm parent had imported beyond the task before this fork: ``declared`` (``launcher.preload``)
    and ``learned`` (imported by earlier trials); empty lists outside a fork."""
    return {"declared": list(_STATE.get("declared") or []), "learned": list(_STATE.get("learned") or [])}


def new_roots(before: Iterable[str] | None = None, now: Iterable[str] | None = None) -> list[str]:
    """The modules imported since the fork whose package the parent already held, in import order.

    ``torch._dynamo`` and the hundreds of its submodules it pulls in give ``["torch._dynamo"]``: importing
    each root imports what it imports. A submodule a root imports only lazily (inside a function) is a
    root of a later trial, once its package is preloaded. Modules that cannot be imported by name (the
    script, an app module loaded by path) and ones without a spec are left out.

    Parameters
    ----------
    before : iterable of str, optional
        The parent's modules; default those :func:`forked` recorded (empty list when not a fork).
    now : iterable of str, optional
        The modules now, in import order; default ``sys.modules``.
    """
    if before is None:
        if not is_fork():
            return []
        before = _STATE["modules"]
    held = set(before)
    out = []
    for name in list(sys.modules if now is None else now):
        if name in held or name.startswith(_NOT_IMPORTABLE):
            continue
        parent = name.rpartition(".")[0]
        if parent and parent not in held:
            continue  # imported with (or by) a new package: a root brings it again
        mod = sys.modules.get(name)
        spec = getattr(mod, "__spec__", None) if mod is not None else None
        if now is None and (spec is None or getattr(spec, "name", None) != name):
            continue  # an alias or a module made by hand: importing the name would give something else
        out.append(name)
    return out
