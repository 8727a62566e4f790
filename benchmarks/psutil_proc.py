"""psutil against ablate's own /proc readers (issue 34): the same answer? time per call (interleaved rounds).

Usage::

    python benchmarks/psutil_proc.py

Builds a tree of 5 descendants (a grandchild among them) and 5 sockets (TCP listening and both ends of a
connection, UDP, Unix), prints both readers' answers, then the median [min, max] microseconds per call of
``proctree.descendants`` against ``psutil.Process().children(recursive=True)`` and of ``hazards.socket_inodes``
(and ``describe_sockets``) against ``psutil.Process().net_connections("all")``. Figures: docs/design-notes.md.
"""
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import psutil

from ablate.trials import proctree
from ablate.trials.warm import hazards

# a tree: 3 children, one with a grandchild; sockets: TCP listening and connected, UDP, Unix listening
kids = [subprocess.Popen(["sleep", "60"]) for _ in range(2)]
kids.append(subprocess.Popen(["sh", "-c", "sleep 60 & sleep 60; wait"]))
time.sleep(0.5)
srv = socket.socket()
srv.bind(("127.0.0.1", 0))
srv.listen()
cli = socket.create_connection(srv.getsockname())
acc, _ = srv.accept()
udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
udp.bind(("127.0.0.1", 0))
upath = tempfile.mktemp(suffix=".sock")
us = socket.socket(socket.AF_UNIX)
us.bind(upath)
us.listen()
me = psutil.Process()


def ours_tree() -> list[int]:
    return sorted(p for p, _ in proctree.descendants(os.getpid()))


def ps_tree() -> list[int]:
    return sorted(c.pid for c in me.children(recursive=True) if c.status() != psutil.STATUS_ZOMBIE)


def ps_tree_start() -> list[tuple[int, float]]:  # pid + start time, as ablate keys them (against pid reuse)
    return [(c.pid, c.create_time()) for c in me.children(recursive=True)]


def ours_sock() -> dict[int, str]:
    return hazards.describe_sockets(hazards.socket_inodes())


def ps_sock() -> list:
    return me.net_connections(kind="all")


def per_call(f, n: int) -> float:
    t = time.perf_counter()
    for _ in range(n):
        f()
    return (time.perf_counter() - t) / n * 1e6


print("tree   ours:", ours_tree(), "\n       psutil:", ps_tree(), "\n       same:", ours_tree() == ps_tree())
o, p = ours_sock(), ps_sock()
print("sockets ours:", sorted(o.values()))
print("        psutil:", sorted((c.family.name, c.type.name, str(c.laddr), str(c.raddr), c.status) for c in p))
print("        count ours", len(o), "psutil", len(p))
cases = {"tree ours": (lambda: proctree.descendants(os.getpid()), 100), "tree psutil": (ps_tree, 100),
         "tree+start psutil": (ps_tree_start, 100), "sock ids ours": (hazards.socket_inodes, 500),
         "sock described ours": (ours_sock, 200), "sock psutil": (ps_sock, 200)}
res: dict[str, list[float]] = {k: [] for k in cases}
for _ in range(5):  # interleaved rounds, so a burst of load hits every case alike
    for k, (f, n) in cases.items():
        res[k].append(per_call(f, n))
for k, v in res.items():
    print(f"{k:22s} median {statistics.median(v):8.1f} us/call  [min {min(v):.1f}, max {max(v):.1f}]")
print("processes in /proc:", len([p for p in os.listdir("/proc") if p.isdigit()]))
for c in me.children(recursive=True):
    c.kill()
for k in kids:
    k.wait()
os.unlink(upath)
