"""W&B run dirs (``wandb/offline-run-*``, ``wandb/run-*``): the run's ``run-<id>.wandb`` records, parsed with the
``wandb`` library's own protobuf schema (``wandb.proto.wandb_internal_pb2.Record``), and ``files/requirements.txt``.

W&B records the config, the git commit, the Python version, the host, CPU and GPU, the installed packages
and every logged step; not the data unless the app logged artifacts (their digests are read as data versions).

The ``.wandb`` file is W&B's transaction log: a 7-byte header, then LevelDB-log framed records (32 KiB
blocks, each chunk a 7-byte header: CRC-32, length, type). wandb >= 0.20 no longer ships a Python reader of
that framing (``wandb.sdk.internal.datastore`` is gone; the Go core reads it), so :func:`records` un-frames
it here, checking each chunk's CRC, and the library's schema parses each record.
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ablate.audit.runs import Run, flatten, git_toplevel
from ablate.errors import ConfigError

_BLOCK = 32768
_HEADER = 7
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4


def records(path: Path) -> Iterator[bytes]:
    """The serialized records of a ``.wandb`` file, in order; a torn tail (a run still writing) ends them."""
    b = path.read_bytes()
    if b[:4] != b":W&B":
        raise ConfigError(f"{path} is not a W&B transaction log", where="ablate audit SOURCE",
                          fix="give the run dir wandb wrote (wandb/offline-run-*)")
    pos, part = _HEADER, b""
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
        if len(data) < n or zlib.crc32(data, zlib.crc32(bytes([kind]))) & 0xFFFFFFFF != crc:
            return
        pos += 7 + n
        if kind == _FULL:
            yield data
        elif kind == _FIRST:
            part = data
        elif kind == _MIDDLE:
            part += data
        elif kind == _LAST:
            yield part + data


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


def read_run(path: Path, left_out: list[str] | None = None) -> Run | None:
    """One ``.wandb`` file as a :class:`Run` (None when the run did not finish: no exit record)."""
    try:
        from wandb.proto import wandb_internal_pb2
    except ImportError:
        raise ConfigError("reading W&B runs needs the wandb package", where="ablate audit SOURCE",
                          fix="pip install 'hydra-ablate[wandb]'") from None
    config: dict[str, Any] = {}
    metrics: dict[str, list[tuple[int | None, float]]] = {}
    context: dict[str, Any] = {}
    commit = run_id = root = None
    started = None
    finished = False
    for data in records(path):
        rec = wandb_internal_pb2.Record()
        rec.ParseFromString(data)
        kind = rec.WhichOneof("record_type")
        if kind == "run":
            run_id = rec.run.run_id
            for u in rec.run.config.update:
                config[_key(u)] = json.loads(u.value_json)
            commit = rec.run.git.commit or commit
            started = rec.run.start_time.seconds + rec.run.start_time.nanos / 1e9 or started
            if rec.run.host:
                context["host"] = rec.run.host
        elif kind == "config":
            for u in rec.config.update:
                config[_key(u)] = json.loads(u.value_json)
        elif kind == "environment":
            env = rec.environment
            if env.python:
                context["python"] = env.python
            if env.os:
                context["platform"] = env.os
            if env.git.commit:
                commit = env.git.commit
            if env.root:
                root = env.root
            if env.program:
                context["program"] = env.program
            hw = {}
            if env.cpu_count:
                hw["cpu_count"] = env.cpu_count
            if env.cpu.model:
                hw["cpu"] = env.cpu.model
            gpus = [g.name for g in env.gpu_nvidia] if hasattr(env, "gpu_nvidia") else []
            if gpus:
                hw["gpu"] = ", ".join(gpus)
            if hw:
                context["hardware"] = {**context.get("hardware", {}), **hw}
        elif kind == "history":
            row = {_key(i): json.loads(i.value_json) for i in rec.history.item}
            step = row.get("_step")
            for k, v in row.items():
                if not k.startswith("_") and isinstance(v, int | float) and not isinstance(v, bool):
                    metrics.setdefault(k, []).append((int(step) if isinstance(step, int) else None, float(v)))
        elif kind == "use_artifact":
            a = rec.use_artifact
            context.setdefault("data", {})[a.name or a.id] = getattr(a, "digest", "") or a.id
        elif kind == "exit":
            finished = rec.exit.exit_code == 0
    if not finished or run_id is None:
        if left_out is not None:
            left_out.append(f"W&B run {path.parent.name}: " + ("no exit record (still running, or killed)"
                                                              if not finished else "no run record"))
        return None
    config.pop("_wandb", None)
    libs = _requirements(path.parent)
    if libs:
        context["libraries"] = libs
    return Run(source="wandb", id=run_id, config=flatten(config), metrics=metrics, commit=commit,
               commit_how="recorded by W&B" if commit else "", context=context, started=started,
               repo=git_toplevel(root))


def read(source: str, left_out: list[str] | None = None) -> list[Run]:
    """Every finished run in ``source`` (a ``.wandb`` file, a run dir, or a ``wandb/`` dir of run dirs); the
    others are named in ``left_out``."""
    p = Path(source)
    files = [p] if p.is_file() else sorted(p.glob("run-*.wandb")) or sorted(p.glob("*/run-*.wandb"))
    files = sorted({f.resolve() for f in files})  # wandb/latest-run is a link to one of the run dirs
    return [r for r in (read_run(f, left_out) for f in files) if r is not None]
