"""Content digests of files and directory trees: what a pin is checked against inside every trial.

DVC's own hashes (md5) are cached in its state database under a file's (inode, mtime, size), so an
edit that keeps those three (``rsync --inplace -t``, ``os.utime`` after a rewrite, a file system with
coarse timestamps) is not seen by it. These digests read every byte, every time, and never consult
metadata: the launching process records one per data path and one for the code snapshot, and each
trial recomputes them before and after its task. XXH3-128 (the ``xxhash`` package) reads about
6 GB/s here, against 0.6 GB/s for md5 (see ``benchmarks/pin_data.py``), so checking a 1 GB
directory twice per trial costs a few tenths of a second. It guards against accidents, not against
a crafted collision (XXH3 is not a cryptographic hash); other users cannot write the sweep dir or
(normally) the data at all.

A digest covers, for each regular file in sorted order of its path relative to the root: the path,
the size and the bytes. Directories named ``__pycache__`` are skipped (Python writes them beside the
code it imports); symlinks to files are followed for data (their target's content is what a task
reads) and hashed as their link text for code.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

#: The digest algorithm, written as the prefix of every digest (``xxh3_128:<32 hex digits>``).
ALGORITHM = "xxh3_128"
_CHUNK = 1 << 20
SKIP_DIRS = frozenset({"__pycache__"})


def _files(root: Path, skip: frozenset[str], follow: bool) -> Iterator[tuple[str, Path]]:
    if not root.is_dir():
        yield "", root
        return
    for dirpath, dirnames, filenames in os.walk(root):  # never into a linked dir (no loops)
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        if not follow:  # a link to a directory is an entry of its own (its link text), never walked into
            filenames = filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]
        for name in sorted(filenames):
            rel = os.path.relpath(os.path.join(dirpath, name), root)
            if rel in skip:
                continue
            yield rel, Path(dirpath, name)


def list_files(path: str | os.PathLike[str], *, skip: frozenset[str] = frozenset()) -> list[str]:
    """The paths (relative to ``path``) a digest of the tree covers: regular files and links, sorted,
    ``__pycache__`` dirs and ``skip`` left out, links to directories listed but not walked."""
    return [rel for rel, _ in _files(Path(path), skip, False)]


def digest(path: str | os.PathLike[str], *, skip: frozenset[str] = frozenset(),
           follow_symlinks: bool = True, files: list[str] | None = None) -> dict[str, Any]:
    """The content digest of a file or a directory tree.

    Parameters
    ----------
    path : path-like
        A file, or a directory (every regular file below it, ``__pycache__`` dirs excepted).
    skip : frozenset of str
        Paths relative to ``path`` to leave out (the snapshot's own marker file, the data links the
        command form adds to it).
    follow_symlinks : bool
        True (data): a symlink to a file counts as its target's bytes (DVC links files from its
        cache). False (code): a symlink counts as its link text, so it cannot point elsewhere unseen.
    files : list of str, optional
        Digest exactly these paths (relative to ``path``) instead of walking the tree: the code
        snapshot's files as listed at launch, so files a task writes into its working directory later
        do not count, while a listed file edited, deleted or dropped from the list does.

    Returns
    -------
    dict
        ``digest`` (``"xxh3_128:<hex>"``), ``files`` (count) and ``bytes`` (total size).

    Raises
    ------
    OSError
        When ``path`` or a file below it cannot be read (missing, permissions).
    """
    import xxhash  # noqa: PLC0415  # lazy: xxhash off this module's import

    h = xxhash.xxh3_128()
    buf = bytearray()  # as large as the largest file needs, up to _CHUNK (code files are small: a fork that
    view = memoryview(buf)  # zeroed 1 MiB for each digest paid 256 page faults, twice per trial)
    n_files = n_bytes = 0
    root = Path(path)
    if not root.exists():
        raise FileNotFoundError(2, "No such file or directory", str(root))
    entries = ((rel, root / rel) for rel in files) if files is not None else _files(root, skip, follow_symlinks)
    for rel, p in entries:
        if not follow_symlinks and p.is_symlink():
            target = os.readlink(p).encode("utf-8", "surrogateescape")
            h.update(b"L" + rel.encode("utf-8", "surrogateescape") + b"\0" + target + b"\0")
            n_files += 1
            continue
        fd = os.open(p, os.O_RDONLY)
        try:
            size = os.fstat(fd).st_size
            h.update(rel.encode("utf-8", "surrogateescape") + b"\0" + size.to_bytes(8, "little"))
            if len(buf) < min(_CHUNK, size + 1):  # + 1: the file's end shows in the same read
                view.release()
                buf = bytearray(min(_CHUNK, size + 1))
                view = memoryview(buf)
            while True:
                n = os.readv(fd, [buf])
                if not n:
                    break
                h.update(view[:n])
                n_bytes += n
        finally:
            os.close(fd)
        n_files += 1
    return {"digest": f"{ALGORITHM}:{h.hexdigest()}", "files": n_files, "bytes": n_bytes}


def try_digest(path: str | os.PathLike[str], *, skip: frozenset[str] = frozenset(),
               follow_symlinks: bool = True, files: list[str] | None = None) -> dict[str, Any]:
    """:func:`digest`, or ``{"error": ...}`` when the path cannot be read (for a trial's manifest)."""
    try:
        return digest(path, skip=skip, follow_symlinks=follow_symlinks, files=files)
    except OSError as exc:
        return {"error": f"{exc.filename or path}: {exc.strerror or exc}"}
