"""What a fork of the warm parent cannot safely share, found while the task module is imported, and named.

:class:`Watch` is used by :func:`ablate.trials.warm.parent.preload` around the import of the task: it notes, for
every module imported for the first time, the OS threads and sockets that appeared while it ran (so a
thread is named with the module that started it and the task file's own ``import`` line that pulled that
module in), where Python threads were started (``threading.Thread.start``) and where sockets were put to
listen or connect. :meth:`Watch.report` gives it as plain data for the warm parent's ready report, and
:func:`explain` turns that into the refusal the launcher prints, with the cheapest fix: the import to move,
a setting of the library that started the thread, or ``launcher.warm=false`` with what it costs here.
"""

from __future__ import annotations

import builtins
import contextlib
import os
import random
import socket
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Collection, Iterator, Mapping
from types import FrameType
from typing import Any

from ablate.trials import proctree
from ablate.trials.seeding import PostImportHook

#: (module prefix, thread name prefix) -> the setting that keeps that library from starting the thread, as
#: tried on this project's own stack (pyarrow 25: ``import sklearn`` pulls it in through pandas).
SETTINGS: dict[tuple[str, str], str] = {
    ("pyarrow", "jemalloc_bg_thd"): "pyarrow's jemalloc allocator starts it: run ablate with "
    "`JE_ARROW_MALLOC_CONF=background_thread:false` in its environment",
}

_TCP_STATES = {"0A": "listening", "01": "connected"}


def thread_ids() -> set[int]:
    """Ids of this process's OS threads (``/proc/self/task``); empty where ``/proc`` is missing."""
    try:
        return {int(t) for t in os.listdir("/proc/self/task")}
    except OSError:
        return set()


def _thread_count() -> int:
    """This process's thread count from one ``stat`` (``/proc/self/task`` has a link per thread, plus 2)."""
    try:
        return os.stat("/proc/self/task").st_nlink
    except OSError:
        return 0


# Hand-made, not psutil: psutil's net_connections() gives the same sockets but parses every /proc/net table on each
# call (95-190 ms against 0.8-1.8 ms here, once per import line of the task) and keys a socket by its reusable fd,
# not its inode. docs/design-notes.md, "A trial's process tree ends with the trial".
def socket_inodes() -> set[int]:
    """Inodes of the sockets this process holds open (``/proc/self/fd``)."""
    out: set[int] = set()
    try:
        fds = os.listdir("/proc/self/fd")
    except OSError:
        return out
    for fd in fds:
        with contextlib.suppress(OSError):
            link = os.readlink(f"/proc/self/fd/{fd}")
            if link.startswith("socket:["):
                out.add(int(link[8:-1]))
    return out


def _tcp_address(hex_addr: str) -> str:
    ip, _, port = hex_addr.partition(":")
    if len(ip) == 8:
        host = socket.inet_ntop(socket.AF_INET, bytes.fromhex(ip)[::-1])
    else:
        raw = bytes.fromhex(ip)
        host = socket.inet_ntop(socket.AF_INET6, b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4)))
    return f"{host}:{int(port, 16)}"


def describe_sockets(inodes: set[int]) -> dict[int, str]:
    """``inode -> "TCP socket listening on 127.0.0.1:5000"`` for the given sockets (``/proc/net``);
    a socket found in no table is ``"a socket"``."""
    found: dict[int, str] = {}
    for table, kind in (("tcp", "TCP"), ("tcp6", "TCP"), ("udp", "UDP"), ("udp6", "UDP")):
        try:
            with open(f"/proc/net/{table}") as fh:
                lines = fh.read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if len(f) > 9 and f[9].isdigit() and int(f[9]) in inodes:
                state = _TCP_STATES.get(f[3], "open") if kind == "TCP" else "bound"
                where = f"on {_tcp_address(f[1])}" if state != "connected" else f"to {_tcp_address(f[2])}"
                found[int(f[9])] = f"{kind} socket {state} {where}"
    try:
        with open("/proc/net/unix") as fh:
            for line in fh.read().splitlines()[1:]:
                f = line.split()
                if len(f) > 6 and f[6].isdigit() and int(f[6]) in inodes:
                    listening = int(f[3], 16) & 0x10000
                    path = f[7] if len(f) > 7 else "(unnamed)"
                    found[int(f[6])] = f"Unix socket {'listening' if listening else 'open'} at {path}"
    except OSError:
        pass
    return {i: found.get(i, "a socket") for i in inodes}


