"""The trial's process tree read from /proc: the children walk finds what a scan of every process finds."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from ablate.trials import proctree

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc and prctl are Linux's")


def test_children_walk_equals_a_scan_of_every_process_and_finds_a_setsid_grandchild() -> None:
    # a child that starts a grandchild in its own session, and a plain one: real processes
    proc = subprocess.Popen(["sh", "-c", "setsid sleep 60 & sleep 60 & wait"])
    try:
        deadline = time.monotonic() + 30
        while len(proctree.descendants(os.getpid())) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        walk = proctree.descendants(os.getpid())
        scan = proctree._descendants_by_scan(os.getpid())
        assert sorted(walk) == sorted(scan) and len(walk) == 3
        assert walk[0][0] == proc.pid  # parents before children
    finally:
        proctree.kill_descendants()
        proc.wait()
    assert proctree.descendants(os.getpid()) == proctree._descendants_by_scan(os.getpid()) == []
