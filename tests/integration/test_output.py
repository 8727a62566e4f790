"""What ablate prints and documents (issue 17, item 8): one final progress summary after retried failures,
and the per-trial table of docs/api.md matches ``ablate.load``."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.helpers import REPO, ablate_cli, ablate_in, clean_env, commit_all, copy_project

pytestmark = pytest.mark.slow

TASK = '''
import os
from pathlib import Path


def train(cfg):
    # the sweep dir outlives an attempt (each attempt's working dir is its own): <sweep>/trials/<arm>/seed=<n>
    marker = Path(os.environ["ABLATE_TRIAL_DIR"]).parents[2] / f"failed-{cfg.task.lr}-{cfg.seed}"
    if cfg.task.flaky and not marker.exists():  # every trial of a flaky arm fails once, then succeeds
        marker.write_text("x")
        raise RuntimeError("flaky: first attempt fails")
    return {"val_acc": 0.5 + cfg.seed * 0.01, "val_loss": 1.0 - cfg.seed * 0.01}
'''


def _add_flaky_task(project: Path) -> Path:
    (project / "flaky.py").write_text(TASK)
    (project / "conf" / "task" / "flaky.yaml").write_text(
        "fn: flaky:train\nmetric: val_acc\ngoal: maximize\nlr: 0.05\nflaky: false\n")
    (project / "conf" / "variable" / "flr.yaml").write_text("key: task.flaky\nvalues: [true]\n")
    with open(project / ".gitignore", "a") as fh:
        fh.write("failed-*\n")
    commit_all(project, "flaky task")
    return project


def _retried(project: Path, seeds: int, *, console: bool = False) -> subprocess.CompletedProcess[str]:
    """The flaky ablation, through the console script when ``console``, else ablate's CLI entry in this process."""
    return (ablate_cli if console else ablate_in)(project, "-m", "variable=flr", "task=flaky", f"seeds={seeds}",
                                                  "launcher=inline", "on_failure=retry", "max_retries=1")


@pytest.fixture
def out_project(project: Path) -> Path:
    return _add_flaky_task(project)


@pytest.fixture(scope="module")
def retried_3(project_template: Path, tmp_path_factory: pytest.TempPathFactory
              ) -> tuple[subprocess.CompletedProcess[str], Path]:
    """The flaky ablation at 3 seeds with ``on_failure=retry``, run once per module through the console script:
    read by both tests (neither changes its sweep dir)."""
    proj = _add_flaky_task(copy_project(project_template, tmp_path_factory.mktemp("retried") / "proj"))
    with pytest.MonkeyPatch.context() as mp:
        clean_env(mp)
        return _retried(proj, 3, console=True), proj


@pytest.mark.parametrize("seeds", [3, 4])
def test_summary_printed_once_after_retried_failures(request: pytest.FixtureRequest, seeds: int) -> None:
    if seeds == 3:
        res, _ = request.getfixturevalue("retried_3")
    else:
        res = _retried(request.getfixturevalue("out_project"), seeds)
    assert res.returncode == 0, res.stderr
    total = 2 * seeds
    summaries = [ln for ln in res.stderr.splitlines() if re.match(r"ablate: \d+/\d+ trials", ln)]
    assert len(summaries) == 1, res.stderr  # was: one `N/N trials (k failed)` line after every retried trial
    assert summaries[0].startswith(f"ablate: {total}/{total} trials, ") and "failed" not in summaries[0]
    counters = [int(m.group(1)) for m in re.finditer(r"^\[(\d+)/\d+\]", res.stderr, re.M)]
    # first pass: control's seeds done, the flaky arm's failed; retries: done climbs back to total
    assert counters[-1] == total and max(counters) == total
    assert len(counters) == total + seeds


def test_api_doc_table_matches_load(retried_3: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    import ablate

    res, made = retried_3
    assert res.returncode == 0, res.stderr
    (sd,) = [p.parent for p in made.glob("outputs/ablate/*/*/ablation.yaml")]
    df = ablate.load(sd)
    doc = (REPO / "docs" / "api.md").read_text()
    header = re.search(r"^#\s+(arm\s+value\s+seed.*)$", doc, re.M)
    assert header is not None
    doc_columns = header.group(1).split()  # the digits example's: its throughput metrics too (test_api checks all)
    assert doc_columns[:7] == list(df.columns[:7]) and set(df.columns[7:]) <= set(doc_columns[7:])
    row0 = re.search(r"^# 0\s+(.*)$", doc, re.M).group(1).split()
    assert row0[0] == "control" and float(row0[1]) == 0.05  # the doc's control value, as a number
    assert list(df["arm"]) == ["control"] * 3 + ["flaky=true"] * 3
    assert [bool(v) for v in df["value"]] == [False] * 3 + [True] * 3  # the variable's value, not a label