def _caller(frame: FrameType | None, skip: tuple[str, ...]) -> str:
    """``file:line`` of the first frame outside the modules ``skip`` (the code that made the call)."""
    while frame is not None and frame.f_globals.get("__name__", "").startswith(skip):
        frame = frame.f_back
    if frame is None:
        return "?"
    return f"{frame.f_code.co_filename}:{frame.f_lineno}"


class Watch:
    """Watches the import of the task in the warm parent (a context manager; see the module docstring).

    It also tells who drew from a global random generator while the task was imported (:attr:`rng_own`,
    :attr:`rng_library`), by looking at the generators (:func:`rng_marks`) before and after each import line of
    the task's own files: a draw inside the import of an installed library (``rich`` draws ``getrandbits(24)``
    for its style ids) is that library's own, the same in every trial, which each fork re-seeds before its task
    runs; a draw by the task's own code (a module body, a module of its own) is a value the task computes with,
    made unseeded in the warm parent: refused. The decision depends only on who drew, never on what an earlier
    import (the early warm parent's) happened to hold.

    Parameters
    ----------
    code_root : str
        The code snapshot the task is imported from: an ``import`` in a file below it is the task's own.
    """

    def __init__(self, code_root: str) -> None:
        self.code_root = os.path.realpath(code_root) + os.sep
        self.import_s = 0.0
        self._stack: list[dict[str, Any]] = []
        self._thread_from: dict[int, dict[str, Any]] = {}  # tid -> where it appeared
        self._socket_from: dict[int, dict[str, Any]] = {}  # inode -> where it appeared
        self._py_started: dict[int, str] = {}  # Thread ident -> file:line that started it
        self._sock_calls: list[tuple[str, str]] = []  # (call, file:line)
        self._threads0: set[int] = set()
        self._known: set[int] = set()
        self._real: dict[str, str] = {}  # a caller's file name -> its real path (asked once per file)
        self._sockets0: set[int] = set()
        self._procs0: set[tuple[int, int]] = set()  # this process's descendants before the watch
        self._proc_from: dict[tuple[int, int], dict[str, Any]] = {}  # a process -> the import line it came from
        self._spawned: dict[int, str] = {}  # pid -> file:line that started it (subprocess.Popen, os.fork)
        self._rng: dict[str, Any] = {}  # the generators' marks at the last look (rng_marks)
        #: generators drawn by the task's own code at import (its module bodies, its own modules): refused
        self.rng_own: list[str] = []
        #: draws made while an import line of the task imported an installed library: the library's own
        self.rng_library: list[dict[str, str]] = []

    def _rng_look(self, module: str | None) -> None:
        """Note which generators were drawn since the last look, and by whom: ``module`` (an import of a task
        line that just ended) or, when None, the task's own code between its import lines."""
        now = rng_marks()
        for name, mark in now.items():
            if (name in self._rng and self._rng[name] != mark) or (name not in self._rng and
                                                                   _fresh_drawn(name, mark)):
                if module is None or self._own_module(module):
                    if name not in self.rng_own:
                        self.rng_own.append(name)
                else:
                    self.rng_library.append({"generator": name, "module": module})
        self._rng = now

    def _procs_look(self, module: str, via: str) -> None:
        """Note the processes that appeared below this one during the import of ``module`` (a task line ``via``)."""
        for proc in proctree.descendants(os.getpid()):
            if proc not in self._procs0 and proc not in self._proc_from:
                self._proc_from[proc] = {"module": module, "via": via}

    def _own_module(self, name: str) -> bool:
        """Whether module ``name`` is the task's own (its file in the code snapshot), not an installed library."""
        path = getattr(sys.modules.get(name), "__file__", None)
        return path is None or os.path.realpath(path).startswith(self.code_root)

    def _task_line(self) -> str | None:
        """The task file's own line making the current import, when the caller is a task file."""
        frame = sys._getframe(2)
        if frame.f_code.co_filename.startswith("<"):  # <frozen importlib._bootstrap>, <string>: no file
            return None
        filename = self._real.get(frame.f_code.co_filename)
        if filename is None:
            filename = self._real[frame.f_code.co_filename] = os.path.realpath(frame.f_code.co_filename)
        if filename.startswith(self.code_root):
            src = traceback.extract_stack(frame, limit=1)[-1]
            return f"`{(src.line or '').strip()}` ({os.path.relpath(filename, self.code_root)} line {frame.f_lineno})"
        return None

    @contextlib.contextmanager
    def _patched(self) -> Iterator[None]:
        real_import = builtins.__import__
        real_start = threading.Thread.start
        real_listen, real_connect = socket.socket.listen, socket.socket.connect
        real_popen, real_fork = subprocess.Popen.__init__, os.fork
        watch = self

        def watched_import(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (),
                           level: int = 0) -> Any:
            if level == 0 and name in sys.modules:  # the common case first: already imported
                return real_import(name, globals, locals, fromlist, level)
            absolute = name if level == 0 else f"{(globals or {}).get('__package__') or ''}.{name}".strip(".")
            if absolute in sys.modules:
                return real_import(name, globals, locals, fromlist, level)
            via = watch._task_line()
            if via:  # an import line of the task: who drew, the task's code before it or what it imports
                watch._rng_look(None)
            entry = {"module": absolute, "via": via or (watch._stack[-1]["via"] if watch._stack else None),
                     "n_threads": _thread_count(), "sockets": socket_inodes() if via else None}
            watch._stack.append(entry)
            try:
                return real_import(name, globals, locals, fromlist, level)
            finally:
                watch._stack.pop()
                if via:
                    watch._rng_look(absolute)
                    watch._procs_look(absolute, via)
                if _thread_count() != entry["n_threads"]:  # one stat per import; the listing only on a change
                    now = thread_ids()
                    for tid in now - watch._known:  # the innermost import that saw it appear started it
                        watch._thread_from[tid] = {"module": absolute, "via": entry["via"]}
                    watch._known = now
                if entry["sockets"] is not None:  # the task file's own imports (a listing of the fds each)
                    for ino in socket_inodes() - entry["sockets"]:
                        watch._socket_from.setdefault(ino, {"module": absolute, "via": entry["via"]})

        def watched_start(thread: threading.Thread, *args: Any, **kwargs: Any) -> Any:
            out = real_start(thread, *args, **kwargs)
            if thread.ident is not None:
                watch._py_started[thread.ident] = _caller(sys._getframe(1), ("threading",))
            return out

        def watched_listen(sock: socket.socket, *args: Any) -> Any:
            watch._sock_calls.append(("listen", _caller(sys._getframe(1), ("socket",))))
            return real_listen(sock, *args)

        def watched_connect(sock: socket.socket, *args: Any) -> Any:
            watch._sock_calls.append(("connect", _caller(sys._getframe(1), ("socket",))))
            return real_connect(sock, *args)

        def watched_popen(proc: subprocess.Popen[Any], *args: Any, **kwargs: Any) -> None:
            real_popen(proc, *args, **kwargs)
            watch._spawned[proc.pid] = _caller(sys._getframe(1), ("subprocess",))

        def watched_fork() -> int:
            pid = real_fork()
            if pid:
                watch._spawned[pid] = _caller(sys._getframe(1), ("os",))
            return pid

        builtins.__import__ = watched_import
        subprocess.Popen.__init__ = watched_popen  # type: ignore[method-assign]
        os.fork = watched_fork
        threading.Thread.start = watched_start  # type: ignore[method-assign]
        socket.socket.listen = watched_listen  # type: ignore[method-assign]
        socket.socket.connect = watched_connect  # type: ignore[method-assign]
        try:
            yield
        finally:
            builtins.__import__ = real_import
            subprocess.Popen.__init__ = real_popen  # type: ignore[method-assign]
            os.fork = real_fork
            threading.Thread.start = real_start  # type: ignore[method-assign]
            socket.socket.listen, socket.socket.connect = real_listen, real_connect  # type: ignore[method-assign]

    def __enter__(self) -> Watch:
        self._rng = rng_marks()
        self._procs0 = set(proctree.descendants(os.getpid()))
        self._threads0, self._sockets0 = thread_ids(), socket_inodes()
        self._known = set(self._threads0)
        self._t0 = time.perf_counter()
        self._cm = self._patched()
        self._cm.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._cm.__exit__(*exc)
        self.import_s = time.perf_counter() - self._t0
        self._rng_look(None)  # a draw after the task's last import line: its own code

    def report(self) -> dict[str, Any]:
        """The threads and sockets there are now and were not before the watch, each with where it came
        from (plain data: it travels in the warm parent's ready report), and the import's duration."""
        py = {t.native_id: t for t in threading.enumerate() if t.native_id is not None}
        threads = []
        for tid in sorted(thread_ids() - self._threads0):
            t = py.get(tid)
            origin = self._thread_from.get(tid, {})
            try:
                with open(f"/proc/self/task/{tid}/comm") as fh:
                    comm = fh.read().strip()
            except OSError:
                comm = "?"
            target = getattr(t, "_target", None) if t is not None else None
            threads.append({
                "name": t.name if t is not None else comm, "python": t is not None,
                "target": f"{getattr(target, '__module__', '?')}.{getattr(target, '__qualname__', '?')}"
                if target is not None else None,
                "started_at": self._py_started.get(t.ident) if t is not None and t.ident is not None else None,
                "module": origin.get("module"), "via": origin.get("via"),
            })
        new = socket_inodes() - self._sockets0
        names = describe_sockets(new)
        calls = [self._rel(where) for call, where in sorted(self._sock_calls, key=lambda c: c[0] != "listen")]
        sockets = [{"what": names[i], **self._socket_from.get(i, {"module": None, "via": None}),
                    "started_at": calls[0] if calls else None} for i in sorted(new)]
        for t in threads:
            t["started_at"] = self._rel(t["started_at"])
        procs = [{"pid": pid, "start": start, "what": _cmdline(pid), **self._proc_from.get((pid, start), {}),
                  "started_at": self._rel(self._spawned.get(pid))}
                 for pid, start in proctree.descendants(os.getpid()) if (pid, start) not in self._procs0]
        return {"threads_new": threads, "sockets": sockets, "processes": procs, "import_s": round(self.import_s, 3)}

    def _rel(self, where: str | None) -> str | None:
        """A ``file:line`` in the code snapshot, relative to it (as the user's project names the file)."""
        if where and not where.startswith("<") and os.path.realpath(where.rsplit(":", 1)[0]).startswith(self.code_root):
            path, _, line = where.rpartition(":")
            return f"{os.path.relpath(os.path.realpath(path), self.code_root)} line {line}"
        return where


