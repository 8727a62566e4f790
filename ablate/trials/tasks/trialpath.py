"""Trial paths a script can take as values: no character its parser is known to split on.

Trial dirs are named ``trials/<arm>/seed=<k>`` (``lr=0.1``, ``seed=3``), and many scripts split each
argument on ``=`` (nanoGPT's configurator), on ``,`` (list flags) or on spaces (shell wrappers). Rather
than renaming trial dirs (existing sweep dirs stay valid), a script is handed a *safe alias*: a symlink
``<sweep dir>/links/t-<hash>`` to the trial dir (or, when the sweep dir's own path is unsafe, one under
the temp dir). ablate itself never writes through the link; the trial dir stays the record.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import tempfile
from pathlib import Path

#: Characters a script's parser is known to split a value on.
UNSAFE = re.compile(r"[=,\s'\"]")
LINKS_DIR = "links"


def is_safe(path: str | os.PathLike[str]) -> bool:
    """True when ``path`` holds none of :data:`UNSAFE`."""
    return UNSAFE.search(str(path)) is None


def safe_alias(trial_dir: Path, sweep_root: Path | None) -> Path:
    """``trial_dir`` itself when safe, else a symlink to it whose path is safe (made once, reused).

    Parameters
    ----------
    trial_dir : Path
        The trial's dir (absolute).
    sweep_root : Path or None
        The sweep dir holding it; the link goes in its ``links/`` when that path is safe.
    """
    trial_dir = Path(trial_dir).absolute()
    if is_safe(trial_dir):
        return trial_dir
    name = "t-" + hashlib.sha256(str(trial_dir).encode()).hexdigest()[:16]
    if sweep_root is not None and is_safe(Path(sweep_root).absolute()):
        base = Path(sweep_root).absolute() / LINKS_DIR
    else:
        base = Path(tempfile.gettempdir()) / f"ablate-links-{os.getuid()}"
    base.mkdir(mode=0o700 if sweep_root is None else 0o755, exist_ok=True)
    link = base / name
    with contextlib.suppress(OSError):
        if os.readlink(link) == str(trial_dir):
            return link
    tmp = base / f".{name}.{os.getpid()}"
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    os.symlink(trial_dir, tmp, target_is_directory=True)
    os.replace(tmp, link)
    return link
