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