def _cmdline(pid: int) -> str:
    """A process's command line, shortened (``?`` when it is gone)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            text = fh.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return "?"
    return text if len(text) <= 80 else text[:77] + "..."


def own_processes() -> list[dict[str, Any]]:
    """This process's live descendants, each ``{pid, start, what}`` (its command line)."""
    return [{"pid": pid, "start": start, "what": _cmdline(pid)} for pid, start in proctree.descendants(os.getpid())]


def end_processes(report: Mapping[str, Any]) -> None:
    """Kill (SIGKILL) and reap the processes the task's import started (``report["processes"]``): the warm parent
    refuses to fork from there, and none may outlive it."""
    procs = [(int(p["pid"]), int(p["start"])) for p in report.get("processes") or []]
    proctree.reap(pid for pid, _ in proctree.kill(procs))


def _origin(item: Mapping[str, Any], *first: str) -> str:
    bits = list(first)
    if item.get("target"):
        bits.append(f"running {item['target']}")
    if item.get("started_at"):
        bits.append(f"started at {item['started_at']}")
    if item.get("module"):
        bits.append(f"while importing {item['module']}")
    if item.get("via"):
        bits.append(f"pulled in by {item['via']}")
    return f" ({', '.join(bits)})" if bits else ""


def _setting(item: Mapping[str, Any]) -> str | None:
    module, name = str(item.get("module") or ""), str(item.get("name") or "")
    for (prefix, thread), fix in SETTINGS.items():
        if module.split(".")[0] == prefix and name.startswith(thread):
            return fix
    return None


