"""The installed distributions a process imported, with their versions: what a trial ran on, beyond the fixed list
of packages every manifest records (:data:`ablate.pin.pins.PACKAGES`).

A library that changes version between arms (``torchvision``, ``timm``, a project's own dependency) is a
confound whatever its name: each trial records, at its end, the distribution and version of every top-level
module in ``sys.modules`` that an installed distribution provides (:func:`imported_distributions`; the standard
library and the task's own code snapshot are not distributions), and the confound check compares each
distribution's version between the trials that imported it (a trial that did not import it says nothing).

Which distribution provides a module is asked of ``importlib.metadata`` once per process (a distribution named
as the module first, ``torchvision`` -> ``torchvision``; else :func:`importlib.metadata.packages_distributions`,
about 0.2 s of CPU, only when such a module was imported); a warm parent asks before it forks
(:func:`prime`), so its trials inherit the answers.
"""

from __future__ import annotations

import re
import sys
from typing import Any

#: top-level module -> its distributions' names (None: none provides it), as found in this process.
_PROVIDERS: dict[str, list[str] | None] = {}
#: distribution name -> version (None: not installed), as found in this process.
_VERSIONS: dict[str, str | None] = {}
_ALL: dict[str, list[str]] | None = None


def _version(dist: str) -> str | None:
    if dist not in _VERSIONS:
        from importlib import metadata  # noqa: PLC0415  # lazy: only at a trial's end

        try:
            _VERSIONS[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            _VERSIONS[dist] = None
    return _VERSIONS[dist]


def _providers(top: str) -> list[str] | None:
    """The distributions providing top-level module ``top`` (None for none)."""
    global _ALL
    if top in _PROVIDERS:
        return _PROVIDERS[top]
    named = re.sub(r"[-_.]+", "-", top).lower()
    if _version(named) is not None:  # the common case: the distribution is named as its module
        _PROVIDERS[top] = [named]
        return _PROVIDERS[top]
    if _ALL is None:
        from importlib import metadata  # noqa: PLC0415  # lazy: as above

        _ALL = metadata.packages_distributions()
    _PROVIDERS[top] = list(_ALL.get(top) or []) or None
    return _PROVIDERS[top]


def _candidates(exclude: str | None) -> list[str]:
    """Top-level modules of ``sys.modules`` that may come from a distribution: not built in or of the standard
    library, not ``__main__``, and (``exclude``: the code snapshot) not the task's own code."""
    stdlib = sys.stdlib_module_names
    out = []
    for name in sorted({n.partition(".")[0] for n in list(sys.modules)}):
        if name in stdlib or name.startswith("_") or name == "__main__":
            continue
        path = getattr(sys.modules.get(name), "__file__", None) or ""
        if exclude and str(path).startswith(exclude):
            continue
        out.append(name)
    return out


def imported_distributions(exclude: str | None = None) -> dict[str, str]:
    """``{distribution: version}`` of every installed distribution providing a module this process imported.

    Parameters
    ----------
    exclude : str, optional
        A directory (the code snapshot) whose modules are the task's own, never a distribution's.
    """
    out: dict[str, str] = {}
    for top in _candidates(exclude):
        for dist in _providers(top) or []:
            version = _version(dist)
            if version is not None:
                out[dist] = version
    return dict(sorted(out.items()))


def prime(exclude: str | None = None) -> Any:
    """Find the distributions of what this process imported now (a warm parent, before it forks)."""
    return imported_distributions(exclude)
