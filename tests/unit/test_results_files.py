"""Fixed-name files beside the verdict, read by DVC: per_seed.csv."""

from __future__ import annotations

import math
from pathlib import Path


def test_per_seed_csv_has_one_row_per_seed_and_blank_failures(tmp_path: Path) -> None:
    from ablate.record.results import write_per_seed
    from ablate.record.sweepdir import SweepDir

    sd = SweepDir(tmp_path)
    plan = {"metric": "acc", "seeds": [0, 1], "arms": [{"name": "control"}, {"name": "lr=0.1"}]}
    rows = [{"arm": "control", "seed": 0, "status": "ok", "acc": 0.5},
            {"arm": "control", "seed": 1, "status": "failed"},
            {"arm": "lr=0.1", "seed": 0, "status": "ok", "acc": math.nan},
            {"arm": "lr=0.1", "seed": 1, "status": "ok", "acc": 0.75}]
    write_per_seed(sd, plan, rows)
    assert sd.per_seed_file.read_text() == "seed,control,lr=0.1\n0,0.5,\n1,,0.75\n"
