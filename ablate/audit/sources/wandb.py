"""W&B run dirs (``wandb/offline-run-*``, ``wandb/run-*``): the run's ``run-<id>.wandb`` records, parsed with the
``wandb`` library's own protobuf schema (``wandb.proto.wandb_internal_pb2.Record``), and ``files/requirements.txt``.

W&B records the config, the git commit, the Python version, the host, CPU and GPU, the installed packages
and every logged step; not the data unless the app logged artifacts (their digests are read as data versions).

The ``.wandb`` file is W&B's transaction log: a 7-byte header, then LevelDB-log framed records (32 KiB
blocks, each chunk a 7-byte header: CRC-32, length, type). wandb >= 0.20 no longer ships a Python reader of
that framing (``wandb.sdk.internal.datastore`` is gone; the Go core reads it), so :func:`records` un-frames
it here, checking each chunk's CRC, and the library's schema parses each record. A torn tail (the last chunk
cut short: a run still writing, or killed mid-write) ends the records; a chunk whose checksum does not match,
or a payload the schema cannot parse, is a corrupt file: one line naming it and the byte, never a traceback
and never a silent end.
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ablate.audit.runs import Run, commit_id, flatten, git_toplevel
from ablate.audit.sources.base import Selection, progress
from ablate.errors import ConfigError

_BLOCK = 32768
_HEADER = 7
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4


def _corrupt(path: Path, what: str) -> ConfigError:
    return ConfigError(f"{path} is corrupt: {what}", where="ablate audit SOURCE",
                       fix="restore the run dir from a copy, or leave it out: give the other run dirs as sources "
                       f"(`ablate audit {path.parent.parent}/offline-run-...`)")


def records(path: Path) -> Iterator[bytes]:
    """The serialized records of a ``.wandb`` file, in order (:func:`records_at`, without the positions)."""
    return (data for _, data in records_at(path))


def records_at(path: Path) -> Iterator[tuple[int, bytes]]:
    """The serialized records of a ``.wandb`` file with the byte each starts at, in order; a torn tail (a run
    still writing) ends them.

    Raises
    ------
    ConfigError
        Not a W&B transaction log; a chunk whose CRC does not match (a corrupt file). A file shorter than the
        header (0 bytes: the run was killed before wandb wrote it) holds no records, as a torn tail.
    """
    b = path.read_bytes()
    if len(b) < _HEADER and b":W&B".startswith(b[:4]):  # killed before its header was written: a torn tail at 0
        return
    if b[:4] != b":W&B":
        raise _corrupt(path, "it does not start with W&B's header (:W&B)")
    pos, part, start = _HEADER, b"", _HEADER
    while pos + 7 <= len(b):
        left = _BLOCK - pos % _BLOCK
        if left < 7:
            pos += left
            continue
        crc, n, kind = struct.unpack("<IHB", b[pos:pos + 7])
        if n == 0 and kind == 0:  # padding to the block's end
            pos += left
            continue
        data = b[pos + 7:pos + 7 + n]
        if len(data) < n:  # the last chunk cut short: the run is still writing, or was killed mid-write
            return
        if zlib.crc32(data, zlib.crc32(bytes([kind]))) & 0xFFFFFFFF != crc:
            raise _corrupt(path, f"the record at byte {pos} fails its CRC check ({len(b) - pos} bytes from there on "
                           "unread)")
        start = pos if kind in (_FULL, _FIRST) else start
        pos += 7 + n
        if kind == _FULL:
            yield start, data
        elif kind == _FIRST:
            part = data
        elif kind == _MIDDLE:
            part += data
        elif kind == _LAST:
            yield start, part + data


def _key(item: Any) -> str:
    return ".".join(item.nested_key) if item.nested_key else item.key


def _requirements(run_dir: Path) -> dict[str, str]:
    f = run_dir / "files" / "requirements.txt"
    out = {}
    if f.is_file():
        for line in f.read_text(encoding="utf-8", errors="replace").splitlines():
            name, sep, ver = line.strip().partition("==")
            if sep:
                out[name.lower()] = ver
    return out


def _parse(path: Path, pos: int, data: bytes, pb: Any) -> Any:
    """One record parsed by wandb's schema; a payload it cannot parse is a corrupt file (one line)."""
    from google.protobuf.message import DecodeError  # noqa: PLC0415  # lazy: protobuf comes with wandb, an optional extra

    rec = pb.Record()
    try:
        rec.ParseFromString(data)
    except DecodeError as exc:
        raise _corrupt(path, f"the record at byte {pos} does not parse as a W&B record ({exc})") from None
    return rec


