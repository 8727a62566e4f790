"""Pure parts of launcher=slurm: sbatch parameters and script (golden), setup lines, array splitting,
option validation. No cluster needed."""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest

from ablate.errors import ConfigError
from ablate.trials.launchers import TrialRef, get_launcher
from ablate.trials.launchers.slurm.launcher import (
    SlurmLauncher,
    _expand_ids,
    mem_string,
    refusal_fix,
    sbatch_parameters,
    setup_lines,
    split_arrays,
)

GOLDEN = Path(__file__).with_name("sbatch_golden.txt")


def _render() -> str:
    from submitit.slurm.slurm import _make_sbatch_string

    setup = setup_lines([0, 1, 2, 0, 1, 2], determinism="strict", cpus_per_task=2,
                        user_setup=["module load cuda/12.1", "echo 'it''s set up'"], hash_seed="0")
    params = sbatch_parameters(job_name="ablate-12-00-00_lr", timeout_min=20, cpus_per_task=2, mem_gb=1.5,
                               gpus_per_trial=1, array_parallelism=4, signal_delay_s=90, setup=setup,
                               partition="gpu", account="lab", qos="normal", constraint="a100",
                               exclude="node1,node2", sbatch={"mail-type": "END", "requeue": True})
    return _make_sbatch_string(command="/venv/bin/python -u -m submitit.core._submit /sweep/slurm/%j",
                               folder="/sweep/slurm/%j", map_count=6, **params)


def test_sbatch_script_matches_golden_record(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    text = _render()
    if not GOLDEN.exists():  # after deleting it on purpose: write the new record
        GOLDEN.write_text(text)
        pytest.fail(f"wrote a new record {GOLDEN}; check it and run again")
    expected = GOLDEN.read_text()
    diff = "\n".join(difflib.unified_diff(expected.splitlines(), text.splitlines(), "record", "now", lineterm=""))
    assert text == expected, f"sbatch script changed; delete {GOLDEN} if this is intended:\n{diff}"


def test_sbatch_parameters_minimal() -> None:
    params = sbatch_parameters(job_name="j", timeout_min=60, cpus_per_task=1, mem_gb=None, gpus_per_trial=0,
                               array_parallelism=64, signal_delay_s=90, setup=[])
    assert params == {"job_name": "j", "time": 60, "cpus_per_task": 1, "array_parallelism": 64,
                      "signal_delay_s": 90, "setup": []}


@pytest.mark.parametrize(("gb", "text"), [(4, "4GB"), (4.0, "4GB"), (1.5, "1536MB"), (0.1, "103MB")])
def test_mem_string(gb: float, text: str) -> None:
    assert mem_string(gb) == text


def test_setup_lines_export_the_ablations_hash_seed() -> None:
    lines = setup_lines([3, 7], determinism="seeded", cpus_per_task=4, user_setup=["source /venv/bin/activate"],
                        hash_seed="3")
    assert lines == [
        "export PYTHONHASHSEED=3",  # one per ablation (seeding.ablation_hash_seed), not one per seed
        "export OMP_NUM_THREADS=${OMP_NUM_THREADS:-4}",
        "export MKL_NUM_THREADS=${MKL_NUM_THREADS:-4}",
        "export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-4}",
        "source /venv/bin/activate",
    ]
    assert not any("PYTHONHASHSEED" in line for line in setup_lines([1], determinism="seeded", cpus_per_task=1))


def test_setup_lines_run_in_bash() -> None:
    import subprocess

    script = "\n".join([*setup_lines([5, 9, 11], determinism=["off", "strict", "strict"], cpus_per_task=1,
                                     hash_seed="5"),
                        "echo $PYTHONHASHSEED ${CUBLAS_WORKSPACE_CONFIG:-unset}"])
    for task, want in (("2", ["5", ":4096:8"]), ("0", ["5", "unset"])):
        out = subprocess.run(["bash", "-c", script], env={"SLURM_ARRAY_TASK_ID": task, "PATH": "/usr/bin:/bin"},
                             capture_output=True, text=True, check=True).stdout.split()
        assert out == want


@pytest.mark.parametrize(("n", "size", "lengths"), [(6, 1001, [6]), (5, 2, [2, 2, 1]), (4, 4, [4]), (0, 3, [])])
def test_split_arrays_respects_max_array_size(n: int, size: int, lengths: list[int]) -> None:
    trials = [TrialRef("control", s) for s in range(n)]
    chunks = split_arrays(trials, size)
    assert [len(c) for c in chunks] == lengths
    assert [t for c in chunks for t in c] == trials


def test_expand_array_ids() -> None:
    assert _expand_ids("12_[0-3%2]") == ["12_0", "12_1", "12_2", "12_3"]
    assert _expand_ids("12_[1,4-5]") == ["12_1", "12_4", "12_5"]
    assert _expand_ids("12_7") == ["12_7"]
    assert _expand_ids("13") == ["13"]


def test_refusal_fix_names_the_option() -> None:
    assert "launcher.partition" in refusal_fix("invalid partition specified: nope", ["debug", "gpu"])
    assert "(debug, gpu)" in refusal_fix("Invalid partition name specified", ["debug", "gpu"])
    assert "launcher.gpus_per_trial" in refusal_fix("Requested node configuration is not available")
    assert "launcher.account" in refusal_fix("Invalid account or account/partition combination specified")


def test_unknown_option_lists_the_valid_ones() -> None:
    with pytest.raises(ConfigError, match=r"unknown option\(s\) gpus for launcher=slurm") as info:
        get_launcher({"name": "slurm", "gpus": 1})
    for valid in ("timeout_min", "mem_gb", "cpus_per_task", "gpus_per_trial", "array_parallelism", "max_requeues"):
        assert valid in str(info.value)


@pytest.mark.parametrize(
    ("opts", "where"),
    [
        pytest.param({"gpus_per_trial": -1}, "launcher.gpus_per_trial", id="negative-gpus"),
        pytest.param({"cpus_per_task": 0}, "launcher.cpus_per_task", id="zero-cpus"),
        pytest.param({"mem_gb": "4G"}, "launcher.mem_gb", id="mem-string"),
        pytest.param({"timeout_min": 0}, "launcher.timeout_min", id="zero-timeout"),
        pytest.param({"setup": "module load x"}, "launcher.setup", id="setup-string"),
        pytest.param({"sbatch": ["--exclusive"]}, "launcher.sbatch", id="sbatch-list"),
        pytest.param({"partition": ""}, "launcher.partition", id="empty-partition"),
        pytest.param({"array_parallelism": True}, "launcher.array_parallelism", id="bool-parallelism"),
    ],
)
def test_bad_option_values_are_refused(opts: dict, where: str) -> None:
    with pytest.raises(ConfigError, match=f"`{where}`"):
        SlurmLauncher(**opts)


def test_options_are_normalised() -> None:
    launcher = SlurmLauncher(timeout_min=0.5, exclude=["n1", "n2"], sbatch={"--mail-type": "END"})
    assert launcher.timeout_min == 1  # whole minutes, rounded up
    assert launcher.exclude == "n1,n2"
    assert launcher.sbatch == {"mail-type": "END"}
    assert launcher.detachable
