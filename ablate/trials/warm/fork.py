"""What a trial forked from the warm parent knows about that parent: the modules it held at the fork.

The warm parent (:mod:`ablate.trials.warm.parent`) calls :func:`forked` in each fork, first thing. The
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


class ParentModules:
    """The warm parent's module names, kept between its forks: :meth:`now` builds them again only when
    ``sys.modules`` changed (its length or newest name), so neither the parent nor each fork walks every module.

    Walking ``sys.modules`` in a fork of a parent holding torch touches each of its ~1,300 names (a reference
    count is a write): about 750 copy-on-write page faults, 2-3 ms of CPU, paid twice per trial (at the fork
    and for :func:`new_roots`). Built here in the parent, the fork inherits the set untouched.
    """

    def __init__(self) -> None:
        self._key: tuple[int, str | None] | None = None
        self._names: frozenset[str] = frozenset()

    def now(self) -> tuple[frozenset[str], str | None]:
        """The parent's module names and the newest of them (the last key of ``sys.modules``)."""
        key = (len(sys.modules), next(reversed(sys.modules), None))
        if key != self._key:
            self._names, self._key = frozenset(sys.modules), key
        return self._names, key[1]


def forked(preloaded: Sequence[str], learned: Sequence[str],
           modules: tuple[frozenset[str], str | None] | None = None) -> None:
    """In a fork, before anything else runs: remember the parent's modules (``modules``, from
    :meth:`ParentModules.now` in the parent just before the fork; default: read them here) and what it had
    preloaded."""
    names, last = modules if modules is not None else (frozenset(sys.modules), next(reversed(sys.modules), None))
    _STATE.clear()
    _STATE.update(modules=names, last=last, declared=list(preloaded), learned=list(learned))
    counter = getattr(weakref.finalize, "_index_iter", None)
    if counter is not None and isinstance(getattr(weakref.finalize, "_registry", None), dict):
        _STATE["first_own_finalizer"] = next(counter)  # every finalizer made from here on has a larger index
    else:  # another Python's weakref: list the parent's finalizers now
        _STATE["finalizers"] = tuple(getattr(weakref.finalize, "_registry", ()))


def leave_parent_finalizers() -> None:
    """In a fork about to exit: keep the exit from running the ``weakref.finalize`` callbacks the warm parent
    registered before the fork. They belong to the parent's objects (a ``TemporaryDirectory`` a task module made
    at import, torch's operator libraries): run in each fork, the first trial's exit deleted such a directory
    under every later trial, and torch's alone cost about 20 ms of CPU per trial (each one deregisters an
    operator library, writing to pages shared with the parent). The parent runs them when it exits; the
    finalizers the trial registered itself, and every ``atexit`` function, still run.

    The registry then holds only the trial's own finalizers (those indexed from :func:`forked` on, the newest
    ones: read from its end), so the parent's are never touched (about 110 copy-on-write page faults, when each
    was marked not to run)."""
    first = _STATE.get("first_own_finalizer")
    if first is None:
        for fin in _STATE.get("finalizers") or ():
            fin.atexit = False
        return
    registry = weakref.finalize._registry  # type: ignore[attr-defined]
    own = []
    for fin in reversed(registry):
        if registry[fin].index < first:
            break
        own.append(fin)
    _STATE["parent_registry"] = registry  # kept: freed here, it would touch each of the parent's finalizers
    weakref.finalize._registry = {fin: registry[fin] for fin in reversed(own)}  # type: ignore[attr-defined]


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
    names: Iterable[str] | None = None
    if before is None:
        if not is_fork():
            return []
        before = _STATE["modules"]
        names = _since_fork() if now is None else None
    held = before if isinstance(before, frozenset | set) else set(before)
    out = []
    for name in list(names if names is not None else sys.modules if now is None else now):
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


def _since_fork() -> list[str] | None:
    """The names added to ``sys.modules`` since the fork, in import order, read from its end (new names are
    appended) back to the parent's newest, so the parent's names are never touched; None when that cannot
    tell (the parent's newest name is gone, or a parent module was removed): then the caller reads them all.

    Exact when it answers: the names before the marker are then as many as the parent held, and each of them
    was there at the fork (a name added later goes after the marker), so they are the parent's names.
    """
    last = _STATE.get("last")
    tail: list[str] = []
    for name in reversed(sys.modules):
        if name == last:
            break
        tail.append(name)
    else:
        return None
    if len(sys.modules) != len(_STATE["modules"]) + len(tail):
        return None
    return tail[::-1]
