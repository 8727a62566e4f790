"""Issue 35, item 16: a SLURM job time limit no longer than the warning signal's delay (1 min against the default
90 s) was accepted, then every trial was "stopped at its time limit after 16 s". It is refused at planning, in one
line naming both fixes, each of which SLURM then accepts (``sbatch --test-only`` on the real cluster)."""

from __future__ import annotations

import pytest

from ablate.errors import ConfigError
from ablate.trials.launchers import get_launcher

pytestmark = pytest.mark.slurm


@pytest.mark.parametrize(("launcher", "plan_timeout", "fixes"), [
    ({"timeout_min": 1}, None, ["launcher.timeout_min=4", "launcher.signal_delay_s=15"]),
    ({"timeout_min": 1, "signal_delay_s": 60}, None, ["launcher.timeout_min=2", "launcher.signal_delay_s=15"]),
    ({}, 1, ["launcher.timeout_min=4", "launcher.signal_delay_s=15"]),  # the ablation's timeout_min sets the jobs'
    ({"timeout_min": 2, "signal_delay_s": 300}, None, ["launcher.timeout_min=10", "launcher.signal_delay_s=30"]),
])
def test_a_time_limit_within_the_signal_delay_is_refused_and_both_fixes_are_accepted(
        launcher: dict, plan_timeout: int | None, fixes: list[str]) -> None:
    options = {"timeout_min": plan_timeout}
    with pytest.raises(ConfigError) as err:
        get_launcher({"name": "slurm", **launcher}).check(options)
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith("`launcher.timeout_min`: the job time limit")
    assert "would be told to checkpoint and requeue as soon as it starts" in msg
    for fix in fixes:
        assert f"`{fix}`" in msg
        key, value = fix.removeprefix("launcher.").split("=")
        get_launcher({"name": "slurm", **launcher, key: int(value)}).check(options)  # SLURM accepts it


def test_a_limit_longer_than_the_delay_is_accepted() -> None:
    get_launcher({"name": "slurm", "timeout_min": 2}).check({})
