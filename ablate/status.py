"""``ablate status DIR``: how far an ablation got, from the sweep dir alone."""

from __future__ import annotations

from collections import Counter

from ablate.results import trial_state
from ablate.sweepdir import SweepDir, load_yaml


def status_table(sd: SweepDir) -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    """Per arm counts (pending, running, done, failed) and the failed trials (arm, seed, status, error)."""
    plan = load_yaml(sd.plan_file)
    rows, failures = [], []
    for arm in plan["arms"]:
        c: Counter[str] = Counter()
        for seed in plan["seeds"]:
            status, rec = trial_state(sd, arm["name"], seed)
            key = "done" if status == "ok" else status if status in ("pending", "running") else "failed"
            c[key] += 1
            if key == "failed":
                failures.append({"arm": arm["name"], "seed": seed, "status": status,
                                 "error": (rec or {}).get("error") or ""})
        rows.append({"arm": arm["name"], "pending": c["pending"], "running": c["running"], "done": c["done"],
                     "failed": c["failed"]})
    return rows, failures


def format_status(sd: SweepDir) -> str:
    """Plain-text status report."""
    rows, failures = status_table(sd)
    width = max(len(str(r["arm"])) for r in rows)
    lines = [f"{sd.root}", f"{'arm':<{width}}  pending  running  done  failed"]
    for r in rows:
        lines.append(f"{r['arm']!s:<{width}}  {r['pending']:>7}  {r['running']:>7}  {r['done']:>4}  {r['failed']:>6}")
    if failures:
        lines.append("")
        lines.append("failed trials:")
        for f in failures:
            err = str(f["error"]).strip().splitlines()
            lines.append(f"  {f['arm']} seed={f['seed']} {f['status']}: {err[0] if err else ''}")
            lines.extend(f"      {e}" for e in err[1:6])
    return "\n".join(lines)