def explain(report: Mapping[str, Any], task: str) -> tuple[str, str] | None:
    """The refusal (message, fix) for a warm parent whose ready ``report`` shows threads or sockets a fork
    cannot share, or None when it shows none. ``task`` names the task module(s) for the message."""
    threads = list(report.get("threads_new") or [])
    sockets = list(report.get("sockets") or [])
    procs = list(report.get("processes") or [])
    if not threads and not sockets and not procs:
        return None
    parts, fixes = [], []
    if procs:
        named = "; ".join(f"pid {p['pid']} (`{p['what']}`){_origin(p)}" for p in procs)
        parts.append(f"importing {task} started {len(procs)} process(es) in the warm parent every trial is forked "
                     f"from: {named}. Every trial would share it, and it would outlive the ablation (it was "
                     "ended now)")
    if threads:
        named = "; ".join(f"`{t['name']}`{_origin(t, *([] if t.get('python') else ['a native thread']))}"
                          for t in threads)
        parts.append(f"importing {task} started {len(threads)} thread(s) in the warm parent every trial is forked "
                     f"from: {named}. A fork keeps only the forking thread, so a trial could hang on a lock one of "
                     "them held")
        fixes += [s for t in threads if (s := _setting(t))]
    if sockets:
        named = "; ".join(f"a {s['what']}{_origin(s)}" for s in sockets)
        parts.append(f"importing {task} opened {len(sockets)} socket(s) in the warm parent: {named}. Every fork "
                     "would share it: trials would accept on one listening socket or write into one connection, "
                     "and hang")
    moves = sorted({str(i["via"]) for i in threads + sockets + procs if i.get("via")})
    if moves:
        fixes.append("move " + " and ".join(moves) + " into the task function, so each trial runs it after the fork"
                     + (" (a trial's own processes end with it)" if procs else ""))
    elif threads + sockets + procs:
        fixes.append("start it inside the task function instead of at import")
    cost = report.get("import_s")
    fixes.append("or run each trial in a fresh process with `launcher.warm=false`"
                 + (f" (each trial then imports the task itself: {float(cost):.2f} s here)" if cost else ""))
    return ". ".join(parts), "; ".join(dict.fromkeys(fixes))


