"""Check a task's ``fn`` before launch, without running any of the user's code.

The module file is located on disk (under the project root, else as an installed module) and parsed
with :mod:`ast`; the function must be defined, assigned or imported at its top level. A typo in
``task.fn`` is then an error before any trial starts, not N failed trials.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

from ablate.errors import ConfigError, close_matches


def split_spec(spec: str) -> tuple[str, str]:
    """Split ``module:function`` (or ``module.function``) into (module, attribute path).

    Raises
    ------
    ConfigError
        When ``spec`` has neither form.
    """
    if ":" in spec:
        mod, attr = spec.split(":", 1)
    elif "." in spec:
        mod, attr = spec.rsplit(".", 1)
    else:
        mod, attr = "", ""
    if not mod or not attr:
        raise ConfigError(f"{spec!r} is not `module:function`", where="task.fn",
                          fix="e.g. `fn: examples.digits.task:train` in conf/task/<name>.yaml")
    return mod, attr


def _module_file(mod: str, root: Path) -> Path | None:
    base = root.joinpath(*mod.split("."))
    for cand in (base.with_suffix(".py"), base / "__init__.py"):
        if cand.is_file():
            return cand
    return None


def _top_level_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.If | ast.Try):  # names defined under `if`/`try` at top level
            names |= _top_level_names(ast.Module(body=[*node.body, *getattr(node, "orelse", [])], type_ignores=[]))
    return names


def check_task_fn(spec: str, root: str | Path) -> Path | None:
    """Verify that ``spec`` names a function that exists, without importing it.

    Parameters
    ----------
    spec : str
        ``module:function`` from ``task.fn``.
    root : path-like
        The project directory the module is imported from (trials import it from the code snapshot).

    Returns
    -------
    Path or None
        The module's file when found in the project (None for an installed module).

    Raises
    ------
    ConfigError
        When the module cannot be found or does not define the function (close matches listed).
    """
    mod, attr = split_spec(spec)
    path = _module_file(mod, Path(root))
    if path is None:
        try:
            found = importlib.util.find_spec(mod)
        except (ImportError, ValueError):
            found = None
        if found is None:
            raise ConfigError(f"cannot find module {mod!r} (looked in {Path(root).absolute()} and the installed "
                              "packages)", where="task.fn",
                              fix="give its dotted path from the project root, e.g. examples.digits.task:train")
        return None
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except SyntaxError as exc:
        raise ConfigError(f"module {mod!r} ({path}) has a syntax error at line {exc.lineno}: {exc.msg}",
                          where="task.fn", fix="fix the syntax error") from None
    names = _top_level_names(tree)
    head = attr.split(".")[0]
    if head not in names:
        near = close_matches(head, sorted(n for n in names if not n.startswith("_")))
        hint = f" Close matches: {', '.join(near)}." if near else ""
        raise ConfigError(f"module {mod!r} ({path}) defines no {head!r}.{hint}", where="task.fn",
                          fix="name a function defined at the top level of that module")
    return path
