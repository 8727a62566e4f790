"""The content digest of a tree (:mod:`ablate.pin.digest`) is XXH3-128 over each file's path, size and bytes (a
directory's files sorted, then its subdirectories, sorted), whatever the sizes: checked against the same layout
hashed by hand with xxhash."""

from __future__ import annotations

import os
from pathlib import Path

import xxhash

from ablate.pin.digest import digest, list_files


def _by_hand(root: Path, rels: list[str]) -> str:
    h = xxhash.xxh3_128()
    for rel in rels:
        data = (root / rel).read_bytes()
        h.update(rel.encode() + b"\0" + len(data).to_bytes(8, "little") + data)
    return f"xxh3_128:{h.hexdigest()}"


def test_files_small_and_larger_than_one_read_digest_as_their_bytes(tmp_path: Path) -> None:
    sizes = {"a/empty.txt": 0, "a/one.py": 1, "b.py": 5000, "c/big.bin": (1 << 20) + (1 << 19) + 3, "d.py": 70}
    for rel, n in sizes.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(os.urandom(n))
    order = ["b.py", "d.py", "a/empty.txt", "a/one.py", "c/big.bin"]
    assert list_files(tmp_path) == order
    got = digest(tmp_path)
    assert got["digest"] == _by_hand(tmp_path, order)
    assert got["files"] == 5 and got["bytes"] == sum(sizes.values())
    listed = digest(tmp_path, files=["d.py", "c/big.bin", "b.py"])  # the listed files only, in the list's order
    assert listed["digest"] == _by_hand(tmp_path, ["d.py", "c/big.bin", "b.py"])
