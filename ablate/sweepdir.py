"""The on-disk layout of a sweep dir, and the only code that writes into it.

::

    <sweep dir>/
      ablation.yaml               the plan: arms, seeds, pins, options (written before any trial starts)
      code/                       snapshot of the pinned commit that trials import the task from
      trials/<arm>/seed=<k>/      config.yaml (resolved by the trial), manifest.json, result.json,
                                  stdout.log, stderr.log (launcher=local: only when the trial wrote to them),
                                  attempts/<n>/ (outputs of interrupted attempts)
      warm-parent.log             launcher=local: what the task module printed while the warm parent
                                  imported it (only when it printed something)
      slurm/                      launcher=slurm only: jobs.json (which job runs which trial) and
                                  <job id>/ (submitit's pickles, the job's logs)
      repro/<arm>/seed=<k>/<n>/   the n-th re-run of that trial by `ablate repro` (same files as a
                                  trial, plus report.json); never read by status, results or verdict
      results.csv                 one row per trial, failures included
      per_seed.csv                the verdict metric, one row per seed, one column per arm
      verdict.json  verdict.md  *.png
      summary.json                verdict.json's numbers without lists (per arm, per treatment): `dvc metrics`
      .lock                       held (flock) by the one ablate process working on this dir

Every file is written atomically (temp file in the same directory, fsync, rename), so a crash at any
moment leaves either the old file or the new one, never half of one. Directories are created readable
by their owner only (mode 0o700) unless ``mode`` says otherwise. Records are JSON or YAML: nothing here
is ever unpickled.
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import shutil
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ablate.errors import SweepDirError
from ablate.names import safe_name  # noqa: F401  (re-exported; naming helpers live in the pure ablate.names)

PLAN_FILE = "ablation.yaml"
RESULTS_FILE = "results.csv"
PER_SEED_FILE = "per_seed.csv"
SUMMARY_FILE = "summary.json"
VERDICT_JSON = "verdict.json"
VERDICT_MD = "verdict.md"
#: Plots written beside verdict.md: per-seed values per arm, and paired differences.
PLOT_FILES = {"values": "verdict_values.png", "paired": "verdict_paired.png"}
LOCK_FILE = ".lock"
CODE_DIR = "code"
TRIALS_DIR = "trials"
REPRO_DIR = "repro"

#: Trial statuses written to result.json. ``ok`` is the only one whose metrics enter the statistics.
TRIAL_STATUSES = ("ok", "failed", "diverged", "killed", "timeout", "pin_mismatch", "interrupted")
DEFAULT_DIR_MODE = 0o700
DEFAULT_FILE_MODE = 0o600


def _json_default(obj: Any) -> Any:
    if hasattr(obj, "item"):  # numpy scalars
        return obj.item()
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, set | frozenset):
        return sorted(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def _sanitize_floats(obj: Any) -> Any:
    """Replace NaN/inf floats by strings so the JSON stays standard (``"nan"``, ``"inf"``, ``"-inf"``)."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return "nan" if math.isnan(obj) else ("inf" if obj > 0 else "-inf")
    if isinstance(obj, Mapping):
        return {k: _sanitize_floats(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_sanitize_floats(v) for v in obj]
    return obj


def to_json(obj: Any) -> str:
    """Serialise ``obj`` as standard JSON (NaN and inf become strings), indented, keys in given order."""
    return json.dumps(_sanitize_floats(obj), indent=2, default=_json_default, allow_nan=False) + "\n"


def write_atomic(path: str | os.PathLike[str], data: str | bytes, mode: int = DEFAULT_FILE_MODE,
                 *, durable: bool = False) -> Path:
    """Write ``data`` to ``path`` atomically: a temp file in the same dir, then ``os.replace``.

    Readers see the old file or the new one, never a part, whatever happens to the writing process
    (SIGKILL included). ``durable=True`` also fsyncs before the rename so the file survives a power
    loss; it costs about 5 ms a file here, so only the plan is written that way.

    Parameters
    ----------
    path : path-like
        Destination file; its parent directory must exist.
    data : str or bytes
        Content; str is encoded as UTF-8.
    mode : int
        Permission bits of the new file (default 0o600, owner only).
    durable : bool
        fsync the data before the rename.

    Returns
    -------
    Path
        The destination path.
    """
    path = Path(path)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}-{time.monotonic_ns()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(raw)
            if durable:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    return path


def write_json(path: str | os.PathLike[str], obj: Any) -> Path:
    """Write ``obj`` as JSON atomically (see :func:`to_json`)."""
    return write_atomic(path, to_json(obj))


def read_json(path: str | os.PathLike[str]) -> Any:
    """Read a JSON file written by :func:`write_json`."""
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)



