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
      plots.log                   stderr of a background plot drawing that crashed (removed when it succeeds)
      summary.json                the verdict's main numbers, numbers only (per arm, per treatment): `dvc metrics`
      .lock                       held (flock) by the one ablate process working on this dir
      .trials.lock                held (flock) shared by each running trial process, exclusively by the
                                  orchestrator while it decides which trials to run (ablate.record.trial_lock)

Every file is written atomically (temp file in the same directory, fsync, rename), so a crash at any
moment leaves either the old file or the new one, never half of one. Directories are created readable
by their owner only (mode 0o700) unless ``mode`` says otherwise. Records are JSON or YAML: nothing here
is ever unpickled.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import math
import os
import re
import shutil
import stat
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ablate.errors import SweepDirError
from ablate.record.names import safe_name  # noqa: F401  (re-exported; naming helpers live in the pure ablate.record.names)

#: ``open`` flag that refuses a symlink as the last path component (0 where the OS has none).
O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
#: Temp files of :func:`write_atomic` (``.<name>.tmp-<pid>-<ns>``); debris when their writer died.
TMP_RE = re.compile(r"^\..+\.tmp-(\d+)-(\d+)$")
#: A temp file older than this is debris whatever its pid says (a write takes milliseconds).
TMP_MAX_AGE_S = 3600.0

PLAN_FILE = "ablation.yaml"
RESULTS_FILE = "results.csv"
PER_SEED_FILE = "per_seed.csv"
SUMMARY_FILE = "summary.json"
VERDICT_JSON = "verdict.json"
VERDICT_MD = "verdict.md"
#: A tuned ablation's choice of setting per arm.
TUNING_FILE = "tuning.json"
#: The verdict options ``ablate verdict DIR --...`` last used, kept for the next recomputation.
VERDICT_OPTIONS = "verdict_options.json"
#: Plots written beside verdict.md: per-seed values per arm, and paired differences.
PLOT_FILES = {"values": "verdict_values.png", "paired": "verdict_paired.png"}
#: The stderr of ``ablate verdict``'s background plot drawing; left only when that process crashed.
PLOTS_LOG = "plots.log"
#: Ends the lock holder's line while a process only draws the verdict's plots (a second or two): other
#: ablate processes then wait for the lock instead of refusing (see :meth:`SweepDir.try_acquire`).
PLOTS_HOLDER = "drawing the verdict's plots"
#: Longest wait for a plot-drawing holder, in seconds; then the lock counts as busy. A drawer is finite and
#: its flock goes with it if it dies, so the wait is long: on a loaded machine drawing the PNGs can take a minute.
PLOTS_WAIT_S = 600.0
#: Longest wait, in seconds, for a process that just took the lock to write its line (a refusal names it).
HOLDER_WAIT_S = 2.0
LOCK_FILE = ".lock"
CODE_DIR = "code"
TRIALS_DIR = "trials"
REPRO_DIR = "repro"

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
    try:  # no NaN or inf in it (nearly always): encoded as it is, without a sanitised copy
        return json.dumps(obj, indent=2, default=_json_default, allow_nan=False) + "\n"
    except (ValueError, TypeError):  # a non-finite float (or a mapping json cannot encode): sanitise, as always
        return json.dumps(_sanitize_floats(obj), indent=2, default=_json_default, allow_nan=False) + "\n"


#: The field of result.json holding the digest of the rest of the record (:func:`record_digest`).
DIGEST_FIELD = "digest"


def record_digest(record: Mapping[str, Any]) -> str:
    """``sha256:<hex>`` of a trial record without its :data:`DIGEST_FIELD`, as it reads back from JSON
    (keys sorted, compact): written into result.json at the end of the trial, so an accidental edit of
    the record later shows (:func:`digest_mismatch`). Not a defence against a same-user adversary, who
    can recompute it."""
    return _digest_of(to_json({k: v for k, v in record.items() if k != DIGEST_FIELD}))


def _digest_of(text: str) -> str:
    """:func:`record_digest` of the record whose :func:`to_json` is ``text``."""
    canon = json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canon.encode()).hexdigest()


