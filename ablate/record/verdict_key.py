"""Reuse of a verdict already computed: ``ablate verdict DIR`` with unchanged inputs prints it again without
recomputing it (no scipy import, issue 15).

The key is a digest of everything the verdict is computed from, by content, never by mtime:

- every trial's ``result.json`` and ``manifest.json`` bytes (or their absence), in plan order;
- ``ablation.yaml`` and ``verdict_options.json`` bytes;
- the call, as the judge gives it (:func:`ablate.judge.verdict.reuse_call`): the options given, ``--reset``,
  whether plots are drawn, the config drift (the pinned config files' content now) and the versions of
  ablate, Python, numpy and scipy;
- the bytes of ablate's own source files (an edited checkout keeps its version number);
- with curve verdicts, the bytes (or absence) of every file the curves were read from: each finished trial's
  ``curve.json``, and the series a trial left that were read in its place (``steps.jsonl``, a ``metrics.csv``,
  ``stdout.log``... for curves asked for after the run); the names are recorded with the key (``inputs``) and
  hashed again to check it. The curve settings themselves are in ``ablation.yaml``, ``verdict_options.json``
  or the call.

This module is the record layer: it hashes what it is given and knows nothing of how a verdict is judged.

``write_verdict`` records it in ``.verdict_key.json`` with the digests of the files it wrote (verdict.json,
verdict.md, the CSVs, the tables, the plots named in verdict.json, curve plots included). ``ablate verdict``
reuses the verdict only when both match: an input changed, or an output was edited or deleted, means a recomputation.
``--against`` always recomputes (it reads another sweep dir), and so does a verdict whose plots are still
marked pending. The trial records are read to check the key, so reuse costs their reading and hashing.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from typing import Any

from ablate.record.sweepdir import VERDICT_OPTIONS, SweepDir, read_bytes, write_json

#: The key file beside verdict.json.
KEY_FILE = ".verdict_key.json"
#: Files every written verdict has (the plots are added from verdict.json's ``plots``).
OUTPUTS = ("verdict.json", "verdict.md", "results.csv", "per_seed.csv", "summary.json", "ablation_table.tex",
           "ablation_table.csv")


class TrialDigest:
    """A running BLAKE2b digest of the trial records as they are read (``result.json``, ``manifest.json``).

    The readers that visit every trial (:func:`ablate.record.results.collect`,
    :func:`ablate.record.results.iter_manifests`) feed it the bytes they parse, so a cold verdict reads each
    record once; :func:`trial_digest` feeds it the same files in the same order to check a key.
    """

    def __init__(self) -> None:
        self._h = hashlib.blake2b(digest_size=32)

    def add(self, name: str, data: bytes | None) -> None:
        """Add one file: its name relative to the trials dir, and its bytes (None: absent)."""
        self._h.update(name.encode() + (b"\0-\0" if data is None else b"\0+%d\0" % len(data)))
        if data is not None:
            self._h.update(data)

    def hexdigest(self) -> str:
        return self._h.hexdigest()


def trial_digest(sd: SweepDir, plan: Mapping[str, Any]) -> str:
    """The digest of every trial's result.json, then every trial's manifest.json, in plan order: what a
    verdict computed from ``collect`` and ``iter_manifests`` fed its :class:`TrialDigest`."""
    d = TrialDigest()
    for name in ("result.json", "manifest.json"):
        for arm in plan["arms"]:
            for seed in plan["seeds"]:
                d.add(f"{arm['name']}/seed={seed}/{name}", _maybe(sd.trial_file(arm["name"], seed, name)))
    return d.hexdigest()


def _maybe(path: str | os.PathLike[str]) -> bytes | None:
    try:
        return read_bytes(path)
    except FileNotFoundError:
        return None


def context(sd: SweepDir, plan: Mapping[str, Any], call: Mapping[str, Any]) -> str:
    """The digest of everything but the trial records: plan and remembered options (bytes), the call (the
    options given, and what the judge adds: config drift, library versions) and ablate's source."""
    h = hashlib.blake2b(digest_size=32)
    for name in ("ablation.yaml", VERDICT_OPTIONS):
        data = _maybe(sd.root / name)
        h.update(name.encode() + (b"\0-\0" if data is None else b"\0+%d\0" % len(data) + data))
    h.update(json.dumps({"call": call, "code": _code_digest()},
                        sort_keys=True, default=repr).encode())
    return h.hexdigest()


def _code_digest() -> str:
    """BLAKE2b of ablate's own source files: an edited checkout (same version number) is another ablate."""
    h = hashlib.blake2b(digest_size=32)
    top = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the ablate package (this file: record/)
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames.sort()
        for name in sorted(filenames):
            if name.endswith(".py"):
                path = os.path.join(dirpath, name)
                with open(path, "rb") as fh:
                    data = fh.read()
                h.update(os.path.relpath(path, top).encode() + b"\0%d\0" % len(data) + data)
    return h.hexdigest()