def create_unique_dir(path: str | os.PathLike[str], mode: int = DEFAULT_DIR_MODE) -> Path:
    """Create a new directory at ``path``, or at ``path_1``, ``path_2`` ... if it exists.

    Two ablations started in the same second therefore never share (or overwrite) a sweep dir: the
    ``mkdir`` itself is the atomic claim.

    Raises
    ------
    SweepDirError
        When the parent cannot be created or written (permissions, read-only file system).
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SweepDirError(
            f"cannot create the output directory {path.parent} ({exc.strerror})",
            where="hydra.sweep.dir",
            fix="choose a writable location, e.g. `hydra.sweep.dir=/tmp/ablate/run1`",
        ) from exc
    for i in range(10_000):
        cand = path if i == 0 else path.with_name(f"{path.name}_{i}")
        try:
            os.mkdir(cand, mode)
            os.chmod(cand, mode)  # mkdir's mode is filtered by the umask
            return cand
        except FileExistsError:
            continue
        except OSError as exc:
            raise SweepDirError(
                f"cannot create the sweep dir {cand} ({exc.strerror})",
                where="hydra.sweep.dir",
                fix="choose a writable location, e.g. `hydra.sweep.dir=/tmp/ablate/run1`",
            ) from exc
    raise SweepDirError(f"too many sweep dirs named {path}*", where="hydra.sweep.dir")


@dataclass(frozen=True)
class TrialPaths:
    """Paths of one trial's files (arm, seed) inside a sweep dir."""

    dir: Path

    @property
    def config(self) -> Path:
        return self.dir / "config.yaml"

    @property
    def manifest(self) -> Path:
        return self.dir / "manifest.json"

    @property
    def result(self) -> Path:
        return self.dir / "result.json"

    @property
    def stdout(self) -> Path:
        return self.dir / "stdout.log"

    @property
    def stderr(self) -> Path:
        return self.dir / "stderr.log"

    @property
    def steps(self) -> Path:
        """Per-step fingerprints written by :func:`ablate.log_step` (JSON lines)."""
        return self.dir / "steps.jsonl"

    @property
    def attempts(self) -> Path:
        return self.dir / "attempts"


