"""Warm apps (issue 22.4): under ``launcher=local`` an app trial is a fork of a warm parent that imported the
app once, and the fork calls the app's ``@hydra.main`` function in its own process. Real forks, the test
suite's unedited fixture apps; the per-seed values equal the apps' own logs and a fresh-process run's. The
torch app's warm run (tests/fixtures/lit_app) is checked against a fresh one in
tests/integration/test_app_task.py::test_a_lightning_style_warm_app_imports_once_and_logs_as_a_fresh_run, on
the two runs that module makes of that app anyway (each start of torch is seconds of CPU)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.helpers import ablate_cli
from tests.integration.test_app_task import FIXTURES, PLAIN_TASK, untouched, write

pytestmark = pytest.mark.slow


def _run(project: Path, task: str, variable: str, warm: bool, sweep: str) -> Path:
    """``warm``: launcher=local's warm forks; else ``launcher=inline``, whose app trials are each a fresh
    ``python plain/app.py`` started by the ablate process itself (no `python -m ablate.trials.trial` around it, as
    ``launcher.warm=false`` adds: 1 s of CPU a trial), with the same threads and argv (design-notes.md)."""
    launcher = ("launcher=local", "launcher.max_parallel=2", "launcher.warm=true") if warm else ("launcher=inline",)
    res = ablate_cli(project, "-m", f"task={task}", f"variable={variable}", "seeds=3", *launcher,
                     f"hydra.sweep.dir={sweep}")
    assert res.returncode == 0, res.stderr
    assert "starts a fresh" not in res.stderr, res.stderr  # no fallback was needed
    return project / sweep


def _same_run(argv: list[str]) -> list[str]:
    """An app argv without what differs between two runs by design: the run dir and the frozen ${now:}."""
    return [a for a in argv if not a.startswith(("hydra.run.dir=", "run_id="))]


def _trials(sd: Path) -> dict[tuple[str, int], Path]:
    return {(d.parent.name, int(d.name.split("=")[1])): d for d in sd.glob("trials/*/seed=*")}


def test_a_warm_app_trial_calls_the_apps_main_in_its_fork(project: Path) -> None:
    # plain_app's shape without torch (tests/fixtures/light_app): what is checked is that the fork calls the app's
    # main with the fresh run's overrides and gives its values; a torch app's fork: test_app_task.py
    shutil.copytree(FIXTURES / "light_app", project / "plain", ignore=shutil.ignore_patterns("__pycache__"))
    write(project, "plain", PLAIN_TASK, {"plain_lr": {"key": "lr", "values": [0.2]}})
    warm = _run(project, "plain", "plain_lr", True, "outputs/warm")
    fresh = _run(project, "plain", "plain_lr", False, "outputs/fresh")
    untouched(project, "light_app", (("", "plain"),))
    wt, ft = _trials(warm), _trials(fresh)
    assert set(wt) == set(ft) and len(wt) == 6
    for key, d in wt.items():
        result = json.loads((d / "result.json").read_text())
        manifest = json.loads((d / "manifest.json").read_text())
        command = json.loads((d / "command.json").read_text())
        # the app ran in the trial's own process, a fork of the warm parent: no fresh `python plain/app.py`
        assert command["in_process"] == {"pid": manifest["pid"], "warm_parent": manifest["warm"]["parent"],
                                         "function": "main"}
        assert manifest["warm"]["app"] == {"function": "main", "in_process": True}
        assert command["argv"][1] == "plain/app.py" and f"seed={key[1]}" in command["argv"]
        history = [json.loads(x) for x in (d / "run" / "history.jsonl").read_text().splitlines()]
        assert result["metrics"]["val_acc"] == history[-1]["val_acc"]  # the app's own log
        fresh_result = json.loads((ft[key] / "result.json").read_text())
        assert result["metrics"] == fresh_result["metrics"], key  # equal to a fresh process's, bit for bit
        fresh_command = json.loads((ft[key] / "command.json").read_text())
        assert "in_process" not in fresh_command
        assert _same_run(fresh_command["argv"][2:]) == _same_run(command["argv"][2:])  # the same overrides
    verdict = json.loads((warm / "verdict.json").read_text())
    assert verdict["confounds"]["findings"] == [], verdict["confounds"]


def test_an_app_that_starts_a_thread_at_import_runs_fresh_and_says_why_once(project: Path) -> None:
    # plain_app's shape without torch (tests/fixtures/light_app): the fallback is about the thread, not training
    shutil.copytree(FIXTURES / "light_app", project / "plain", ignore=shutil.ignore_patterns("__pycache__"))
    app = project / "plain" / "app.py"
    app.write_text(app.read_text().replace(
        "import hydra\n", "import threading\nimport time\n\nimport hydra\n\n"
        "threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n", 1))
    write(project, "plain", PLAIN_TASK, {"plain_lr": {"key": "lr", "values": [0.2]}})
    res = ablate_cli(project, "-m", "task=plain", "variable=plain_lr", "seeds=3", "launcher=local",
                     "launcher.max_parallel=2")
    assert res.returncode == 0, res.stderr
    notes = [line for line in res.stderr.splitlines() if "starts a fresh" in line]
    assert len(notes) == 1 and "plain/app.py" in notes[0] and "started 1 thread(s)" in notes[0], res.stderr
    (sd,) = sorted(p.parent for p in project.glob("outputs/ablate/*/*/ablation.yaml"))
    for d in _trials(sd).values():
        assert json.loads((d / "result.json").read_text())["status"] == "ok"
        assert "in_process" not in json.loads((d / "command.json").read_text())