def _outputs(sd: SweepDir) -> dict[str, str | None]:
    """BLAKE2b of each output file (None: absent): :data:`OUTPUTS` and the plots verdict.json names."""
    out = {name: _file_digest(sd.root / name) for name in OUTPUTS}
    try:
        plots = json.loads(read_bytes(sd.verdict_json)).get("plots") or {}
    except (FileNotFoundError, ValueError, AttributeError):
        plots = {}
    for k, v in plots.items():
        if k in ("values", "paired", "forest") and isinstance(v, str):
            out[v] = _file_digest(sd.root / v)
        if k == "curves" and isinstance(v, dict):  # one curve plot per treatment
            for name in v.values():
                if isinstance(name, str) and _inside(sd, name):
                    out[name] = _file_digest(sd.root / name)
    return out


def _inside(sd: SweepDir, name: str) -> bool:
    """Whether ``name`` (read from a record: data) names a path under the sweep dir: relative, without ``..``."""
    return bool(name) and not os.path.isabs(name) and ".." not in name.replace("\\", "/").split("/")


def inputs_digest(sd: SweepDir, names: list[str]) -> str | None:
    """BLAKE2b of the files ``names`` (relative to the sweep dir), in order: each name, and its bytes or its
    absence; None when a name points outside the sweep dir (a key file edited by hand: never reused)."""
    h = hashlib.blake2b(digest_size=32)
    for name in names:
        if not isinstance(name, str) or not _inside(sd, name):
            return None
        data = _maybe(sd.root / name)
        h.update(name.encode() + (b"\0-\0" if data is None else b"\0+%d\0" % len(data)))
        if data is not None:
            h.update(data)
    return h.hexdigest()


def _file_digest(path: str | os.PathLike[str]) -> str | None:
    data = _maybe(path)
    return None if data is None else hashlib.blake2b(data, digest_size=32).hexdigest()


def record(sd: SweepDir, key: Mapping[str, Any] | None) -> None:
    """Write ``.verdict_key.json`` for the verdict just written (``key``: :func:`combine`), with its
    outputs' digests; ``key`` None removes it (that verdict is not reusable)."""
    path = sd.root / KEY_FILE
    if key is None:
        path.unlink(missing_ok=True)
        return
    write_json(path, {"key": dict(key), "outputs": _outputs(sd)})


def outputs_recorded(sd: SweepDir) -> None:
    """Re-record the outputs' digests under the same key (after the plots rewrote verdict.json and .md)."""
    try:
        key = json.loads(read_bytes(sd.root / KEY_FILE)).get("key")
    except (FileNotFoundError, ValueError, AttributeError):
        return
    if isinstance(key, dict):
        record(sd, key)


def combine(ctx: str, trials: str, inputs: list[str] | None = None, sd: SweepDir | None = None) -> dict[str, Any]:
    """The verdict's key: :func:`context`, the trial digest (checked in that order: the context is cheap, the
    trial digest reads every record) and, with curve verdicts, the files they were read from (``inputs``,
    relative to ``sd``) with their digest (:func:`inputs_digest`)."""
    key: dict[str, Any] = {"context": ctx, "trials": trials}
    if inputs is not None and sd is not None:
        key.update(inputs=list(inputs), inputs_digest=inputs_digest(sd, list(inputs)))
    return key


def reusable(sd: SweepDir, plan: Mapping[str, Any], call: Mapping[str, Any]) -> bool:
    """Whether the verdict on disk was computed from exactly these inputs (same key) and its files are
    those written then (same digests), plots drawn. Reads every trial record to check."""
    try:
        rec = json.loads(read_bytes(sd.root / KEY_FILE))
    except (FileNotFoundError, ValueError):
        return False
    if not isinstance(rec, dict) or not isinstance(rec.get("key"), dict) or rec.get("outputs") != _outputs(sd):
        return False
    try:
        plots = json.loads(read_bytes(sd.verdict_json)).get("plots") or {}
    except (FileNotFoundError, ValueError, AttributeError):
        return False
    if plots.get("pending"):
        return False
    key = rec["key"]
    if "inputs" in key and (not isinstance(key["inputs"], list) or key.get("inputs_digest") is None
                            or key["inputs_digest"] != inputs_digest(sd, key["inputs"])):
        return False  # a file a curve was read from changed, appeared or went (curve.json, steps.jsonl ...)
    return key.get("context") == context(sd, plan, call) and key.get("trials") == trial_digest(sd, plan)
