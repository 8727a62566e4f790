"""``ablate status DIR``: how far an ablation got, from the sweep dir and (``launcher=slurm``) SLURM."""

from __future__ import annotations

from collections import Counter
from typing import Any

from ablate.errors import SchedulerError
from ablate.record.errorline import failure_line, log_end
from ablate.record.results import (
    evaluation_rows,
    misplaced_records,
    misplaced_warning,
    nothing_finished,
    trial_state,
)
from ablate.record.sweepdir import PLOTS_LOG, SweepDir
from ablate.trials.launchers import JobState, get_launcher, launcher_class
from ablate.trials.launchers.local import tail

#: Scheduler states shown as ``running`` (other active states, such as PENDING, show as ``pending``).
_RUNNING_STATES = ("RUNNING", "COMPLETING", "CONFIGURING", "STAGE_OUT", "SIGNALING")


def _job_states(sd: SweepDir, plan: dict[str, Any]) -> tuple[dict[tuple[str, int], JobState], str]:
    """The scheduler's view of trials still without a result (launcher=slurm), and a note when it
    cannot be asked."""
    cfg = dict((plan.get("options") or {}).get("launcher") or {"name": "local"})
    try:
        if not launcher_class(cfg.get("name")).detachable:
            return {}, ""  # every trial of this launcher died with its ablate process: the sweep dir says all
        return get_launcher(cfg).job_states(sd), ""
    except SchedulerError as exc:
        return {}, f"(the scheduler was not asked: {exc})"


def status_table(sd: SweepDir, notes: list[str] | None = None
                 ) -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    """Per arm counts (pending, running, done, failed, interrupted) and the failed trials (arm, seed,
    status, error, log).

    Trials submitted to a scheduler and still without a result take the scheduler's state; when it
    cannot be asked, a line saying so is appended to ``notes``. A trial that started (manifest.json)
    but has no result and no scheduler job is ``running`` while an ablate process holds the sweep
    dir's lock, and ``interrupted`` otherwise (its orchestrator died; ``ablate resume`` re-runs it).
    """
    plan = sd.plan()
    alive = sd.is_locked() and not sd.drawing_plots()  # an orchestrator works on the dir: started trials run
    jobs, note = _job_states(sd, plan)
    if note and notes is not None:
        notes.append(note)
    if notes is not None and (misplaced := misplaced_records(sd, plan)):
        notes.append(misplaced_warning(sd, misplaced))
    rows, failures = [], []
    for name, seeds in _trials_by_arm(sd, plan):
        arm = {"name": name}
        c: Counter[str] = Counter()
        for seed in seeds:
            status, rec = trial_state(sd, arm["name"], seed)
            job = jobs.get((arm["name"], seed)) if rec is None else None
            error = (rec or {}).get("error") or ""
            if job is not None and job.active:
                status = "running" if job.state in _RUNNING_STATES else "pending"
            elif job is not None:
                status = job.state.lower()
                error = (f"SLURM job {job.job_id} ended {job.state}{f' ({job.reason})' if job.reason else ''} "
                         "without a result (`ablate collect DIR` records it)")
            elif status == "running" and not alive:
                status = "interrupted"
            key = "done" if status == "ok" else status if status in ("pending", "running", "interrupted") else "failed"
            c[key] += 1
            if key == "failed":
                tp = sd.trial(arm["name"], seed)
                log = ((rec or {}).get("log") or (job.log if job else None)
                       or (tp.stderr if tp.stderr.exists() else None))
                failures.append({"arm": arm["name"], "seed": seed, "status": status, "error": error,
                                 "log": str(log) if log else None})
        rows.append({"arm": arm["name"], "pending": c["pending"], "running": c["running"], "done": c["done"],
                     "failed": c["failed"], "interrupted": c["interrupted"]})
    return rows, failures


