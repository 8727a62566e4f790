"""``ablate status DIR``: how far an ablation got, from the sweep dir alone."""

from __future__ import annotations

from collections import Counter

from ablate.results import trial_state
from ablate.sweepdir import SweepDir, load_yaml


def status_table(sd: SweepDir) -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    """Per arm counts (pending, running, done, failed, interrupted) and the failed trials.

    A trial that started (manifest.json) but has no result is ``running`` while an ablate process
    holds the sweep dir's lock, and ``interrupted`` otherwise (its orchestrator died; resume re-runs it).
    """
    plan = load_yaml(sd.plan_file)
    alive = sd.is_locked()  # an orchestrator is working on the dir: started trials are running
    rows, failures = [], []
    for arm in plan["arms"]:
        c: Counter[str] = Counter()
        for seed in plan["seeds"]:
            status, rec = trial_state(sd, arm["name"], seed)
            if status == "running" and not alive:
                status = "interrupted"
            key = "done" if status == "ok" else status if status in ("pending", "running", "interrupted") else "failed"
            c[key] += 1
            if key == "failed":
                failures.append({"arm": arm["name"], "seed": seed, "status": status,
                                 "error": (rec or {}).get("error") or ""})
        rows.append({"arm": arm["name"], "pending": c["pending"], "running": c["running"], "done": c["done"],
                     "failed": c["failed"], "interrupted": c["interrupted"]})
    return rows, failures


def format_status(sd: SweepDir) -> str:
    """Plain-text status report."""
    rows, failures = status_table(sd)
    width = max(len(str(r["arm"])) for r in rows)
    state = "running" if sd.is_locked() else "not running"
    lines = [f"{sd.root} ({state})", f"{'arm':<{width}}  pending  running  done  failed  interrupted"]
    for r in rows:
        lines.append(f"{r['arm']!s:<{width}}  {r['pending']:>7}  {r['running']:>7}  {r['done']:>4}  {r['failed']:>6}"
                     f"  {r['interrupted']:>11}")
    if any(r["interrupted"] for r in rows) or (state == "not running" and any(r["pending"] for r in rows)):
        lines.append(f"unfinished: `ablate resume {sd.root}` runs what is left")
    if failures:
        lines.append("")
        lines.append("failed trials:")
        for f in failures:
            err = str(f["error"]).strip().splitlines()
            lines.append(f"  {f['arm']} seed={f['seed']} {f['status']}: {err[0] if err else ''}")
            lines.extend(f"      {e}" for e in err[1:6])
    return "\n".join(lines)