class SweepDir:
    """One sweep dir: every path in it, and the lock that lets one ablate process work on it.

    Parameters
    ----------
    root : path-like
        The sweep dir. It need not exist yet (see :meth:`create`).
    """

    def __init__(self, root: str | os.PathLike[str], mode: int = DEFAULT_DIR_MODE) -> None:
        self.root = Path(root).absolute()
        self.mode = mode
        self._lock_fd: int | None = None

    # -- creation and opening ------------------------------------------------------------------
    @classmethod
    def create(cls, path: str | os.PathLike[str], mode: int = DEFAULT_DIR_MODE) -> SweepDir:
        """Create a fresh, unique sweep dir at ``path`` (suffixing ``_1``, ``_2`` ... if taken)."""
        return cls(create_unique_dir(path, mode), mode)

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> SweepDir:
        """Open an existing sweep dir.

        Raises
        ------
        SweepDirError
            When ``path`` does not exist or holds no ``ablation.yaml``.
        """
        p = Path(path)
        if not p.is_dir():
            raise SweepDirError(f"no such directory: {p}", where="DIR", fix="pass the sweep dir printed by ablate")
        if not (p / PLAN_FILE).is_file():
            raise SweepDirError(
                f"{p} is not an ablate sweep dir (it has no {PLAN_FILE})",
                where="DIR",
                fix="pass the directory ablate printed, e.g. outputs/ablate/<date>/<time>_<variable>",
            )
        return cls(p)

    # -- paths ----------------------------------------------------------------------------------
    @property
    def plan_file(self) -> Path:
        return self.root / PLAN_FILE

    @property
    def results_file(self) -> Path:
        return self.root / RESULTS_FILE

    @property
    def per_seed_file(self) -> Path:
        """The verdict metric per seed (rows) and arm (columns), for paired plots and ``dvc plots``."""
        return self.root / PER_SEED_FILE

    @property
    def summary_file(self) -> Path:
        """verdict.json's numbers as a flat object (per arm, per treatment) for ``dvc metrics``."""
        return self.root / SUMMARY_FILE

    @property
    def verdict_json(self) -> Path:
        return self.root / VERDICT_JSON

    @property
    def verdict_md(self) -> Path:
        return self.root / VERDICT_MD

    def plot(self, name: str) -> Path:
        """Path of the verdict plot ``name`` (a key of :data:`PLOT_FILES`)."""
        return self.root / PLOT_FILES[name]

    @property
    def code_dir(self) -> Path:
        return self.root / CODE_DIR

    def trial(self, arm: str, seed: int) -> TrialPaths:
        """Paths of the trial of ``arm`` at ``seed``."""
        return TrialPaths(self.root / TRIALS_DIR / arm / f"seed={seed}")

    def new_repro(self, arm: str, seed: int) -> TrialPaths:
        """Claim a fresh scratch dir for a re-run of a trial: ``repro/<arm>/seed=<k>/<n>/``, n = 1, 2 ...

        The ``mkdir`` of ``<n>`` is the atomic claim, so two ``ablate repro`` runs never share a dir,
        and the original trial's files are never touched.
        """
        parent = self.mkdir(self.root / REPRO_DIR / arm / f"seed={seed}")
        n = 1 + max((int(p.name) for p in parent.iterdir() if p.name.isdigit()), default=0)
        while True:
            try:
                os.mkdir(parent / str(n), self.mode)
                return TrialPaths(parent / str(n))
            except FileExistsError:
                n += 1

    def mkdir(self, path: Path) -> Path:
        """Create ``path`` (and parents inside the sweep dir) with the sweep dir's mode."""
        path.mkdir(parents=True, exist_ok=True, mode=self.mode)
        return path

    def plan(self) -> dict[str, Any]:
        """The plan record (``ablation.yaml``), validated; cached per process (do not mutate it).

        Raises
        ------
        SweepDirError
            When ablation.yaml is missing, not valid YAML, or lacks the plan's fields (a corrupted or
            hand-edited file): the message names what is wrong.
        """
        return read_plan(self.plan_file)

    # -- trial state ----------------------------------------------------------------------------
    def read_result(self, arm: str, seed: int) -> dict[str, Any] | None:
        """The trial's result.json, or None when it has not finished (or the file is unreadable)."""
        p = self.trial(arm, seed).result
        try:
            return read_json(p)
        except (FileNotFoundError, json.JSONDecodeError):
            return None

    def move_aside(self, arm: str, seed: int) -> Path | None:
        """Move the outputs of an interrupted attempt into ``attempts/<n>/`` so a re-run starts clean.

        Returns the attempt dir, or None when there was nothing to move.
        """
        tp = self.trial(arm, seed)
        if not tp.dir.is_dir():
            return None
        entries = [e for e in tp.dir.iterdir() if e.name != "attempts"]
        if not entries:
            return None
        n = 1
        while (tp.attempts / str(n)).exists():
            n += 1
        dest = self.mkdir(tp.attempts / str(n))
        for e in entries:
            shutil.move(str(e), str(dest / e.name))
        return dest

    # -- lock -----------------------------------------------------------------------------------
    def acquire(self) -> None:
        """Take the sweep dir's lock, so a second ablate process on it refuses instead of racing.

        The lock is an ``flock`` on ``.lock``: the kernel drops it when the holding process dies
        (SIGKILL included), so a crashed ablate never blocks ``ablate resume``.

        Raises
        ------
        SweepDirError
            When another live process holds the lock; the message names its pid, host and start time.
        """
        import fcntl

        path = self.root / LOCK_FILE
        fd = os.open(path, os.O_RDWR | os.O_CREAT, DEFAULT_FILE_MODE)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                raise
            try:
                holder = path.read_text().strip() or "unknown process"
            except OSError:
                holder = "unknown process"
            raise SweepDirError(
                f"another ablate process is working on {self.root} ({holder})",
                where="DIR",
                fix="wait for it to finish, or stop it; `ablate status DIR` shows progress meanwhile",
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"pid {os.getpid()} on {os.uname().nodename} since {time.ctime()}\n".encode())
        self._lock_fd = fd

    def is_locked(self) -> bool:
        """True while some live ablate process holds this sweep dir's lock (never blocks)."""
        import fcntl

        path = self.root / LOCK_FILE
        if self._lock_fd is not None:
            return True
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            return True
        finally:
            os.close(fd)  # closing drops the probe's own lock
        return False

    def release(self) -> None:
        """Release the lock taken by :meth:`acquire` (idempotent)."""
        if self._lock_fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(self._lock_fd, 0)
            os.close(self._lock_fd)
            self._lock_fd = None

    @contextlib.contextmanager
    def locked(self) -> Iterator[SweepDir]:
        """Context manager around :meth:`acquire` / :meth:`release`."""
        self.acquire()
        try:
            yield self
        finally:
            self.release()


