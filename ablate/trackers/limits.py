"""Names and values within a tracker's limits, kept unique and marked when changed (pure: no I/O).

Trackers reject or silently cut what is over their limits: MLflow keys allow only alphanumerics and
``_-. :/`` (250 characters), param values 6000 characters; W&B run names, groups and artifact
names 128, tags 64. Cleaning up names naively merges distinct ones (``acc@1`` and ``acc#1`` both
become ``acc_1``), and cutting values makes two arms look the same. Here a name whose clean-up meets
another name, or that is over the limit, gets a separator (``:`` for MLflow keys, ``~`` elsewhere)
plus six hex digits of the SHA-256 of the original, so every logged name stays unique; a cut
value ends with ``…[cut; sha256 <16 hex>]`` of the full text. :class:`NameMap` records original ->
logged for everything that changed.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

#: Characters MLflow accepts in param, metric and tag keys.
_MLFLOW_BAD = re.compile(r"[^A-Za-z0-9_\-. :/]")
#: Characters W&B accepts in artifact names (a conservative set).
_WANDB_ARTIFACT_BAD = re.compile(r"[^A-Za-z0-9_.-]")
MLFLOW_KEY_MAX = 250
WANDB_NAME_MAX = 128
WANDB_TAG_MAX = 64


def digest(text: str, n: int) -> str:
    """First ``n`` hex digits of the SHA-256 of ``text`` (UTF-8)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:n]


def cut(text: str, limit: int) -> tuple[str, bool]:
    """``text`` within ``limit`` characters: unchanged, or cut and marked with the full text's hash.

    Returns
    -------
    (str, bool)
        The text to log and whether it was cut. A cut text ends ``…[cut; sha256 <16 hex>]``, so two
        values that differ only after the limit still log differently.
    """
    if len(text) <= limit:
        return text, False
    mark = f"…[cut; sha256 {digest(text, 16)}]"
    return text[:max(0, limit - len(mark))] + mark, True


def fit(name: str, limit: int, sep: str = "~") -> str:
    """``name`` if it fits ``limit`` characters, else its start plus ``<sep><6 hex of sha256(name)>``."""
    if len(name) <= limit:
        return name
    tail = sep + digest(name, 6)
    return name[:limit - len(tail)] + tail


def mlflow_key(name: str) -> str:
    """``name`` with characters MLflow rejects replaced by ``_`` (not yet unique or within length)."""
    return _MLFLOW_BAD.sub("_", name)


def wandb_artifact_name(name: str) -> str:
    """``name`` with characters W&B rejects in artifact names replaced by ``-``."""
    return _WANDB_ARTIFACT_BAD.sub("-", name)


@dataclass
class NameMap:
    """Original -> logged names of one kind (metric, param, tag ...), for the names that changed.

    Attributes
    ----------
    changed : dict
        Kind -> {original: logged}; only names whose logged form differs.
    cut : dict
        Kind -> {original key: sha256 of the full value} for values that were cut.
    merged : dict
        Dotted param name two or more config keys flatten to -> the names the others got (:func:`flat_params`).
    """

    changed: dict[str, dict[str, str]] = field(default_factory=dict)
    cut: dict[str, dict[str, str]] = field(default_factory=dict)
    merged: dict[str, list[str]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.changed or self.cut or self.merged)

    def keys(self, kind: str, names: Iterable[str], clean: Callable[[str], str], limit: int,
             sep: str = "~") -> dict[str, str]:
        """Map every name to a unique, valid logged name (see :func:`unique_names`); record changes."""
        out = unique_names(names, clean, limit, sep)
        changed = {k: v for k, v in out.items() if k != v}
        if changed:
            self.changed.setdefault(kind, {}).update(changed)
        return out

    def value(self, kind: str, key: str, text: str, limit: int) -> str:
        """``text`` within ``limit`` (see :func:`cut`); records the full value's hash when it was cut."""
        logged, was_cut = cut(text, limit)
        if was_cut:
            self.cut.setdefault(kind, {})[key] = hashlib.sha256(text.encode("utf-8")).hexdigest()
        return logged

    def to_dict(self) -> dict[str, Any]:
        """``{"renamed": {kind: {original: logged}}, "cut": {kind: {key: sha256}}}``, plus ``"merged": {dotted
        name: [the names the other config keys got]}`` when config keys shared a param name (:func:`flat_params`)."""
        return {"renamed": self.changed, "cut": self.cut, **({"merged": self.merged} if self.merged else {})}