#: numpy's global generator's state the moment ``numpy.random`` was imported (it is seeded from OS entropy then,
#: so no later look can know where it started): filled by the import hook :func:`rng_marks` sets.
_RNG_AT_IMPORT: dict[str, Any] = {}
_CAPTURE = PostImportHook()


def _note_numpy(module: Any) -> None:
    get_state = getattr(module, "get_state", None)
    if get_state is not None:
        _RNG_AT_IMPORT["numpy"] = _numpy_mark(get_state())


def rng_marks() -> dict[str, Any]:
    """Where the process-global random generators stand now (python's ``random``, numpy's global
    ``RandomState`` and torch's default CPU generator, those imported), to tell later whether an import drew
    from them (:func:`rng_drawn`). Each mark covers the generator's whole state (numpy's 624 words, not its
    position: a draw of a multiple of 624 words leaves the position where it was). Before ``numpy.random`` is
    imported (numpy loads it on first use), an import hook notes its state the moment it is."""
    marks: dict[str, Any] = {"random": hash(random.getstate())}
    nr = sys.modules.get("numpy.random")
    get_state = getattr(nr, "get_state", None) if nr is not None else None
    if get_state is not None:
        marks["numpy"] = _numpy_mark(get_state())
    elif "numpy" not in _RNG_AT_IMPORT and "numpy.random" not in _CAPTURE.callbacks:
        _CAPTURE.add("numpy.random", _note_numpy)
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "get_rng_state"):
        marks["torch"] = hash(torch.get_rng_state().numpy().tobytes())
    return marks


