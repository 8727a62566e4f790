"""Submission intents: a SLURM array is never submitted twice for the same trials.

``sbatch`` and the write of ``slurm/jobs.json`` cannot be one atomic step: a submitting process that
dies between them (SIGKILL, a lost login session, a node reboot) leaves an array running that no record
names, and a later ``ablate collect`` would submit its trials again, so two jobs would write one trial
dir. So, before ``sbatch``, the launcher records an *intent* (``slurm/intents.json``): the array's job
name, unique to this sweep dir and this submission (``ablate-<ablation id>-<nonce>-<sweep dir name>``),
and the trials in array order. After ``sbatch`` the jobs go to ``jobs.json`` and the intent is dropped.
Whoever finds an intent left behind asks SLURM for jobs of that name (``squeue``, then ``sacct``): an
array found is adopted (task ``i`` runs ``trials[i]``); none found means ``sbatch`` never ran, and the
trials are free to submit.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ablate.errors import SchedulerError
from ablate.record.sweepdir import SweepDir, read_json, write_json

INTENTS_FILE = "intents.json"


def ablation_id(sd: SweepDir) -> str:
    """A short id of the ablation, the same from every process: a hash of its sweep dir's real path."""
    return hashlib.sha256(str(sd.root.resolve()).encode()).hexdigest()[:10]


def new_job_name(sd: SweepDir) -> str:
    """A job name that names this ablation and this one submission (at most 64 characters).

    The sweep dir's name is kept for people reading ``squeue``, with every character other than letters,
    digits, ``.``, ``_`` and ``-`` made ``_``: SLURM splits name lists at commas, and ``|`` separates
    the fields of the listings it is looked up in (:func:`find_arrays`).
    """
    readable = re.sub(r"[^A-Za-z0-9._-]", "_", sd.root.name)
    return f"ablate-{ablation_id(sd)}-{uuid.uuid4().hex[:8]}-{readable}"[:64]


def _file(sd: SweepDir, slurm_dir: str) -> Path:
    return sd.root / slurm_dir / INTENTS_FILE


def pending(sd: SweepDir, slurm_dir: str) -> list[dict[str, Any]]:
    """The intents recorded and not yet resolved (each ``{"name", "trials": [[arm, seed, attempt], ...]}``)."""
    try:
        return list(read_json(_file(sd, slurm_dir)).get("intents", []))
    except (FileNotFoundError, json.JSONDecodeError, AttributeError):
        return []


def record(sd: SweepDir, slurm_dir: str, name: str, trials: Sequence[Any],
           tasks: Sequence[int] | None = None) -> None:
    """Record, before ``sbatch``, that an array named ``name`` is about to run ``trials`` (TrialRefs).

    ``tasks`` gives each trial's array task index when several trials share one task
    (``launcher.trials_per_job``); by default trial ``i`` is task ``i``.
    """
    intents = pending(sd, slurm_dir)
    idx = list(tasks) if tasks is not None else list(range(len(trials)))
    intents.append({"name": name, "trials": [[t.arm, int(t.seed), int(t.attempt), int(i)]
                                             for t, i in zip(trials, idx, strict=True)],
                    "at": time.strftime("%Y-%m-%dT%H:%M:%S%z")})
    sd.mkdir(_file(sd, slurm_dir).parent)
    write_json(_file(sd, slurm_dir), {"intents": intents})


def drop(sd: SweepDir, slurm_dir: str, name: str) -> None:
    """Forget the intent ``name`` (its array is in jobs.json, or was never submitted)."""
    intents = [i for i in pending(sd, slurm_dir) if i.get("name") != name]
    write_json(_file(sd, slurm_dir), {"intents": intents})


def find_arrays(name: str, run: Callable[[list[str]], Any]) -> list[str] | None:
    """Array job ids SLURM knows under the job name ``name``, exactly (``squeue``, then ``sacct`` over
    the last 30 days), or None when SLURM does not answer.

    Jobs are listed with their names and compared here, never looked up with ``--name``: SLURM reads
    ``--name`` as a comma-separated list, so a name holding a comma would match other jobs or none.
    """
    ids: set[str] = set()
    try:
        sq = run(["squeue", "-h", "--states=all", "-o", "%F|%j"])
    except SchedulerError:
        return None
    if sq.returncode != 0:
        return None
    ids |= {jid.strip() for jid, sep, got in (line.partition("|") for line in sq.stdout.splitlines())
            if sep and got.strip() == name}
    if shutil.which("sacct"):
        sa = run(["sacct", "-X", "-n", "-P", "-S", "now-30days", "-o", "JobID,JobName"])
        if sa.returncode == 0:
            ids |= {jid.strip().split("_")[0] for jid, sep, got in (line.partition("|")
                                                                   for line in sa.stdout.splitlines())
                    if sep and got.strip() == name}
    return sorted(ids, key=lambda j: (len(j), j))


def resolve(sd: SweepDir, slurm_dir: str, run: Callable[[list[str]], Any], *, write: bool,
            read_jobs: Callable[[], list[dict[str, Any]]],
            write_jobs: Callable[[list[dict[str, Any]]], None]) -> list[dict[str, Any]]:
    """Settle every intent left behind: adopt the array SLURM knows by its name, or drop the intent.

    Parameters
    ----------
    write : bool
        True (the lock holder: submit, collect): record adopted jobs in jobs.json and drop resolved
        intents. False (``ablate status``): change nothing, only return what was found.

    Returns
    -------
    list of dict
        Job records (``job_id``, ``arm``, ``seed``, ``attempt``) of the arrays found.

    Raises
    ------
    SchedulerError
        When SLURM does not answer: the intent stays, and nothing may be submitted until it is settled.
    """
    found: list[dict[str, Any]] = []
    for intent in pending(sd, slurm_dir):
        ids = find_arrays(intent["name"], run)
        if ids is None:
            raise SchedulerError(f"SLURM does not answer, so it is unknown whether the array {intent['name']} "
                                 "was submitted before the last ablate process stopped", where="launcher=slurm",
                                 fix=f"check that slurmctld is up (`scontrol ping`), then `ablate collect {sd.root}`")
        recs = [{"job_id": f"{ids[0]}_{t[3] if len(t) > 3 else i}", "arm": t[0], "seed": t[1], "attempt": t[2]}
                for i, t in enumerate(intent["trials"])] if ids else []
        found.extend(recs)
        if write:
            if recs:
                write_jobs(read_jobs() + recs)
            drop(sd, slurm_dir, intent["name"])
    return found
