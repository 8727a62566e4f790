"""An ``fn`` task's metric: its return value first, then what it logged (ablate.trials.tasks.fn.metrics_of), and
its printed output reaching the trial's logs where fds 1 and 2 go elsewhere (ablate.trials.tasks.capture)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ablate.errors import ConfigError
from ablate.record.sweepdir import TrialPaths
from ablate.trials.tasks.contract import TaskOutput
from ablate.trials.tasks.fn import fn_settings, metrics_of


def trial(tmp_path: Path) -> tuple[TrialPaths, Path]:
    tp = TrialPaths(tmp_path / "t")
    run = tp.dir / "run"
    run.mkdir(parents=True)
    return tp, run


def test_a_return_value_holding_the_metric_is_used_as_it_is(tmp_path: Path) -> None:
    tp, run = trial(tmp_path)
    (run / "metrics.csv").write_text("step,val_loss\n1,0.5\n")
    value = {"val_loss": 0.25, "ok": True}
    assert metrics_of(value, "val_loss", fn_settings({}), run, tp, (0, 0)) is value
    # metric_source names another source: that one is read, and the rest of the return value is kept
    out = metrics_of(value, "val_loss", fn_settings({"metric_source": "csv"}), run, tp, (0, 0))
    assert isinstance(out, TaskOutput) and out.metrics == {"val_loss": 0.5, "ok": True}
    assert out.source["kind"] == "csv" and out.source["match"] == "row with step 1: val_loss = 0.5"


def test_none_read_from_the_run_dir_and_printed_lines_only_when_declared(tmp_path: Path) -> None:
    tp, run = trial(tmp_path)
    tp.stdout.write_text("old run: val loss 9.0\nval loss 0.75\nval_loss: 0.5\n")
    start = len("old run: val loss 9.0\n")
    with pytest.raises(ConfigError) as exc:  # a `key: value` line is not read unless lines are declared
        metrics_of(None, "val_loss", fn_settings({}), run, tp, (start, 0))
    assert "the function returned None" in str(exc.value) and "metric_pattern" in str(exc.value)
    s = fn_settings({"metric_pattern": r"val loss (?P<val_loss>[0-9.]+)"})
    out = metrics_of(None, "val_loss", s, run, tp, (start, 0))
    assert out.metrics == {"val_loss": 0.75}  # this run's lines only: the earlier run's 9.0 is not read
    assert out.source["match"] == "line 1: val loss 0.75" and out.source["kind"] == "stdout"


def test_a_mapping_without_the_metric_anywhere_fails_its_trial_alone(tmp_path: Path) -> None:
    tp, run = trial(tmp_path)
    value = {"train_loss": 1.0}
    assert metrics_of(value, "val_loss", fn_settings({}), run, tp, (0, 0)) is value  # the trial names what it got


@pytest.mark.parametrize(("task", "where"), [({"metric_source": "file"}, "task.metric_source"),
                                             ({"reduce": "mean"}, "task.reduce"),
                                             ({"metric_pattern": "val (.*)"}, "task.metric_pattern")])
def test_bad_settings_refused(task: dict, where: str) -> None:
    with pytest.raises(ConfigError) as exc:
        fn_settings(task)
    assert exc.value.where == where


CHILD = textwrap.dedent('''
    import os, subprocess, sys
    from pathlib import Path
    from ablate.trials.tasks.capture import trial_output

    d = Path(sys.argv[1])
    print("before", flush=True)
    with trial_output(d / "stdout.log", d / "stderr.log") as cap:
        print("py line")
        os.write(1, b"fd line\\n")
        subprocess.run([sys.executable, "-c", "import sys; print('child err', file=sys.stderr)"], check=True)
    print("after", cap.stdout_start, cap.teed, flush=True)
''')


def test_output_is_teed_into_the_trial_logs_and_still_shown(tmp_path: Path) -> None:
    (tmp_path / "stdout.log").write_text("earlier\n")
    res = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path)], capture_output=True, text=True, timeout=60,
                         check=True)
    assert (tmp_path / "stdout.log").read_text() == "earlier\npy line\nfd line\n"
    assert (tmp_path / "stderr.log").read_text() == "child err\n"
    assert res.stdout == "before\npy line\nfd line\nafter 8 ['stdout', 'stderr']\n"  # the terminal still sees it
    assert res.stderr == "child err\n"


def test_a_log_that_is_already_the_fd_is_not_teed(tmp_path: Path) -> None:
    with open(tmp_path / "stdout.log", "ab") as out, open(tmp_path / "stderr.log", "ab") as err:
        subprocess.run([sys.executable, "-c", CHILD, str(tmp_path)], stdout=out, stderr=err, timeout=60, check=True)
    assert (tmp_path / "stdout.log").read_text() == "before\npy line\nfd line\nafter 7 []\n"


@pytest.mark.parametrize("pattern, line, expected", [
    (r"val_mse (?P<val_mse>[0-9.]+)", "val_mse 1.1e-06", ("1.1", "1.1e-06")),  # the docs' old pattern
    (r"loss=(?P<loss>\d+)", "loss=12.5", ("12", "12.5")),
    (r"acc (?P<acc>\d)", "acc 0.97 | lr 0.1", ("0", "0.97")),
])
def test_a_group_that_takes_part_of_a_number_is_refused(pattern: str, line: str, expected: tuple[str, str]) -> None:
    from ablate.errors import ConfigError
    from ablate.metrics import compile_patterns, read_lines

    with pytest.raises(ConfigError) as err:
        read_lines(["epoch 1", line], compile_patterns(pattern))
    took, whole = expected
    assert err.value.where == "task.metric_pattern"
    assert f"took {took!r} of the number {whole!r} in printed line 2 ({line!r})" in str(err.value)


@pytest.mark.parametrize("pattern, line, value", [
    (r"val_mse (?P<val_mse>[-+0-9.eE]+)", "val_mse 1.1e-06", 1.1e-06),
    (r"loss=(?P<loss>[0-9.]+)", "loss=12.5, lr=0.1", 12.5),
    (r"acc (?P<acc>[0-9.]+)%", "acc 97%", 97.0),
    (r"step (?P<step>\d+): loss (?P<loss>[-+0-9.eE]+)", "step 3: loss -2.5E+01", -25.0),
])
def test_a_group_that_takes_the_whole_number_reads_it(pattern: str, line: str, value: float) -> None:
    from ablate.metrics import compile_patterns, read_lines

    found, _ = read_lines([line], compile_patterns(pattern))
    (name,) = [k for k in found]
    assert found[name][-1][1] == value