def dump_yaml(obj: Any) -> str:
    """YAML text for a plain container; strings that would read back as another type are quoted."""
    import yaml

    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    return yaml.dump(obj, Dumper=dumper, sort_keys=False, allow_unicode=True, width=100)


def load_yaml(path: str | os.PathLike[str]) -> Any:
    """Read YAML written by :func:`dump_yaml` with PyYAML's safe loader (the same type rules; the C
    loader when libyaml is available, about 10x faster)."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    with open(path, encoding="utf-8") as fh:
        return yaml.load(fh, Loader=loader)


_yaml_cache: dict[str, tuple[float, int, Any]] = {}


def load_yaml_cached(path: str | os.PathLike[str]) -> Any:
    """:func:`load_yaml`, cached per process by (mtime, size): trials run in-process read the plan once.

    Callers must not mutate the returned object.
    """
    key = str(path)
    st = os.stat(key)
    hit = _yaml_cache.get(key)
    if hit is not None and hit[0] == st.st_mtime and hit[1] == st.st_size:
        return hit[2]
    obj = load_yaml(key)
    _yaml_cache[key] = (st.st_mtime, st.st_size, obj)
    return obj


def read_plan(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read and check an ``ablation.yaml`` (see :meth:`SweepDir.plan`)."""
    where = str(path)
    fix = ("ablation.yaml is the record of the ablation's plan and pins; restore it (from a backup or "
           "version control) or start the ablation again")
    try:
        plan = load_yaml_cached(path)
    except FileNotFoundError:
        raise SweepDirError("is missing", where=where, fix="pass the sweep dir ablate printed") from None
    except Exception as exc:  # yaml raises several error types
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise SweepDirError(f"is not readable YAML ({first})", where=where, fix=fix) from None
    if not isinstance(plan, dict):
        raise SweepDirError(f"holds a {type(plan).__name__}, not the plan's mapping", where=where, fix=fix)
    problems = []
    arms = plan.get("arms")
    if not isinstance(arms, list) or not arms or not all(isinstance(a, dict) and "name" in a for a in arms):
        problems.append("`arms` (a list of arms with names)")
    seeds = plan.get("seeds")
    if not isinstance(seeds, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in seeds):
        problems.append("`seeds` (a list of integers)")
    if not isinstance(plan.get("metric"), str):
        problems.append("`metric`")
    if not isinstance(plan.get("options", {}), dict):
        problems.append("`options` (a mapping)")
    if problems:
        raise SweepDirError(f"lacks or garbles {', '.join(problems)}", where=where, fix=fix)
    return plan