def _trials_by_arm(sd: SweepDir, plan: dict[str, Any]) -> list[tuple[str, list[int]]]:
    """Each arm's seeds: every seed of the plan; a tuned ablation's chosen arms add their evaluation seeds, and an
    arm whose choice is not made yet is listed under its own name with its evaluation trials pending. Under
    ``sequential=group``, only the seeds each arm still runs: an arm the looks stopped leaves out the rest
    (:func:`ablate.judge.verdict.sequential_seeds`), which are never pending."""
    arms = [(a["name"], list(plan["seeds"])) for a in plan["arms"]]
    if (plan.get("options") or {}).get("sequential") == "group":
        from ablate.judge.verdict import sequential_seeds  # noqa: PLC0415  # lazy: numpy and scipy for sequential runs only

        most = sequential_seeds(sd, plan)
        return [(n, s[:most[n]]) for n, s in arms]
    if not plan.get("tuning"):
        return arms
    extra: dict[str, list[int]] = {}
    for r in evaluation_rows(sd, plan):
        extra.setdefault(str(r["arm"]), []).append(int(r["seed"]))
    return [(n, s + extra.pop(n, [])) for n, s in arms] + list(extra.items())


def _stopped_by_looks(sd: SweepDir, rows: list[dict[str, object]]) -> str:
    """The line for the trials a ``sequential=group`` design will not run (its looks stopped their arms); empty
    when none, or when the ablation is not sequential."""
    plan = sd.plan()
    if (plan.get("options") or {}).get("sequential") != "group" or plan.get("tuning"):
        return ""
    planned = len(plan["arms"]) * len(plan["seeds"])
    listed = sum(int(r[k]) for r in rows for k in ("pending", "running", "done", "failed", "interrupted"))
    left = planned - listed
    return (f"stopped by the looks: {left} planned trial(s) will not run (sequential=group; verdict.md names each "
            "arm's look and why)") if left else ""


def _has_jobs(sd: SweepDir) -> bool:
    return (sd.root / "slurm" / "jobs.json").exists()


def format_status(sd: SweepDir) -> str:
    """Plain-text status report: counts per arm, then each failed trial's error and log tail."""
    notes: list[str] = []
    rows, failures = status_table(sd, notes)
    width = max(len(str(r["arm"])) for r in rows)
    drawing = sd.drawing_plots()
    locked = sd.is_locked() and not drawing
    in_scheduler = any(r["running"] or r["pending"] for r in rows) and not locked and not any(
        r["interrupted"] for r in rows) and _has_jobs(sd)
    state = "running" if locked else "jobs in the scheduler" if in_scheduler else "not running"
    if drawing:
        notes.append("the verdict's plots are being drawn (`ablate verdict` draws them after the text)")
    elif (sd.root / PLOTS_LOG).exists():
        notes.append(f"the verdict's plots were not drawn: the process drawing them failed, see {sd.root / PLOTS_LOG}")
    lines = [f"{sd.root} ({state})", *notes, f"{'arm':<{width}}  pending  running  done  failed  interrupted"]
    for r in rows:
        lines.append(f"{r['arm']!s:<{width}}  {r['pending']:>7}  {r['running']:>7}  {r['done']:>4}  {r['failed']:>6}"
                     f"  {r['interrupted']:>11}")
    empty = nothing_finished(sd)  # one line, before any verdict can exist
    lines += ["", empty] if empty else []
    gap = [] if empty else [""]
    stopped = _stopped_by_looks(sd, rows)
    lines += [*gap, stopped] if stopped else []
    if any(r["interrupted"] for r in rows) or (state == "not running" and any(r["pending"] for r in rows)):
        lines += [*gap, f"unfinished: `ablate resume {sd.root}` runs what is left"]
    elif state == "jobs in the scheduler":
        lines += [*gap, f"`ablate collect {sd.root}` waits for them and writes the verdict"]
    if failures:
        lines.append("")
        lines.append("failed trials:")
        for f in failures:
            lines.append(f"  {f['arm']} seed={f['seed']} {f['status']}: {failure_line(f['error'])}")
            lines.extend(f"      {e}" for e in log_end(f["error"]))  # the end of its log: where the error is
            log_tail = tail(str(f["log"]), n_lines=5) if f.get("log") and not any(
                h in str(f["error"]) for h in ("log tail", "end of its log")) else ""
            if log_tail:
                lines.append(f"      log {f['log']}, last lines:")
                lines.extend(f"        {e}" for e in log_tail.splitlines())
    return "\n".join(lines)