def with_digest(record: Mapping[str, Any]) -> dict[str, Any]:
    """``record`` with its :func:`record_digest` as the last field."""
    rec = {k: v for k, v in record.items() if k != DIGEST_FIELD}
    return {**rec, DIGEST_FIELD: record_digest(rec)}


def with_digest_json(record: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    """:func:`with_digest` and its :func:`to_json`, the record encoded once (the digest field is added to the
    text as :func:`to_json` would write it: the last field of the object)."""
    rec = {k: v for k, v in record.items() if k != DIGEST_FIELD}
    text = to_json(rec)
    digest = _digest_of(text)
    out = {**rec, DIGEST_FIELD: digest}
    if not rec or not text.endswith("\n}\n"):
        return out, to_json(out)
    return out, f"{text[:-3]},\n  {json.dumps(DIGEST_FIELD)}: {json.dumps(digest)}\n}}\n"


def digest_mismatch(record: Mapping[str, Any]) -> bool:
    """True when a record carries a digest its content no longer matches (records older than the digest,
    without one, are not flagged)."""
    want = record.get(DIGEST_FIELD)
    return isinstance(want, str) and want != record_digest(record)


def misplaced(record: Any, arm: str, seed: int) -> str | None:
    """Why a ``result.json`` read from the dir of ``arm`` at ``seed`` is not that trial's record (its ``arm``
    or ``seed`` names another trial: a record copied from another seed's or arm's dir), or None when it is.
    Its own digest cannot tell: the copy is byte for byte a finished trial's record."""
    if not isinstance(record, Mapping):
        return None
    rec_arm, rec_seed = record.get("arm"), record.get("seed")
    same_seed = isinstance(rec_seed, int) and not isinstance(rec_seed, bool) and rec_seed == int(seed)
    if rec_arm == arm and same_seed:
        return None
    return (f"{TRIALS_DIR}/{arm}/seed={seed}/result.json records arm {rec_arm!r} seed {rec_seed!r}, not this "
            "trial (copied from another trial's dir?)")


def os_error(exc: OSError, path: str | os.PathLike[str], doing: str = "write") -> SweepDirError:
    """The one-line error for an OS error on a sweep-dir file: what failed, where, and the fix.

    Parameters
    ----------
    exc : OSError
        The error raised by the OS.
    path : path-like
        The file or directory ablate was working on.
    doing : str
        ``"write"``, ``"read"`` or ``"create"`` (for the message).

    Returns
    -------
    SweepDirError
        To raise (``raise os_error(exc, path) from exc``); nothing already written is lost.
    """
    path = Path(path)
    reason = exc.strerror or str(exc)
    root = next((str(d) for d in (path, *path.parents) if (d / PLAN_FILE).is_file()), "DIR")
    if exc.errno == errno.ELOOP:
        return SweepDirError(f"{path} is a symbolic link; ablate never follows links inside a sweep dir "
                             "(one planted there could redirect its writes)", where=str(path),
                             fix=f"remove the link (`rm {path}`) and run the command again")
    resume = f"`ablate resume {root}` (finished trials are kept; only what is missing runs)"
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        fix = f"free space on the file system holding it (`df -h {path.parent}`), then {resume}"
    elif exc.errno == errno.EROFS:
        fix = f"the file system is read-only: remount it read-write (or copy the sweep dir elsewhere), then {resume}"
    elif exc.errno in (errno.EACCES, errno.EPERM):
        fix = f"give your user write access (`chmod -R u+rwX {root}`), then {resume}"
    else:
        fix = f"fix the cause above, then {resume}"
    return SweepDirError(f"cannot {doing} {path} ({reason})", where="sweep dir", fix=fix)


def open_nofollow(path: str | os.PathLike[str], flags: int, mode: int = DEFAULT_FILE_MODE) -> int:
    """``os.open`` for a file in a sweep dir: never through a symlink, close-on-exec.

    Raises
    ------
    SweepDirError
        When ``path`` is a symlink, or the OS refuses (one line, with the fix); FileNotFoundError
        passes through for callers that treat a missing file as "not there yet".
    """
    try:
        return os.open(path, flags | O_NOFOLLOW | os.O_CLOEXEC, mode)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise os_error(exc, path, "write" if flags & (os.O_WRONLY | os.O_RDWR) else "read") from exc


def open_log(path: str | os.PathLike[str]) -> int:
    """An append-only file descriptor for a trial's log (``stdout.log``, ``stderr.log``), owner-only,
    never through a symlink (see :func:`open_nofollow`)."""
    return open_nofollow(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, DEFAULT_FILE_MODE)


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

    Raises
    ------
    SweepDirError
        For any OS error (disk full, read-only, permissions, a symlink planted as the temp name):
        one line naming the file and the fix; the old file, if any, is left as it was.
    """
    path = Path(path)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}-{time.time_ns()}")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | O_NOFOLLOW | os.O_CLOEXEC, mode)
    except OSError as exc:
        raise os_error(exc, path) from exc
    try:
        try:
            view = memoryview(raw)
            while view:
                view = view[os.write(fd, view):]
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)  # replaces a symlink at `path` itself, never its target
    except BaseException as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        if isinstance(exc, OSError):
            raise os_error(exc, path) from exc
        raise
    return path


def write_json(path: str | os.PathLike[str], obj: Any) -> Path:
    """Write ``obj`` as JSON atomically (see :func:`to_json`)."""
    return write_atomic(path, to_json(obj))


def parse_record(data: bytes) -> dict[str, Any] | None:
    """A trial record (``result.json``, ``manifest.json``) from its bytes, or None when they are no record: not
    UTF-8 JSON (a truncated write, a hand edit), not a JSON object, or a ``metrics`` that is not an object. Such
    a trial counts as not finished, as one whose record was never written (a record is data: an odd one is never
    a traceback)."""
    try:
        rec = json.loads(data)
    except ValueError:  # json.JSONDecodeError, UnicodeDecodeError
        return None
    if not isinstance(rec, dict) or not isinstance(rec.get("metrics", {}), dict | None):
        return None
    return rec


def read_json(path: str | os.PathLike[str]) -> Any:
    """Read a JSON file written by :func:`write_json`, never through a symlink.

    Raises
    ------
    FileNotFoundError
        When there is no such file (callers treat it as "not written yet").
    json.JSONDecodeError
        When the content is not JSON.
    SweepDirError
        For any other OS error (a symlink planted there, permissions): one line with the fix.
    """
    return json.loads(read_bytes(path))


def read_bytes(path: str | os.PathLike[str]) -> bytes:
    """The bytes of a file, never through a symlink (what :func:`read_json` parses).

    Raises
    ------
    FileNotFoundError
        When there is no such file.
    SweepDirError
        For any other OS error (a symlink planted there, permissions): one line with the fix.
    """
    try:
        fd = os.open(path, os.O_RDONLY | O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise os_error(exc, path, "read") from exc
    with os.fdopen(fd, "rb") as fh:
        return fh.read()



def _make_parent(path: Path) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SweepDirError(
            f"cannot create the output directory {path.parent} ({exc.strerror})",
            where="hydra.sweep.dir",
            fix="choose a writable location, e.g. `hydra.sweep.dir=/tmp/ablate/run1`",
        ) from exc


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
    _make_parent(path)
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
    raise SweepDirError(f"too many sweep dirs named {path}*", where="hydra.sweep.dir",
                        fix="remove old ones, or choose another name with `hydra.sweep.dir=...`")


#: Marks a sweep dir whose creation (pins, code snapshot, ``ablation.yaml``) has not finished: ``<pid> <host>``.
CREATING_FILE = ".creating"


def abandoned_creation(path: Path) -> bool:
    """True for a dir an ablate process left while creating a sweep dir there and was killed before writing its
    ``ablation.yaml``: it holds the creation marker of a process of this host that is gone. Anything else (a
    sweep dir, a live creation, another host's, a dir without the marker) is never taken for one."""
    if os.path.lexists(path / PLAN_FILE):
        return False
    try:
        fd = open_nofollow(path / CREATING_FILE, os.O_RDONLY)
        with os.fdopen(fd) as fh:
            pid, host = fh.read().split()[:2]
        return host == os.uname().nodename and not _alive(int(pid))
    except (OSError, ValueError):
        return False


def claim_unique_dir(path: str | os.PathLike[str], mode: int = DEFAULT_DIR_MODE) -> tuple[Path, bool]:
    """:func:`create_unique_dir` for a sweep dir: the dir carries :data:`CREATING_FILE` until
    :meth:`SweepDir.finish_creation`, and a dir an earlier ablate left half-created (killed before its
    ``ablation.yaml``: :func:`abandoned_creation`) is emptied and reused, so re-running a killed command writes
    where it would have, and no ``DIR_1``, ``DIR_2`` ... pile up, each holding a code snapshot.

    Returns
    -------
    path, reused : Path, bool
    """
    path = Path(path)
    _make_parent(path)
    for i in range(10_000):
        cand = path if i == 0 else path.with_name(f"{path.name}_{i}")
        reused = False
        if os.path.lexists(cand):
            if not (cand.is_dir() and not cand.is_symlink() and abandoned_creation(cand)):
                continue
            shutil.rmtree(cand, ignore_errors=True)  # its snapshot: an earlier run killed before its plan
            reused = True
        tmp = cand.with_name(f".{cand.name}.claim-{os.getpid()}-{time.monotonic_ns()}")
        try:
            os.mkdir(tmp, mode)
            os.chmod(tmp, mode)
            fd = open_nofollow(tmp / CREATING_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
            with os.fdopen(fd, "w") as fh:
                fh.write(f"{os.getpid()} {os.uname().nodename}\n")
            os.rename(tmp, cand)  # atomic: the marker is there from the first moment the dir is
            return cand, reused
        except OSError as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                raise SweepDirError(f"cannot create the sweep dir {cand} ({exc.strerror})", where="hydra.sweep.dir",
                                    fix="choose a writable location, e.g. `hydra.sweep.dir=/tmp/ablate/run1`"
                                    ) from exc
    raise SweepDirError(f"too many sweep dirs named {path}*", where="hydra.sweep.dir",
                        fix="remove old ones, or choose another name with `hydra.sweep.dir=...`")


def check_safe_tree(root: Path) -> None:
    """Refuse a sweep dir whose inner directories other users could write, or another user owns, as
    :func:`check_safe_mode` does for the top one: ``code/`` and every directory in it (but ``__pycache__``:
    ablate makes the snapshot's with the sweep dir's mode, but a sweep dir made before that holds ones Python
    made with the user's umask), ``trials/``, ``trials/<arm>/``, each trial's dir, and the
    other directories at the top (about one ``lstat`` per trial). Symlinks are not followed (the writers
    refuse to write through them).

    Raises
    ------
    SweepDirError
        Naming the first such directory, its mode or owner, and the ``chmod -R`` of the sweep dir that fixes it.
    """
    def check(path: str, depth: int) -> None:
        try:
            st = os.lstat(path)
        except OSError:
            return
        if not stat.S_ISDIR(st.st_mode):
            return
        check_safe_mode(Path(path), st, top=root)
        if depth == 0:
            return
        try:
            names = os.listdir(path)
        except OSError:
            return
        for name in names:
            if name != "__pycache__":  # older sweep dirs: made by Python itself, with the user's umask
                check(os.path.join(path, name), depth - 1)

    try:
        tops = os.listdir(root)
    except OSError:
        return
    for name in tops:
        p = os.path.join(root, name)
        if name == "code":  # the snapshot trials import: every directory in it
            check(p, 10_000)
        elif name == "trials":  # trials/<arm>/<seed>/: what ablate makes with the sweep dir's mode (not what a
            check(p, 2)  # task makes inside its trial dir, with the user's umask)
        else:
            check(p, 0)


def check_safe_mode(path: Path, st: os.stat_result | None = None, *, top: Path | None = None) -> None:
    """Refuse a sweep dir that other users could write, or that another user owns.

    A group- or world-writable sweep dir lets anyone replace the code snapshot trials import, or the
    records the verdict reads (and, under ``launcher=slurm``, the job files submitit unpickles):
    code execution as the owner.

    Raises
    ------
    SweepDirError
        Naming the mode or owner and the ``chmod`` that fixes it.
    """
    st = st or os.stat(path)
    if st.st_uid != os.geteuid():
        raise SweepDirError(f"{path} belongs to another user (uid {st.st_uid}); ablate works only on sweep dirs "
                            "you own", where="DIR", fix="copy it to a directory of your own and pass that")
    if st.st_mode & 0o022:
        raise SweepDirError(f"{path} has mode {stat.filemode(st.st_mode)}: other users can write into it and "
                            "replace the code or records trials and the verdict trust", where="DIR",
                            fix=f"`chmod -R go-w {top or path}`, check nothing in it was changed, then run the command "
                            "again")


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

    @property
    def curve(self) -> Path:
        """The series the trial's metric came from, against ``curve.x`` (:mod:`ablate.record.curves`)."""
        return self.dir / "curve.json"


class SweepDir:
    """One sweep dir: every path in it, and the lock that lets one ablate process work on it.

    Parameters
    ----------
    root : path-like
        The sweep dir. It need not exist yet (see :meth:`create`).
    mode : int, optional
        Permission bits of the directories created in it; default: the sweep dir's own (without
        group/world write), or 0o700 when it does not exist yet.
    """

    def __init__(self, root: str | os.PathLike[str], mode: int | None = None) -> None:
        self.root = Path(root).absolute()
        if mode is None:  # an existing sweep dir: inner dirs follow its own mode (the plan's sweep_dir_mode)
            try:
                mode = stat.S_IMODE(os.stat(self.root).st_mode) & ~0o022
            except OSError:
                mode = DEFAULT_DIR_MODE
        self.mode = mode
        self._lock_fd: int | None = None

    # -- creation and opening ------------------------------------------------------------------
    @classmethod
    def create(cls, path: str | os.PathLike[str], mode: int = DEFAULT_DIR_MODE) -> SweepDir:
        """Create a fresh, unique sweep dir at ``path`` (suffixing ``_1``, ``_2`` ... if taken)."""
        return cls(create_unique_dir(path, mode), mode)

    @classmethod
    def claim(cls, path: str | os.PathLike[str], mode: int = DEFAULT_DIR_MODE) -> tuple[SweepDir, bool]:
        """A new sweep dir at ``path`` being created (:func:`claim_unique_dir`), and whether it reused a dir an
        earlier ablate left half-created; :meth:`finish_creation` once its ``ablation.yaml`` is written."""
        root, reused = claim_unique_dir(path, mode)
        return cls(root, mode), reused

    def finish_creation(self) -> None:
        """Drop the creation marker: the sweep dir holds its ``ablation.yaml`` now."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.root / CREATING_FILE)

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
        st = os.stat(p)
        check_safe_mode(p, st)
        check_safe_tree(p.absolute())
        return cls(p, stat.S_IMODE(st.st_mode))  # inner dirs made later follow the sweep dir's own mode

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
        """The verdict's main numbers, one flat object per arm (numbers only), for ``dvc metrics``."""
        return self.root / SUMMARY_FILE

    @property
    def verdict_json(self) -> Path:
        return self.root / VERDICT_JSON

    @property
    def verdict_md(self) -> Path:
        return self.root / VERDICT_MD

    @property
    def tuning_file(self) -> Path:
        """A tuned ablation's choice of each arm's setting (written once its tuning trials finished, before any
        evaluation trial runs: :mod:`ablate.orchestrate.tuning`)."""
        return self.root / TUNING_FILE

    def read_tuning(self) -> dict[str, Any] | None:
        """The recorded choice (``tuning.json``), or None before one was made.

        Raises
        ------
        SweepDirError
            When the file is not a JSON object of arm -> chosen arm.
        """
        try:
            rec = read_json(self.tuning_file)
        except FileNotFoundError:
            return None
        except json.JSONDecodeError:
            rec = None
        chosen = rec.get("chosen") if isinstance(rec, dict) else None
        if not isinstance(chosen, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                   for k, v in chosen.items()):
            raise SweepDirError("is not the record ablate wrote (a JSON object with `chosen`: arm -> tuned arm)",
                                where=str(self.tuning_file),
                                fix="delete it and run `ablate resume DIR`: the choice is made again from the "
                                "tuning trials")
        return rec

    def plot(self, name: str) -> Path:
        """Path of the verdict plot ``name`` (a key of :data:`PLOT_FILES`)."""
        return self.root / PLOT_FILES[name]

    def curve_plot(self, arm: str) -> Path:
        """Path of treatment ``arm``'s curve plot (curve verdicts, :mod:`ablate.judge.curves_report`)."""
        return self.root / f"verdict_curve_{arm}.png"

    @property
    def code_dir(self) -> Path:
        return self.root / CODE_DIR

    def trial(self, arm: str, seed: int) -> TrialPaths:
        """Paths of the trial of ``arm`` at ``seed``."""
        return TrialPaths(self.root / TRIALS_DIR / arm / f"seed={seed}")

    def trial_file(self, arm: str, seed: int, name: str) -> str:
        """``str(self.trial(arm, seed).dir / name)`` without building Path objects, for the readers that
        visit every trial (10,000 trials: 0.07 s of CPU saved per file name)."""
        return f"{self.root}{os.sep}{TRIALS_DIR}{os.sep}{arm}{os.sep}seed={seed}{os.sep}{name}"

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
        """Create ``path`` (and its parents inside the sweep dir) with the sweep dir's mode, whatever
        the umask, refusing any symlink on the way (one planted there would redirect trial writes).

        Raises
        ------
        SweepDirError
            A component is a symlink or not a directory, or the OS refuses (one line, with the fix).
        """
        path = Path(path).absolute()
        try:
            rel = path.relative_to(self.root)
        except ValueError:  # outside the sweep dir (``ablate repro`` scratch dirs given by the caller)
            path.mkdir(parents=True, exist_ok=True, mode=self.mode)
            return path
        cur = self.root
        for part in rel.parts:
            cur = cur / part
            try:  # most already exist (a trial's dir, made by its launcher): one lstat each then
                if stat.S_ISDIR(os.lstat(cur).st_mode):
                    continue
            except FileNotFoundError:
                pass
            except OSError as exc:
                raise os_error(exc, cur, "create") from exc
            try:
                os.mkdir(cur, self.mode)
                os.chmod(cur, self.mode, follow_symlinks=False)  # mkdir's mode is filtered by the umask
            except FileExistsError:
                st = os.lstat(cur)
                if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
                    raise os_error(OSError(errno.ELOOP, "not a plain directory"), cur, "create") from None
            except OSError as exc:
                raise os_error(exc, cur, "create") from exc
        return path

    def restrict_tree(self, top: Path) -> None:
        """Give every directory under ``top`` the sweep dir's mode and every file the same bits without
        execute (kept where the owner had it): a snapshot extracted from git (0775/0664) must not be
        writable, or even readable, by more users than the sweep dir itself. Symlinks are left alone."""
        file_mode = self.mode & 0o666

        def fix(p: str, is_dir: bool) -> None:
            st = os.lstat(p)
            if stat.S_ISLNK(st.st_mode):
                return
            want = self.mode if is_dir else file_mode | (self.mode & 0o111 if st.st_mode & 0o100 else 0)
            if stat.S_IMODE(st.st_mode) != want:
                os.chmod(p, want)

        for dirpath, _dirnames, filenames in os.walk(top):
            fix(dirpath, True)
            for n in filenames:
                fix(os.path.join(dirpath, n), False)

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
        """The trial's result.json, or None when it has not finished (or the file is unreadable, or is another
        trial's record: :func:`misplaced`, which :func:`ablate.record.results.misplaced_records` names)."""
        rec = self.read_record(arm, seed)
        return None if misplaced(rec, arm, seed) else rec

    def read_record(self, arm: str, seed: int) -> dict[str, Any] | None:
        """The trial dir's result.json as it is (None when absent or unreadable: :func:`parse_record`), whatever
        trial it names."""
        p = self.trial_file(arm, seed, "result.json")
        try:
            return parse_record(read_bytes(p))
        except FileNotFoundError:
            return None
        except OSError as exc:  # a symlink planted as result.json, permissions
            raise os_error(exc, p, "read") from exc

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
        if not self.try_acquire():
            raise SweepDirError(
                f"another ablate process is working on {self.root} ({self.live_holder()})",
                where="DIR",
                fix="wait for it to finish, or stop it; `ablate status DIR` shows progress meanwhile",
            )

    def lock_holder(self) -> str:
        """Who holds the lock, as the holder wrote it (``pid N (COMMAND) on HOST since TIME``)."""
        try:
            fd = os.open(self.root / LOCK_FILE, os.O_RDONLY | O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return "unknown process"
        with os.fdopen(fd, "rb") as fh:
            return fh.read(1000).decode(errors="replace").strip() or "unknown process"

    def live_holder(self, wait_s: float = HOLDER_WAIT_S) -> str:
        """The lock holder's line once it names a live process, for a refusal (call it after the lock was
        found taken).

        A process that just took the lock writes its line right after the ``flock`` succeeds: until then
        the file still holds the line of the previous holder (a process that died, say by SIGKILL) or
        nothing. So this waits, up to ``wait_s``, for a line whose pid is alive on this host (another host's
        line is taken as written), and falls back to the line as it is, marked as possibly stale.
        """
        deadline = time.monotonic() + wait_s
        while True:
            line = self.lock_holder()
            m = re.match(r"pid (\d+)(?: \(.*\))? on (\S+) ", line)
            if m and (m.group(2) != os.uname().nodename or _alive(int(m.group(1)))):
                return line
            if time.monotonic() > deadline:
                return f"{line}; it may have just ended" if m else "a process that has not written its pid yet"
            time.sleep(0.01)

    def try_acquire(self, *, clean: bool = True) -> bool:
        """Take the sweep dir's lock if no live process holds it; False when one does.

        Never blocks on an ablation. While the holder only draws a verdict's plots (its line ends with
        :data:`PLOTS_HOLDER`: ``ablate verdict`` hands its lock to that process, see
        :func:`ablate.judge.verdict.draw_plots_in_background`), waits for it, up to :data:`PLOTS_WAIT_S`.
        ``clean``: remove writers' debris (:meth:`clean_debris`) once the lock is taken; False leaves that
        to the caller, before the lock is released (``ablate verdict`` has the plot drawer do it: the
        walk visits every trial dir, 0.1-0.2 s of CPU at 10,000 trials).

        Raises
        ------
        SweepDirError
            When ``.lock`` is a symlink or cannot be opened (one line, with the fix).
        """
        path = self.root / LOCK_FILE
        fd = open_nofollow(path, os.O_RDWR | os.O_CREAT, DEFAULT_FILE_MODE)
        deadline = time.monotonic() + PLOTS_WAIT_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                    os.close(fd)
                    raise os_error(exc, path) from exc
                # a plot drawer (its line is left when it ends, so a release just now retries at once)
                if not self.lock_holder().endswith(PLOTS_HOLDER) or time.monotonic() > deadline:
                    os.close(fd)
                    return False
                time.sleep(0.02)
        write_holder(fd, holder_line())
        self._lock_fd = fd
        if clean:
            self.clean_debris()
        return True

    def drawing_plots(self) -> bool:
        """True while the lock's holder is a process that only draws the verdict's plots."""
        return self.lock_holder().endswith(PLOTS_HOLDER) and self.is_locked()

    def hand_over_lock(self) -> int:
        """Mark the held lock as a plot drawer's and return its file descriptor, for a child process to
        inherit (``pass_fds``): the ``flock`` belongs to the open file, so the lock stays held without a gap
        until the child closes it. Call :meth:`forget_lock` once the child runs.

        Raises
        ------
        SweepDirError
            When this object does not hold the lock.
        """
        if self._lock_fd is None:
            raise SweepDirError("the lock is not held by this process", where=str(self.root / LOCK_FILE),
                                fix="this is a bug in ablate's caller: take the lock first")
        write_plots_holder(self._lock_fd)
        return self._lock_fd

    def forget_lock(self) -> None:
        """Close this process's handle on the lock without releasing it (a child holds it now)."""
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def clean_debris(self) -> list[Path]:
        """Remove the temp files of :func:`write_atomic` left by writers that died mid-write (SIGKILL,
        power loss): those whose pid is no longer alive on this host, or older than an hour.

        Call it holding the lock (:meth:`acquire` does). Returns the files removed.
        """
        removed: list[Path] = []
        now = time.time_ns()
        for dirpath, _dirnames, filenames in os.walk(self.root):
            for name in filenames:
                m = TMP_RE.match(name)
                if m is None:
                    continue
                pid, born = int(m.group(1)), int(m.group(2))
                if _alive(pid) and (now - born) / 1e9 < TMP_MAX_AGE_S:
                    continue
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(dirpath, name))
                    removed.append(Path(dirpath, name))
        return removed

    def is_locked(self) -> bool:
        """True while some live ablate process holds this sweep dir's lock (never blocks)."""
        path = self.root / LOCK_FILE
        if self._lock_fd is not None:
            return True
        try:
            fd = os.open(path, os.O_RDONLY | O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise os_error(exc, path, "read") from exc
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


def write_plots_holder(fd: int) -> None:
    """Write this process as the lock's plot-drawing holder (``pid N on HOST since TIME: ...`` ending with
    :data:`PLOTS_HOLDER`) into the held lock file ``fd``.

    The line is written over the old one, padded to at least its length, and only then cut to size: a
    process waiting for the drawing (:meth:`SweepDir.try_acquire`) never reads an empty line or one that
    does not end with the marker, which would make it refuse instead of wait.
    """
    head = holder_line()
    line = f"{head}: {PLOTS_HOLDER}"
    line = f"{head}{' ' * max(0, os.fstat(fd).st_size - len(line.encode()))}: {PLOTS_HOLDER}".encode()
    os.pwrite(fd, line, 0)
    os.ftruncate(fd, len(line))


def holder_line() -> str:
    """This process as the lock's holder: ``pid N (ablate resume DIR) on HOST since TIME``."""
    argv = [os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "python", *sys.argv[1:]]
    cmd = " ".join(argv)
    if len(cmd) > 300:
        cmd = cmd[:297] + "..."
    return f"pid {os.getpid()} ({cmd}) on {os.uname().nodename} since {time.ctime()}"


def write_holder(fd: int, line: str) -> None:
    """Write ``line`` as the held lock file's content in one ``pwrite`` and only then cut the file to
    size: a process reading it meanwhile sees the old line or the new one, never an empty file."""
    data = f"{line}\n".encode()
    data = data[:-1] + b" " * max(0, os.fstat(fd).st_size - len(data)) + b"\n"  # covers all of the old line
    os.pwrite(fd, data, 0)
    os.ftruncate(fd, len(data))


def _alive(pid: int) -> bool:
    """True when a process with this pid exists on this host (it may not be ours: then it is alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def dump_yaml(obj: Any) -> str:
    """YAML text for a plain container; strings that would read back as another type are quoted."""
    import yaml  # noqa: PLC0415  # lazy: PyYAML off this module's import

    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    return yaml.dump(obj, Dumper=dumper, sort_keys=False, allow_unicode=True, width=100)


def load_yaml(path: str | os.PathLike[str]) -> Any:
    """Read YAML written by :func:`dump_yaml` with PyYAML's safe loader (the same type rules; the C
    loader when libyaml is available, about 10x faster)."""
    import yaml  # noqa: PLC0415  # lazy: PyYAML off this module's import

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    with os.fdopen(os.open(path, os.O_RDONLY | O_NOFOLLOW | os.O_CLOEXEC), encoding="utf-8") as fh:
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