def _json(path: Path, pos: int, text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        raise _corrupt(path, f"the record at byte {pos} holds a value that is not JSON ({text[:60]!r})") from None


def _environment(env: Any, context: dict[str, Any]) -> tuple[str | None, str | None]:
    """What W&B's environment record holds: into ``context``; returns (commit, root)."""
    if env.python:
        context["python"] = env.python
    if env.os:
        context["platform"] = env.os
    if env.program:
        context["program"] = env.program
    hw: dict[str, Any] = {}
    if env.cpu_count:
        hw["cpu_count"] = env.cpu_count
    if env.cpu.model:
        hw["cpu"] = env.cpu.model
    gpus = [g.name for g in env.gpu_nvidia] if hasattr(env, "gpu_nvidia") else []
    if gpus:
        hw["gpu"] = ", ".join(gpus)
    if hw:
        context["hardware"] = {**context.get("hardware", {}), **hw}
    return env.git.commit or None, env.root or None


def _scan(path: Path, pb: Any) -> dict[str, Any]:
    """Every record of one ``.wandb`` file folded into what the audit reads of a run."""
    got: dict[str, Any] = {"config": {}, "metrics": {}, "context": {}, "commit": None, "run_id": None, "root": None,
                           "started": None, "exit": None, "tags": [], "project": None, "name": None}
    config, metrics, context = got["config"], got["metrics"], got["context"]
    for pos, data in records_at(path):
        rec = _parse(path, pos, data, pb)
        kind = rec.WhichOneof("record_type")
        if kind in ("run", "config"):
            for u in (rec.run.config if kind == "run" else rec.config).update:
                config[_key(u)] = _json(path, pos, u.value_json)
        if kind == "run":
            got["run_id"], got["project"] = rec.run.run_id, rec.run.project or None
            got["name"], got["tags"] = rec.run.display_name or None, list(rec.run.tags)
            got["commit"] = rec.run.git.commit or got["commit"]
            got["started"] = rec.run.start_time.seconds + rec.run.start_time.nanos / 1e9 or got["started"]
            if rec.run.host:
                context["host"] = rec.run.host
        elif kind == "environment":
            commit, root = _environment(rec.environment, context)
            got["commit"], got["root"] = commit or got["commit"], root or got["root"]
        elif kind == "history":
            row = {_key(i): _json(path, pos, i.value_json) for i in rec.history.item}
            step = row.get("_step")
            for k, v in row.items():
                if not k.startswith("_") and isinstance(v, int | float) and not isinstance(v, bool):
                    metrics.setdefault(k, []).append((int(step) if isinstance(step, int) else None, float(v)))
        elif kind == "use_artifact":
            a = rec.use_artifact
            context.setdefault("data", {})[a.name or a.id] = getattr(a, "digest", "") or a.id
        elif kind == "exit":
            got["exit"] = rec.exit.exit_code
    return got


def read_run(path: Path, left_out: list[str] | None = None) -> Run | None:
    """One ``.wandb`` file as a :class:`Run`; None when the run did not finish (no exit record, or a non-zero
    exit code: named in ``left_out`` as such)."""
    try:
        from wandb.proto import wandb_internal_pb2  # noqa: PLC0415  # lazy: wandb is heavy and an optional extra
    except ImportError:
        raise ConfigError("reading W&B runs needs the wandb package", where="ablate audit SOURCE",
                          fix="pip install 'hydra-ablate[wandb]'") from None
    got = _scan(path, wandb_internal_pb2)
    config, context = got["config"], got["context"]
    if got["run_id"] is None or got["exit"] != 0:
        if left_out is not None:
            why = ("no run record" if got["run_id"] is None else
                   "no exit record (still running, or killed)" if got["exit"] is None else
                   f"ended with exit code {got['exit']} (failed)")
            left_out.append(f"W&B run {path.parent.name}: {why}")
        return None
    config.pop("_wandb", None)
    libs = _requirements(path.parent)
    if libs:
        context["libraries"] = libs
    commit = commit_id(got["commit"])
    if got["commit"] and commit is None:
        context["notes"] = [f"W&B run {got['run_id']} records the commit {got['commit'][:60]!r}, which is not a commit "
                            "id: taken as not recorded"]
    return Run(source="wandb", id=got["run_id"], config=flatten(config), metrics=got["metrics"], commit=commit,
               commit_how="recorded by W&B" if commit else "", context=context, started=got["started"],
               repo=git_toplevel(got["root"]), status="finished", names={got["name"]} if got["name"] else set(),
               tags={t: "" for t in got["tags"]}, experiment=got["project"])


def read(source: str, left_out: list[str] | None = None, selection: Selection | None = None) -> list[Run]:
    """Every finished run in ``source`` (a ``.wandb`` file, a run dir, or a ``wandb/`` dir of run dirs); the
    others are named in ``left_out``."""
    p = Path(source)
    files = [p] if p.is_file() else sorted(p.glob("run-*.wandb")) or sorted(p.glob("*/run-*.wandb"))
    files = sorted({f.resolve() for f in files})  # wandb/latest-run is a link to one of the run dirs
    say = progress(source)
    runs = []
    for i, f in enumerate(files, 1):
        r = read_run(f, left_out)
        if r is not None:
            runs.append(r)
        say(i, len(files))
    return runs
