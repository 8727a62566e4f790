"""The warm parent started early: while ablate plans and pins, it imports the task's installed packages.

``ablate -m`` spends 1.5-2.5 s on its own work before any trial can start (Hydra's composition, the plan, the
git and DVC pins, the code snapshot), and the warm parent (:mod:`ablate.trials.warm.parent`) then spends
2-7 s importing the task, most of it torch. Both are one core's work on a machine that has two. So once the
options are parsed and the task is known (:func:`ablate.orchestrate.pipeline.prepare`), ``launcher=local`` with
``launcher.warm=true`` starts the warm parent at once (:func:`start`), without a sweep dir, naming the modules
the task's files import at their top (:func:`task_imports`, read with :mod:`ast`, nothing imported here). It
imports those of them that are safe to import before the code is pinned (:func:`installed`), inside the same
:class:`ablate.trials.warm.hazards.Watch` and with the same checks (no thread, no socket, no CUDA) as
the task's import, then waits. When the launch begins, :func:`claim` hands it over: the sweep dir arrives on its
stdin, and only then does it import the task module itself, from the pinned snapshot, as a warm parent started
then would (:class:`ablate.trials.warm.starter.WarmParent`).

What may be imported early, and why that is safe: a module whose top-level package is installed, found on the warm
parent's ``sys.path`` (site-packages, the standard library, a ``PYTHONPATH`` entry), which never holds the
project's directory, with every file of it in the interpreter's own installation (``sys.prefix``, even for a venv
inside the project) or outside the project's git work tree, and which the project does not provide itself (no
``torch.py`` or ``torch/`` of its own, which the snapshot would put first on ``sys.path``; checked in the live tree
before the import and again in the snapshot at the hand-over, :func:`shadowed`). Such a module is the same file
whether the live tree or the snapshot asks for it: the code pin does not cover it (the environment pin records its
version), so importing it before the pin changes nothing a trial sees. The task's own modules, and any module of
the project (an editable install of it included), are imported only after the hand-over, from the snapshot, never
from the live tree that could still change. Only the names the task's files import unconditionally at their top are
taken (not those under ``if`` or ``try``, nor inside functions): the warm parent then holds nothing the task's own
import would not have loaded.

Anything unusual sends the launch back to a warm parent started the ordinary way: an early import that fails
or leaves a thread, a socket or CUDA behind (the early parent says so and exits; the one started afresh
reports it with the task's own import line), or an early parent whose environment, working directory or
``PYTHONHASHSEED`` is not the one the launch needs. When planning refuses (bad input, a dirty tree), or the run
ends without a launch taking it, :func:`scope` kills it (its own process group: it has forked nothing yet) before
the error is printed, so no process outlives a refused run.
"""

from __future__ import annotations

import ast
import contextlib
import contextvars
import importlib.machinery
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from ablate.trials import proctree

#: The early warm parents started in the current :func:`scope` (None outside one: then none is started).
_STARTED: contextvars.ContextVar[list[EarlyParent] | None] = contextvars.ContextVar("ablate_early_parents",
                                                                                   default=None)
#: At most this many of the project's files are read for the task's imports.
MAX_FILES = 50


class EarlyParent:
    """A warm parent started before its sweep dir exists (``python -m ablate.trials.warm.parent --early``).

    Parameters
    ----------
    cwd : str
        The project dir (its working dir, and so every trial's).
    env : mapping
        Its environment, ``PYTHONHASHSEED`` included (fixed when its interpreter starts).
    modules : sequence of str
        What it imports while it waits, in this order (up to the first that :func:`installed` does not allow).
    """

    def __init__(self, cwd: str, env: Mapping[str, str], modules: Sequence[str]) -> None:
        self.cwd = cwd
        self.env = dict(env)
        self.modules = list(modules)
        cmd = [sys.executable, "-m", "ablate.trials.warm.parent", "--early", *self.modules]
        with tempfile.TemporaryFile() as early_log:  # what it prints before the hand-over: it copies it to its log
            self.proc: subprocess.Popen[bytes] | None = subprocess.Popen(
                cmd, cwd=cwd, env=self.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=early_log,
                start_new_session=True)

    def hand_over(self, sweep_root: str, log: str, entry: str, preload: Sequence[str],
                  learn: bool) -> subprocess.Popen[bytes] | None:
        """Tell it its sweep dir (and log, entry, ``launcher.preload``, ``launcher.learn_imports``); returns its
        process for :class:`ablate.trials.warm.starter.WarmParent` to own from here, or None when it is gone."""
        proc, self.proc = self.proc, None
        if proc is None:
            return None
        msg = {"sweep": sweep_root, "log": log, "entry": entry, "preload": [str(m) for m in preload],
               "learn": bool(learn)}
        try:
            assert proc.stdin is not None
            proc.stdin.write((_json(msg) + "\n").encode())
            proc.stdin.flush()
        except OSError:  # it has exited already (an early import it refused): it is of no use
            _kill(proc)
            return None
        return proc

    def close(self) -> None:
        """End it at once, if not handed over: SIGKILL to its process group (it has forked nothing), then reap it."""
        proc, self.proc = self.proc, None
        if proc is not None:
            _kill(proc)


