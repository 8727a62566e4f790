"""A tuned ablation's two launch rounds: the tuning trials, then, once they ended, each arm's evaluation trials at
the setting its tuning chose (recorded in ``tuning.json`` before any evaluation trial runs, with each arm's own
choice and, where the arms are judged at one common setting, which arms and why: :func:`ablate.stats.choose`).

The sweep dir is the only state: a resume launches what is left of the tuning round, makes the choice when it
ended, and keeps a choice already recorded (the evaluation trials that ran used it).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator, Mapping
from typing import Any

from ablate.errors import SweepDirError
from ablate.judge.tuning import common_reason, select
from ablate.record.results import collect
from ablate.record.sweepdir import SweepDir, write_json


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def tuning_rounds(sd: SweepDir, plan: Mapping[str, Any]) -> Iterator[tuple[list[int], list[str] | None]]:
    """Yield the launch rounds of a tuned ablation: (tuning seeds, every tuned arm), then (evaluation seeds, the
    chosen arms), the second decided from the sweep dir once the first has run (none when a choice cannot be
    made: the verdict says why)."""
    tuning = plan["tuning"]
    yield list(tuning["seeds"]), None
    recorded = sd.read_tuning()
    if recorded is None:
        selection = select(plan, collect(sd, dict(plan)))
        missing = {b: s["why"] for b, s in selection.items() if s["arm"] is None}
        if missing:
            _log("ablate: no evaluation trial runs: " + "; ".join(f"{b}: {w}" for b, w in missing.items())
                 + f" (`ablate status {sd.root}` shows the tuning trials; `ablate resume {sd.root} --resubmit` re-runs "
                 "stopped ones)")
            return
        chosen = {b: str(s["arm"]) for b, s in selection.items()}
        common = [b for b, s in selection.items() if s["common"]]
        rec: dict[str, Any] = {"chosen": chosen, "chosen_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                               "own": {b: s["own_arm"] for b, s in selection.items()},
                               "means": {b: s["means"] for b, s in selection.items()}}
        if common:
            rec["common"] = {"arms": common, "setting_index": selection[common[0]]["index"],
                             "reason": common_reason(len(tuning["seeds"]))}
        write_json(sd.tuning_file, rec)
        _log("ablate: tuning chose " + ", ".join(f"{b}: {a}" for b, a in chosen.items())
             + (f" ({', '.join(common)} at one common setting: their tuning data do not show them preferring "
                "different settings)" if common else "")
             + f"; evaluating each on seeds {_seeds(tuning['eval_seeds'])}")
    else:
        chosen = _recorded_choice(sd, plan, recorded)
    yield list(tuning["eval_seeds"]), [chosen[b] for b in tuning["base_arms"] if b in chosen]


def _recorded_choice(sd: SweepDir, plan: Mapping[str, Any], recorded: Mapping[str, Any]) -> dict[str, str]:
    """The choice ``tuning.json`` records (its shape checked by :meth:`SweepDir.read_tuning`), each a tuned arm of
    its own base arm in the plan: the file is a record (data), so a name the plan does not hold is refused in one
    line, never launched."""
    chosen = dict(recorded["chosen"])
    tuned = {b: {str(a["name"]) for a in plan["arms"] if a.get("base") == b} for b in plan["tuning"]["base_arms"]}
    bad = [f"{b}: {c!r}" for b, c in chosen.items() if c not in tuned.get(b, set())]
    if bad:
        raise SweepDirError(f"records a choice the plan's tuned arms do not hold ({'; '.join(bad)})",
                            where=str(sd.tuning_file),
                            fix=f"delete it and run `ablate resume {sd.root}`: the choice is made again from the "
                                "tuning trials")
    return chosen


def _seeds(seeds: list[int]) -> str:
    return f"{seeds[0]}..{seeds[-1]}" if len(seeds) > 2 else ", ".join(map(str, seeds))
