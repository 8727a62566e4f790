"""Printed ``key: value`` pairs inside a line are read (issue 35, item 6), as people print them: anywhere in the line,
the last occurrence of a name per line; a group of the user's pattern that takes part of a number is still refused."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from ablate.errors import ConfigError
from ablate.metrics import collect, read_lines, read_stdout
from ablate.metrics.lines import line_pairs


@pytest.mark.parametrize(("line", "want"), [
    ("epoch 2 val_acc: 0.80", {"val_acc": 0.80}),  # the report's own line
    ("step 10 | loss=0.3 acc: 0.9", {"loss": 0.3, "acc": 0.9}),
    ("val_acc: 0.5", {"val_acc": 0.5}),  # a whole line, as before
    ("loss=0.3 acc=0.5 loss=0.25", {"loss": 0.25, "acc": 0.5}),  # the last occurrence per name
    # Lightning's progress bar, a printed dict (Trainer-style), a log line with its level and logger
    ("Epoch 0: 100%|##########| 20/20 [00:00<00:00, 80.0it/s, v_num=0, train_loss=0.412, val_acc=0.875]",
     {"v_num": 0.0, "train_loss": 0.412, "val_acc": 0.875}),
    ("{'loss': 0.3012, 'learning_rate': 5e-05, 'epoch': 1.0}", {"loss": 0.3012, "learning_rate": 5e-05, "epoch": 1.0}),
    ('{"eval_accuracy": 0.91, "eval_loss": 0.27}', {"eval_accuracy": 0.91, "eval_loss": 0.27}),
    ("INFO:root:val/acc=0.75;val/loss=0.61", {"val/acc": 0.75, "val/loss": 0.61}),
    ("train-loss: -1.5e-3, grad_norm = inf", {"train-loss": -0.0015, "grad_norm": math.inf}),
    # no pair: a time, a percentage, a unit, a number taken in part, a URL's port, a plain sentence
    ("12:30:45 epoch 3 done", {}),
    ("acc: 95%", {}),
    ("elapsed: 3.2s", {}),
    ("version: 0.9.1", {}),
    ("connecting to http://host:8080/", {}),
    ("no metrics here", {}),
])
def test_pairs_anywhere_in_a_line(line: str, want: dict[str, float]) -> None:
    assert line_pairs(line) == want


def test_a_metric_printed_inside_lines_is_read_with_its_line_and_step(tmp_path: Path) -> None:
    lines = ["starting", "epoch 1 val_acc: 0.70 val_loss: 0.9", "step 10 | loss=0.3 acc: 0.9",
             "epoch 2 val_acc: 0.80 val_loss: 0.7", "done: best val_acc: 0.80"]
    found, where = read_lines(lines)
    assert found["val_acc"] == [(2, 0.70), (4, 0.80), (5, 0.80)] and found["loss"] == [(3, 0.3)]
    assert where["val_loss"] == ["line 2: epoch 1 val_acc: 0.70 val_loss: 0.9", "line 4: epoch 2 val_acc: 0.80 "
                                 "val_loss: 0.7"]
    metrics, rec = collect(tmp_path, lines, "val_loss", reduce="min")
    assert metrics["val_loss"] == 0.7 and rec["kind"] == "stdout" and rec["step"] == 4
    assert rec["match"] == "line 4: epoch 2 val_acc: 0.80 val_loss: 0.7"
    assert read_stdout(["lr=1e-3 (warmup)"]) == {"lr": [(1, 1e-3)]}


def test_a_pattern_group_that_takes_part_of_a_number_is_still_refused() -> None:
    with pytest.raises(ConfigError, match=re.escape("took '1.1' of the number '1.1e-06'")):
        read_lines(["epoch 2 val_loss 1.1e-06"], [re.compile(r"val_loss (?P<val_loss>[0-9.]+)")])
