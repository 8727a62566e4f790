"""A tuned ablation's two launch rounds: the tuning trials, then, once they ended, each arm's evaluation trials at
the setting its tuning chose (recorded in ``tuning.json`` before any evaluation trial runs).

The sweep dir is the only state: a resume launches what is left of the tuning round, makes the choice when it
ended, and keeps a choice already recorded (the evaluation trials that ran used it).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator, Mapping
from typing import Any

from ablate.judge.tuning import select
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
        write_json(sd.tuning_file, {"chosen": chosen, "chosen_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                                    "means": {b: s["means"] for b, s in selection.items()}})
        _log("ablate: tuning chose " + ", ".join(f"{b}: {a}" for b, a in chosen.items())
             + f"; evaluating each on seeds {_seeds(tuning['eval_seeds'])}")
    else:
        chosen = dict(recorded["chosen"])
    yield list(tuning["eval_seeds"]), [chosen[b] for b in tuning["base_arms"] if b in chosen]


def _seeds(seeds: list[int]) -> str:
    return f"{seeds[0]}..{seeds[-1]}" if len(seeds) > 2 else ", ".join(map(str, seeds))
