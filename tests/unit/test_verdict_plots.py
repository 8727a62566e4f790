"""``ablate verdict`` writes the text first and draws the plots after it, in a detached process that holds the
sweep dir's lock until done (issue 15: plots drawn without blocking the text). Every wait here is on that
lock (:func:`tests.helpers.wait_for_plots`), never on a file appearing or on time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from ablate.cli.commands import dispatch
from ablate.judge.verdict import draw_plots, write_verdict
from ablate.orchestrate.status import format_status
from ablate.record.sweepdir import LOCK_FILE, PLOTS_HOLDER, PLOTS_LOG, SweepDir
from tests.helpers import REPO, make_sweep, wait_for_plots

C = [0.712, 0.695, 0.731, 0.704, 0.719]
T = [0.728, 0.741, 0.716, 0.739, 0.733]
T2 = [0.709, 0.722, 0.700, 0.731, 0.713]
PNGS = ("verdict_values.png", "verdict_paired.png", "verdict_forest.png")


def _sweep(root: Path) -> Path:
    # pairing declared: the paired-differences plot is drawn only for a paired analysis (auto pairs from N0 = 19)
    return make_sweep(root, {"control": C, "lr=0.1": T, "lr=0.2": T2}, options={"pairing": "paired"})


def test_text_first_then_plots_equal_the_synchronous_verdict(tmp_path: Path) -> None:
    """Text written with the plots pending, then drawn from verdict.json: the same files, byte for byte, as
    the synchronous write_verdict (which draws from the verdict in memory)."""
    sync, later = _sweep(tmp_path / "a" / "sw"), _sweep(tmp_path / "b" / "sw")
    write_verdict(SweepDir.open(sync))
    v = write_verdict(SweepDir.open(later), plots_later=True)
    assert v["plots"] == {"pending": True}
    assert json.loads((later / "verdict.json").read_text())["plots"] == {"pending": True}
    md = (later / "verdict.md").read_text()
    assert "Being drawn after this text" in md and "plots.log" in md and ".png" not in md
    assert not any((later / f).exists() for f in PNGS)
    drawn = draw_plots(SweepDir.open(later))  # what the background process runs: verdict.json in, files out
    assert set(drawn["plots"]) == {"values", "paired", "forest"}
    for name in ("verdict.json", "verdict.md", "summary.json", "ablation_table.csv", *PNGS):
        # each names its own sweep dir (the Next line's `ablate extend DIR`): the same once that is written DIR
        assert (later / name).read_bytes().replace(bytes(later), b"DIR") == \
            (sync / name).read_bytes().replace(bytes(sync), b"DIR"), name


def test_cli_returns_with_the_text_and_the_child_draws(tmp_path: Path) -> None:
    """`ablate verdict DIR` in a fresh process: neither matplotlib nor statsmodels (nor pandas) is imported
    there; the detached child draws the PNGs, rewrites verdict.md to show them, removes plots.log and
    leaves the lock free with no holder line."""
    root = _sweep(tmp_path / "sw")
    gone = subprocess.Popen(["true"])  # a writer that has exited: its temp file is debris
    gone.wait()
    debris = root / "trials" / "control" / "seed=1" / f".result.json.tmp-{gone.pid}-{time.time_ns()}"
    debris.write_text("{")
    code = ("import sys; from ablate.cli.commands import dispatch; assert dispatch('verdict', [sys.argv[1]]) == 0; "
            "print(sorted(m for m in ('matplotlib', 'statsmodels', 'pandas') if m in sys.modules))")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-c", code, str(root)], capture_output=True, text=True, env=env,
                         check=True)
    assert out.stdout.strip().splitlines() == [str(root / "verdict.md"), "[]"]
    wait_for_plots(root)
    md = (root / "verdict.md").read_text()
    assert "](verdict_values.png)" in md and "](verdict_paired.png)" in md and "](verdict_forest.png)" in md
    assert "Being drawn" not in md
    assert all((root / f).read_bytes()[:4] == b"\x89PNG" for f in PNGS)
    assert not (root / PLOTS_LOG).exists()
    assert not SweepDir.open(root).is_locked() and not SweepDir.open(root).drawing_plots()
    assert "plots" not in format_status(SweepDir.open(root))
    assert not debris.exists()  # the drawing process cleaned the debris `ablate verdict` left to it


def test_wait_plots_and_no_plots(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    root = _sweep(tmp_path / "sw")
    assert dispatch("verdict", [str(root), "--wait-plots"]) == 0  # drawn before returning: nothing to wait for
    assert not SweepDir.open(root).is_locked()
    assert "](verdict_values.png)" in (root / "verdict.md").read_text()
    other = _sweep(tmp_path / "other")
    assert dispatch("verdict", [str(other), "--no-plots"]) == 0
    assert not SweepDir.open(other).is_locked() and not any((other / f).exists() for f in PNGS)
    assert "## Plots" not in (other / "verdict.md").read_text()
    capsys.readouterr()


def test_a_crashed_drawing_is_visible(tmp_path: Path) -> None:
    """The drawing process dies (here: verdict.json unreadable): its traceback stays in plots.log, verdict.md
    still says the plots are being drawn and points there, `ablate status` says they were not drawn, and
    the lock is free again."""
    root = _sweep(tmp_path / "sw")
    sd = SweepDir.open(root)
    write_verdict(sd, plots_later=True)
    (root / "verdict.json").write_text("{")  # the child cannot read the verdict
    assert sd.try_acquire()
    fd = sd.hand_over_lock()
    assert SweepDir.open(root).drawing_plots()
    assert "the verdict's plots are being drawn" in format_status(SweepDir.open(root))
    assert "(not running)" in format_status(SweepDir.open(root))  # not an orchestrator: no trial is "running"
    with open(root / PLOTS_LOG, "wb") as log:
        proc = subprocess.run([sys.executable, "-m", "ablate.judge.plots_child", str(root), str(fd)], pass_fds=(fd,),
                              stderr=log, env={**os.environ, "PYTHONPATH": str(REPO)}, check=False)
    sd.forget_lock()
    assert proc.returncode == 1
    assert "JSONDecodeError" in (root / PLOTS_LOG).read_text()
    assert "If this line stays, they were not drawn: `plots.log`" in (root / "verdict.md").read_text()
    status = format_status(SweepDir.open(root))
    assert f"the verdict's plots were not drawn: the process drawing them failed, see {root / PLOTS_LOG}" in status
    assert not SweepDir.open(root).is_locked() and not SweepDir.open(root).drawing_plots()


def test_other_commands_wait_for_the_drawing_not_for_an_ablation(tmp_path: Path) -> None:
    """A plot-drawing holder is waited for (then the lock is taken); any other holder is refused at once."""
    root = _sweep(tmp_path / "sw")
    holder = SweepDir.open(root)
    assert holder.try_acquire()
    assert not SweepDir.open(root).try_acquire()  # an ordinary holder: refused, no wait
    holder.hand_over_lock()
    assert (root / LOCK_FILE).read_text().endswith(PLOTS_HOLDER)
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE,
                             pass_fds=(holder._lock_fd,))  # a process holding the handed-over lock
    holder.forget_lock()
    waiter = SweepDir.open(root)
    assert waiter.drawing_plots()
    child.stdin.close()  # type: ignore[union-attr]  # the holder ends: its lock goes with it
    assert waiter.try_acquire()  # waited for the drawing holder instead of refusing
    child.wait()
    waiter.release()


def test_the_holder_line_always_ends_with_the_marker(tmp_path: Path) -> None:
    """The plot drawer's line replaces a longer one without ever being shorter than it (a waiter reading in
    between sees the marker at the end, not an old tail)."""
    from ablate.record.sweepdir import write_plots_holder

    path = tmp_path / "lock"
    path.write_text("x" * 2000)  # longer than any holder line (its command is cut at 300 characters)
    fd = os.open(path, os.O_RDWR)
    try:
        write_plots_holder(fd)
    finally:
        os.close(fd)
    line = path.read_text()
    assert line.endswith(f": {PLOTS_HOLDER}") and len(line) == 2000 and line.startswith(f"pid {os.getpid()} (")
    assert f") on {os.uname().nodename} since " in line  # the holder's command, then its host and start


def test_a_holder_line_replaces_a_longer_one_with_no_old_tail_and_a_refusal_skips_a_dead_pid(tmp_path: Path) -> None:
    """The lock holder's line is written over the previous holder's in one write (never an empty file), padded
    to its length; a refusal names a live holder, not the dead one whose line is still there."""
    from ablate.record.sweepdir import write_holder

    sd = SweepDir(tmp_path)
    path = tmp_path / ".lock"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    path.write_text(f"pid {dead.pid} (ablate resume {tmp_path}/with/a/long/name) on {os.uname().nodename} since x\n")
    assert sd.live_holder(wait_s=0.2).endswith("it may have just ended")  # the dead pid: said so, after the wait
    fd = os.open(path, os.O_RDWR)
    try:
        write_holder(fd, f"pid {os.getpid()} (ablate resume d) on {os.uname().nodename} since now")
    finally:
        os.close(fd)
    assert sd.lock_holder() == f"pid {os.getpid()} (ablate resume d) on {os.uname().nodename} since now"
    assert sd.live_holder(wait_s=0.0) == sd.lock_holder()


def test_a_plot_drawer_held_past_the_wait_is_named_as_such(tmp_path: Path, monkeypatch, capsys) -> None:
    """`ablate verdict` waits for an earlier verdict's plot drawer up to PLOTS_WAIT_S (10 minutes; 0.3 s here,
    the one value patched); past it, the message names the drawer, its pid to stop and its log, never "an
    ablation is running"; with an option to remember, the same in a one-line refusal (exit 2), nothing written."""
    import ablate.record.sweepdir as sweepdir

    root = _sweep(tmp_path / "sw")
    holder = SweepDir.open(root)
    assert holder.try_acquire()
    code = ("import sys; from ablate.record.sweepdir import write_plots_holder; "
            f"write_plots_holder({holder._lock_fd}); print('ready', flush=True); sys.stdin.read()")
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             pass_fds=(holder._lock_fd,), env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        assert child.stdout.readline() == b"ready\n"  # type: ignore[union-attr]  # its pid is the holder's now
        holder.forget_lock()
        monkeypatch.setattr(sweepdir, "PLOTS_WAIT_S", 0.3)
        assert dispatch("verdict", [str(root)]) == 0
        out = capsys.readouterr()
        assert "# Ablation of" in out.out and not (root / "verdict.md").exists()
        assert "an ablation is running" not in out.err
        assert (f"ablate: the process drawing an earlier verdict's plots has held {root} for more than 0.3 s "
                f"(pid {child.pid} ") in out.err
        assert (f"stop it (`kill {child.pid}`; its log is {root / PLOTS_LOG}), then run `ablate verdict` "
                "again") in out.err
        from ablate.cli.main import main

        assert main(["verdict", str(root), "--alpha", "0.01"]) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
        assert "earlier verdict's plots has held" in err and "so options cannot be remembered now" in err
        assert not (root / "verdict_options.json").exists()
        # the fix it names: `kill PID`, then the verdict again (drawn before returning, here)
        subprocess.run(["kill", str(child.pid)], check=True)
        child.wait(timeout=60)
        assert dispatch("verdict", [str(root), "--wait-plots"]) == 0
        assert "](verdict_values.png)" in (root / "verdict.md").read_text()
    finally:
        child.stdin.close()  # type: ignore[union-attr]
        child.stdout.close()  # type: ignore[union-attr]
        child.wait()