def _json(msg: Mapping[str, Any]) -> str:
    return json.dumps(msg)


def _kill(proc: subprocess.Popen[bytes]) -> None:
    proctree.kill_group(proc.pid)
    proc.wait()
    for pipe in (proc.stdin, proc.stdout):
        if pipe is not None:
            with contextlib.suppress(OSError):
                pipe.close()


@contextlib.contextmanager
def scope() -> Iterator[None]:
    """Allow early warm parents within (``ablate -m``, :func:`ablate.orchestrate.pipeline.start`); at its end,
    however it ends (a refusal, Ctrl-C, a run whose launch took none), kill each one no launch took."""
    started: list[EarlyParent] = []
    token = _STARTED.set(started)
    try:
        yield
    finally:
        _STARTED.reset(token)
        for parent in started:
            parent.close()


def active() -> bool:
    """True within a :func:`scope` (only there is an early warm parent started)."""
    return _STARTED.get() is not None


def start(cwd: str, env: Mapping[str, str], modules: Sequence[str]) -> EarlyParent | None:
    """Start an early warm parent importing ``modules`` (the task's, :func:`task_imports`); None outside a
    :func:`scope` or without a module to import."""
    started = _STARTED.get()
    if started is None or not modules:
        return None
    parent = EarlyParent(cwd, env, modules)
    started.append(parent)
    return parent


def claim(cwd: str, env: Mapping[str, str], hash_seed_fits: Callable[[str | None], bool]) -> EarlyParent | None:
    """The early warm parent of this scope that can serve a launch from ``cwd`` with environment ``env`` (its
    ``PYTHONHASHSEED`` aside: ``hash_seed_fits`` decides that one), taken out of the scope; None when there is
    none. One that cannot serve it is killed here: no later launch of this ablation would take it either."""
    started = _STARTED.get() or []
    while started:
        parent = started.pop(0)
        same = {k: v for k, v in parent.env.items() if k != "PYTHONHASHSEED"} == \
            {k: v for k, v in env.items() if k != "PYTHONHASHSEED"}
        if parent.proc is not None and parent.cwd == cwd and same and hash_seed_fits(parent.env.get("PYTHONHASHSEED")):
            return parent
        parent.close()
    return None


def task_imports(task: Mapping[str, Any], cwd: str) -> list[str]:
    """The modules outside the project that importing an ``fn`` task's module (or an ``app`` task's script) imports
    before it runs anything but imports and definitions, in the order it imports them.

    Read from the live tree with :mod:`ast`; nothing is imported. The files run as Python would run them: each
    package's ``__init__.py`` first, the project's own modules where they are imported (followed into, once
    each). Top-level statements that cannot change how a later import behaves (imports, docstrings,
    undecorated ``def`` and ``class``, assignments of constants, ``if TYPE_CHECKING:``) are passed over; the
    first other one (``os.environ[...] = ...``, a call, ``if``, ``try``) ends the list, since what follows it
    could depend on it. So the early warm parent imports a prefix of what the task's own import would import,
    in the same order, before the same nothing else; each name is checked there (:func:`installed`).
    """
    root = Path(cwd)
    if isinstance(task.get("fn"), str):
        spec = str(task["fn"])
        top = [spec.split(":", 1)[0] if ":" in spec else spec.rpartition(".")[0]]
        files = []
    elif isinstance(task.get("app"), str):
        top, files = [], [(root / str(task["app"]), "__main__", False)]
    else:
        return []
    walk = _Walk(root)
    try:
        for name in top:
            walk.module(name)
        for path, mod, pkg in files:
            walk.file(path, mod, pkg)
    except _SideEffect:
        pass
    return walk.names


class _SideEffect(Exception):
    """A statement that may change what a later import does: the list ends before it."""


class _Walk:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.names: list[str] = []
        self.seen: set[Path] = set()

    def module(self, name: str) -> None:
        """``import name``: run the project's files it runs, or note it as a module from outside the project."""
        found = _module_files(name, self.root)
        if not found:
            if name not in self.names:
                self.names.append(name)
            return
        for path, mod, pkg in found:
            self.file(path, mod, pkg)

    def file(self, path: Path, mod: str, pkg: bool) -> None:
        if path in self.seen:
            return
        self.seen.add(path)
        if len(self.seen) > MAX_FILES:
            raise _SideEffect
        try:
            tree = ast.parse(path.read_bytes(), str(path))
        except (OSError, SyntaxError, ValueError):
            raise _SideEffect from None  # Python would fail here: nothing after it is known
        package = mod if pkg else mod.rpartition(".")[0]
        postponed = any(isinstance(n, ast.ImportFrom) and n.module == "__future__"
                        and any(a.name == "annotations" for a in n.names) for n in tree.body)
        for i, node in enumerate(tree.body):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    self.module(alias.name)
            elif isinstance(node, ast.ImportFrom):
                if node.module == "__future__":
                    continue
                base = _absolute(node, package)
                if base is None:
                    raise _SideEffect
                self.module(base)
                if _module_files(base, self.root):  # `from pkg import sub`: the project's submodule runs too
                    for alias in node.names:
                        if alias.name != "*" and _module_files(f"{base}.{alias.name}", self.root):
                            self.module(f"{base}.{alias.name}")
            elif not _quiet(node, i == 0, postponed):
                raise _SideEffect


