"""Where a project's configs are: ``./conf`` of the directory ablate runs in, or the nearest parent that has one.

Kept apart from :mod:`ablate.plan.compose` so ``ablate --help`` finds the project's config groups without loading
the planning modules.
"""

from __future__ import annotations

import os
from pathlib import Path


def default_config_path(cwd: str | os.PathLike[str] | None = None) -> str | None:
    """``./conf`` (absolute) when it exists in ``cwd``, else None (only the built-in configs)."""
    p = Path(cwd or os.getcwd()) / "conf"
    return str(p.absolute()) if p.is_dir() else None


def conf_above(cwd: str | os.PathLike[str] | None = None) -> Path | None:
    """The nearest parent directory of ``cwd`` holding a ``conf/`` dir (a project root the user is
    below), or None. Used to explain a missing ``./conf``, never to pick a config dir silently."""
    here = Path(cwd or os.getcwd()).absolute()
    for parent in here.parents:
        if (parent / "conf").is_dir() and ((parent / "conf" / "ablate.yaml").is_file()
                                           or (parent / "conf" / "task").is_dir()):
            return parent
    return None


def project_of(config_path: str | os.PathLike[str] | None) -> Path | None:
    """The project root a config dir names (the directory holding it), when that is not the working dir.

    A project's paths (``task.data``, the task's module or script, the git repo its code is pinned to, the
    sweep dir) are relative to its root, so ``ablate --config-path ../conf`` and ``ablate.run("../conf")``
    from a subdirectory (``notebooks/``) run there. None when ``config_path`` is None, not a directory (Hydra's
    own error names it), or already in the working dir.
    """
    if config_path is None:
        return None
    conf = Path(os.path.abspath(config_path))  # `..` resolved (not symlinks)
    if not conf.is_dir():
        return None
    root = conf.parent
    return None if root == Path(os.path.abspath(os.getcwd())) else root