def unique_names(names: Iterable[str], clean: Callable[[str], str], limit: int, sep: str = "~") -> dict[str, str]:
    """Valid, unique logged names for ``names``.

    A name that ``clean`` leaves unchanged and that fits ``limit`` is logged as is; one that only
    needed cleaning and meets no other name is logged cleaned (``lr=0.2`` -> ``lr_0.2``). Every other
    name (two originals that clean to the same text, as ``acc@1`` and ``acc#1``, or a clean-up that
    equals an original, or one over ``limit``) is cleaned, shortened to leave room, and gets
    ``<sep><6 hex of sha256(original)>``; should two still meet, ``-2``, ``-3`` ... follow.

    Parameters
    ----------
    names : iterable of str
    clean : callable
        Replaces the characters the tracker rejects.
    limit : int
        Longest logged name, in characters.
    sep : str
        Put before the hash; a character ``clean`` keeps (MLflow keys: ``:``).

    Returns
    -------
    dict
        original -> logged, in the order given.
    """
    names = list(dict.fromkeys(names))
    exact = {n for n in names if clean(n) == n and len(n) <= limit}
    cleaned = {n: clean(n) for n in names if n not in exact and len(clean(n)) <= limit}
    counts: dict[str, int] = {}
    for c in cleaned.values():
        counts[c] = counts.get(c, 0) + 1
    out: dict[str, str] = {}
    used = set(exact)
    for n in names:
        if n in exact:
            out[n] = n
            continue
        c = cleaned.get(n)
        if c is not None and counts[c] == 1 and c not in exact:  # cleaned up, and still unique: readable as is
            used.add(c)
            out[n] = c
            continue
        tail = sep + digest(n, 6)
        base = clean(n)[:limit - len(tail)] + tail
        logged, i = base, 2
        while logged in used:
            logged = f"{base[:limit - len(str(i)) - 1]}-{i}"
            i += 1
        used.add(logged)
        out[n] = logged
    return out


def flat_params(config: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """A nested config flattened to dotted param names, one name per value.

    Two keys can flatten to one name: a nested ``opt: {lr: 0.1}`` and a literal key ``"opt.lr": 0.5`` are
    both ``opt.lr``. The one whose path holds the fewest keys with a dot in them (the nested one; among
    equals, the first) keeps the dotted name; every other is named with its dotted keys quoted,
    ``["opt.lr"]`` (``task["opt.lr"]``), so no value is lost; lists and scalars are leaves.

    Parameters
    ----------
    config : mapping
        A resolved config (nested).

    Returns
    -------
    (dict, dict)
        name -> value, and for every name two keys would share: that name -> the names given to the others.
    """
    leaves: list[tuple[tuple[str, ...], Any]] = []

    def walk(node: Any, path: tuple[str, ...]) -> None:
        if isinstance(node, Mapping) and (node or not path):
            for k, v in node.items():
                walk(v, (*path, str(k)))
        else:
            leaves.append((path, node))

    walk(config, ())
    groups: dict[str, list[int]] = {}
    for i, (path, _) in enumerate(leaves):
        groups.setdefault(".".join(path), []).append(i)
    keep = {min(ix, key=lambda i: (sum("." in s for s in leaves[i][0]), i)) for ix in groups.values()}
    out: dict[str, Any] = {}
    merged: dict[str, list[str]] = {}
    for i, (path, value) in enumerate(leaves):
        name = ".".join(path)
        if i not in keep:
            quoted = "".join(f'["{s}"]' if "." in s else f".{s}" for s in path).lstrip(".")
            other, n = quoted, 2
            while other in out or other in groups:
                other, n = f"{quoted}~{n}", n + 1
            merged.setdefault(name, []).append(other)
            name = other
        out[name] = value
    return out, merged