def _absolute(node: ast.ImportFrom, package: str) -> str | None:
    """The absolute module of ``from ... import``; None for a relative one that climbs out of the project."""
    if node.level == 0:
        return node.module
    parts = package.split(".") if package else []
    if node.level - 1 > len(parts) or (node.level - 1 == len(parts) and not node.module):
        return None
    base = parts[:len(parts) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])]) or None


def _quiet(node: ast.stmt, first: bool, postponed: bool) -> bool:
    """Whether a top-level statement leaves later imports as they were (see :func:`task_imports`): it evaluates
    nothing but constants (``postponed``: the file has ``from __future__ import annotations``)."""
    if isinstance(node, ast.Expr):
        return isinstance(node.value, ast.Constant) and (first or isinstance(node.value.value, str))
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        a = node.args
        notes = [x.annotation for x in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg] if x is not None]
        return (not node.decorator_list and all(_constant(d) for d in [*a.defaults, *a.kw_defaults] if d is not None)
                and (postponed or all(_plain_note(n) for n in [*notes, node.returns] if n is not None)))
    if isinstance(node, ast.ClassDef):
        return (not node.decorator_list and not node.bases and not node.keywords
                and all(_quiet(b, k == 0, postponed) for k, b in enumerate(node.body)))
    if isinstance(node, ast.Assign):
        return all(isinstance(t, ast.Name) for t in node.targets) and _constant(node.value)
    if isinstance(node, ast.AnnAssign):
        return (isinstance(node.target, ast.Name) and (node.value is None or _constant(node.value))
                and (postponed or _plain_note(node.annotation)))
    if isinstance(node, ast.If) and not node.orelse:  # `if TYPE_CHECKING:` imports for annotations only
        test = node.test
        return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
            isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING" and isinstance(test.value, ast.Name))
    return isinstance(node, ast.Pass)


def _constant(node: ast.expr) -> bool:
    try:
        ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return True


def _plain_note(node: ast.expr) -> bool:
    """An annotation evaluated at definition that only looks up a name (``int``, ``str``) or is a constant."""
    return isinstance(node, ast.Name | ast.Constant)


def _module_files(name: str, root: Path) -> list[tuple[Path, str, bool]]:
    """The project's files (below ``root``) that ``import name`` runs, in order (each package's ``__init__.py``,
    then the module), each with its module name and whether it is a package; empty when the top-level package
    is not the project's."""
    parts = name.split(".")
    if not all(p.isidentifier() for p in parts) or importlib.machinery.PathFinder.find_spec(parts[0], [str(root)]) \
            is None:
        return []
    out, here = [], root
    for k, part in enumerate(parts):
        here = here / part
        mod = ".".join(parts[:k + 1])
        if (here / "__init__.py").is_file():
            out.append((here / "__init__.py", mod, True))
        elif here.with_suffix(".py").is_file():
            out.append((here.with_suffix(".py"), mod, False))
            break
        elif not here.is_dir():
            return out if k else []
    return out


def installed(name: str, project: str) -> bool:
    """Whether the module ``name`` may be imported before the code is pinned (the module docstring says why):
    its top-level package is found on ``sys.path`` (which, in the warm parent, never holds the project dir),
    the project dir does not provide one of that name, and each of its files lies in this interpreter's own
    installation (``sys.prefix``: the standard library, site-packages, even in a venv inside the project) or
    outside the project's git work tree (never a file of the project, such as an editable install of it)."""
    top = name.split(".")[0]
    if not top.isidentifier() or shadowed([top], project):
        return False  # the project's own (the snapshot would put it first on sys.path)
    if top in sys.builtin_module_names:
        return True
    try:
        spec = importlib.machinery.PathFinder.find_spec(top)
    except (ImportError, ValueError):
        return False
    if spec is None:
        return False
    places = [spec.origin] if spec.origin and spec.has_location else []
    places += list(spec.submodule_search_locations or [])
    tree = _work_tree(project)
    prefixes = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    return bool(places) and all(any(_inside(p, pre) for pre in prefixes) or not _inside(p, tree) for p in places)


def shadowed(names: Sequence[str], code_root: str) -> list[str]:
    """Those of ``names`` whose top-level package ``code_root`` (the project dir, or its pinned snapshot) holds
    a module or package of the same name (a trial would import that one: it comes first on ``sys.path``)."""
    return [n for n in names if importlib.machinery.PathFinder.find_spec(n.split(".")[0], [code_root]) is not None]


def _work_tree(project: str) -> str:
    """The git work tree holding ``project`` (the nearest dir above it with ``.git``), else ``project``."""
    here = Path(project).resolve()
    for d in (here, *here.parents):
        if (d / ".git").exists():
            return str(d)
    return str(here)


def _inside(path: str, tree: str) -> bool:
    real = os.path.realpath(path)
    return real == tree or real.startswith(tree.rstrip(os.sep) + os.sep)