def _numpy_mark(state: Any) -> int:
    return hash((state[1].tobytes(), state[2], state[3], state[4]))


def _fresh_drawn(name: str, mark: Any) -> bool:
    """Whether generator ``name``, imported since the last marks, drew since its import (numpy: against its
    state noted at import; torch: against its generator re-seeded with ``torch.initial_seed()``)."""
    if name == "numpy":
        at = _RNG_AT_IMPORT.get("numpy")
        return at is not None and at != mark
    if name == "torch":
        torch = sys.modules["torch"]
        g = torch.Generator()
        g.manual_seed(torch.initial_seed())
        return not torch.equal(torch.get_rng_state(), g.get_state())
    return False


def rng_drawn(before: Mapping[str, Any]) -> list[str]:
    """The global generators drawn from since ``before`` (:func:`rng_marks`): a module that draws random
    numbers when imported (``W = torch.randn(64, 8)``, ``random.shuffle(ids)`` at its top) in a warm parent
    gives every trial forked from it that one draw, made before any seed was set, where a fresh process
    (``launcher.warm=false``) draws it after ablate seeded it from the trial's seed. numpy or torch imported
    since ``before`` counts as drawn when its generator is no longer where its import left it."""
    after = rng_marks()
    return [name for name, mark in after.items()
            if (name in before and before[name] != mark) or (name not in before and _fresh_drawn(name, mark))]


@contextlib.contextmanager
def env_reads(names: Collection[str]) -> Iterator[list[str]]:
    """Note which of the variables ``names`` code running inside the block reads from ``os.environ`` (directly,
    with ``os.getenv``, ``in`` or ``.get``): yields the list they are added to, in the order first read.

    The variables each trial sets to its own value (its seed, its dirs: :data:`ablate.trials.seeding.TRIAL_ENV`)
    are unset in the warm parent: a module that reads one when imported there keeps that absent value for every
    trial forked from it, where a fresh trial's import reads its own. ``os.environ`` is a recording view of the
    same variables inside the block (``putenv`` and every write behave as before), and the real one after it.
    """
    real = os.environ
    seen: list[str] = []
    wanted = frozenset(names)

    class Recording(type(real)):  # type: ignore[misc]
        def __getitem__(self, key: str) -> str:
            if key in wanted and key not in seen:
                seen.append(key)
            return super().__getitem__(key)

    # a view of the same variables, not a new environment (B003's worry): `os.getenv` reads it too
    os.environ = Recording(real._data, real.encodekey, real.decodekey,  # type: ignore[attr-defined]  # noqa: B003
                           real.encodevalue, real.decodevalue)  # type: ignore[attr-defined]
    try:
        yield seen
    finally:
        os.environ = real  # noqa: B003


#: How :func:`ablate.trials.warm.starter.unsafe_reason` names each generator.
RNG_NAMES = {"random": "python's `random`", "numpy": "numpy's global generator (`np.random`)",
             "torch": "torch's default generator"}
