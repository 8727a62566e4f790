"""The trial's process tree read from /proc: the children walk finds what a scan of every process finds."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from ablate.trials import proctree

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc and prctl are Linux's")


def test_children_walk_equals_a_scan_of_every_process_and_finds_a_setsid_grandchild() -> None:
    # a child that starts a grandchild in its own session, and a plain one: real processes. The test's own process
    # may already have children (a detached plot drawer of an in-process run in the same test worker), so the
    # three counted are the new ones, and only the child's tree is killed
    before = set(proctree.descendants(os.getpid()))
    proc = subprocess.Popen(["sh", "-c", "setsid sleep 60 & sleep 60 & wait"])
    try:
        deadline = time.monotonic() + 30
        while len(set(proctree.descendants(os.getpid())) - before) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        walk = proctree.descendants(os.getpid())
        scan = proctree._descendants_by_scan(os.getpid())
        new = [p for p in walk if p not in before]
        assert sorted(walk) == sorted(scan) and len(new) == 3
        assert new[0][0] == proc.pid  # parents before children
        assert sorted(proctree.descendants(proc.pid)) == sorted(new[1:])
    finally:
        proctree.kill_descendants(proc.pid)
        proc.kill()
        proc.wait()
    assert proctree.descendants(proc.pid) == []
    assert not set(proctree.descendants(os.getpid())) - before


def _alive(procs: list[proctree.Proc]) -> list[proctree.Proc]:
    """Those of ``procs`` still running (a zombie, killed and not yet reaped by init, is not)."""
    out = []
    for pid, start in procs:
        st = proctree._stat(pid)
        if st is not None and st[1] == start and st[2] != "Z":
            out.append((pid, start))
    return out


def _children_of(proc: subprocess.Popen[bytes], n: int) -> list[proctree.Proc]:
    deadline = time.monotonic() + 30
    while len(proctree.descendants(proc.pid)) < n and time.monotonic() < deadline:
        time.sleep(0.05)
    tree = proctree.descendants(proc.pid)
    assert len(tree) == n, tree
    return tree


def test_end_tree_kills_a_trial_that_ignores_sigterm_and_the_process_that_left_its_group() -> None:
    # a "trial" leading its own group that ignores SIGTERM (its children inherit that), with one child in the
    # group and one that left it (setsid): the grace ends, SIGKILL reaches the group and the escapee alike
    proc = subprocess.Popen(["sh", "-c", "trap '' TERM; setsid sleep 60 & sleep 60 & wait"], start_new_session=True)
    try:
        tree = _children_of(proc, 2)
        t0 = time.monotonic()
        proctree.end_tree(proc, grace_s=0.3)
        assert proc.returncode == -signal.SIGKILL  # SIGTERM was ignored: killed after the grace
        assert time.monotonic() - t0 >= 0.3
        deadline = time.monotonic() + 10
        while _alive(tree) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _alive(tree) == []
    finally:
        proctree.kill_descendants()
        proc.wait()


def test_kill_group_reaches_the_group_only_and_a_gone_group_is_no_error() -> None:
    proc = subprocess.Popen(["sh", "-c", "setsid sleep 60 & sleep 60 & wait"], start_new_session=True)
    try:
        tree = _children_of(proc, 2)
        deadline = time.monotonic() + 30  # the forked child calls setsid() a moment after it appears
        while not (escapee := [p for p in tree if os.getpgid(p[0]) != proc.pid]) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(escapee) == 1  # setsid: its own group
        proctree.kill_group(proc.pid)
        assert proc.wait(timeout=10) == -signal.SIGKILL
        deadline = time.monotonic() + 10
        while len(_alive(tree)) > 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _alive(tree) == escapee  # the group's sleep is gone; the one that left the group is not
        proctree.kill_group(proc.pid)  # nothing left to signal: no error
        proctree.kill_group(None)
    finally:
        proctree.kill(tree)
        proc.wait()
