"""Every `ablate` command the docs show runs on the example, or is named below as not runnable here (issue 23).

The command lines of every shell block of README.md and docs/*.md (fenced, or indented by four spaces) are
extracted; each is checked one way:

- ``ablate -m ...`` on the digits example: run as a dry run (``dry_run=true`` added; ablate's CLI entry in this
  process, :func:`tests.helpers.ablate_in`), which composes the config, validates every setting and override,
  proves the arms and checks the task, data and tree, and launches nothing (a transfer check has no dry run:
  its first scale is dry-run instead);
- ``ablate status|verdict|resume|collect|repro|track DIR ...``: run for real on one small ablation of the
  example (``DIR`` and ``outputs/ablate/<date>/<time>_lr`` stand for its sweep dir);
- ``ablate -m task=train ...`` (docs/howto.md's existing Hydra app): dry-run the same way in a project holding
  the test suite's Lightning-style app (tests/fixtures/lit_app, the layout the how-to shows) and the how-to's
  own ``conf/task/train.yaml`` and ``conf/variable/*.yaml`` blocks, as written;
- commands for the reader's own project (``task=my_task``: files this repository does not have) and synopsis
  lines (``[--trial ARM/SEED]``): listed in :data:`NOT_RUN`, so a new command in the docs is run or
  consciously listed.

A doc whose command drifts from the code (a renamed setting, a removed option) fails here.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from tests.helpers import ablate_cli, ablate_in, add_pure_task

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
SUBCOMMANDS = ("status", "verdict", "resume", "collect", "repro", "track", "audit")
#: Run on the audit fixture's runs by tests/integration/test_audit.py, not on a sweep dir.
ON_RUNS = ("audit",)
#: Commands that are not run here, and why (the docs' own words for the reader's project).
NOT_RUN = {
    "ablate -m variable=lr seeds=10 task=my_task": "the reader's own task (conf/task/my_task.yaml)",
    "ablate repro DIR [--trial ARM/SEED] [--strong]": "a synopsis; `ablate repro DIR --trial control/1` runs",
    "ablate -m variable=warmup seeds=10 curve.enabled=true": "the reader's own variable (the example has no warmup)",
}
#: Exit codes other than 0 that a command must give here, and the message that must explain it.
EXPECTED_FAIL = {
    "ablate track DIR": (2, "the ablation was run without a tracker and none was given"),
}


def doc_commands() -> list[tuple[str, int, str]]:
    """(file, line, command) for every `ablate` command line of a shell block, comments and prompts removed,
    backslash continuations joined."""
    out = []
    for path in DOCS:
        fence: str | None = None
        pending = ""
        start = 0
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if line.startswith("```"):
                fence = None if fence is not None else line[3:].strip()
                continue
            in_shell = fence in ("", "bash", "sh", "shell", "console") if fence is not None else \
                line.startswith("    ") and not line.startswith("     ")
            if pending:
                pending += " " + line.strip().rstrip("\\")
                if not line.rstrip().endswith("\\"):
                    out.append((path.name, start, pending))
                    pending = ""
                continue
            if not in_shell:
                continue
            text = line.strip().removeprefix("$ ")
            while re.match(r"[A-Z_][A-Z0-9_]*=\S* ", text):  # `WANDB_MODE=offline ablate ...`: the env is the doc's
                text = text.split(" ", 1)[1].lstrip()
            words = text.split()
            if len(words) < 2 or words[0] != "ablate" or not (words[1].startswith("-") or words[1] in SUBCOMMANDS
                                                              or "=" in words[1]):
                continue  # a layout line (`ablate/  the package`) or an output line (`ablate repro: ...`)
            if text.endswith("\\"):
                pending, start = text.rstrip("\\"), i
                continue
            out.append((path.name, i, text))
    return [(f, i, " ".join(shlex.split(c, comments=True))) for f, i, c in out]


COMMANDS = doc_commands()


def test_the_docs_show_commands_of_every_kind() -> None:
    cmds = {c for _, _, c in COMMANDS}
    assert len(cmds) >= 25
    assert set(NOT_RUN) | set(EXPECTED_FAIL) <= cmds  # no stale entry
    assert {c.split()[1] for c in cmds if c.split()[1] in SUBCOMMANDS} == set(SUBCOMMANDS)


def test_every_ablation_command_of_the_docs_passes_a_dry_run(project: Path) -> None:
    checked, failures = [], []
    for name, line, cmd in COMMANDS:
        argv = shlex.split(cmd)[1:]
        if cmd in NOT_RUN or argv[0] != "-m" or APP_TASK in argv or cmd in [c for _, _, c in checked]:
            continue
        failures += dry_run(project, name, line, cmd)
        checked.append((name, line, cmd))
    assert not failures, "\n".join(failures)
    assert len(checked) >= 15
    assert not (project / "outputs").exists()


#: The task of docs/howto.md's existing Hydra app; its commands are dry-run in :func:`app_project`.
APP_TASK = "task=train"


def dry_run(project: Path, name: str, line: int, cmd: str) -> list[str]:
    """Dry-run one ``ablate -m`` command of the docs; a failure line, or none."""
    argv = shlex.split(cmd)[1:]
    scale = {a.split("=", 1)[0]: a.split("=", 1)[1] for a in argv if a.startswith("scale.")}
    if scale:  # a transfer check has no dry run: dry-run its first scale (an app's key with the app. prefix)
        first = scale["scale.values"].strip("[]").split(",")[0]
        prefix = "app." if APP_TASK in argv else ""
        argv = [a for a in argv if not a.startswith("scale.")] + [f"{prefix}{scale['scale.key']}={first}"]
    res = ablate_in(project, *argv, "dry_run=true")  # ablate's CLI entry, in this process
    if res.returncode != 0 or "dry run: nothing launched" not in res.stdout:
        return [f"{name}:{line}: {cmd}\n  exit {res.returncode}: {res.stderr.strip()[-400:]}"]
    return []


def howto_app_files() -> dict[str, str]:
    """``conf/...yaml`` path -> text of each YAML block of docs/howto.md's app section (first line names it)."""
    text = (REPO / "docs" / "howto.md").read_text()
    section = text[text.index("## Ablate your existing Hydra project"):]
    section = section[:section.index("\n## ", 1)]
    return {m.group(1): m.group(0) for m in re.finditer(r"^# (conf/\S+\.yaml)\b[^\n]*\n(?:(?!```).*\n)*",
                                                         section, flags=re.MULTILINE)}


@pytest.fixture
def app_project(project: Path) -> Path:
    """The test project plus tests/fixtures/lit_app (src/, configs/) and the how-to's app config blocks."""
    import shutil

    from tests.helpers import commit_all

    for part in ("src", "configs"):
        shutil.copytree(REPO / "tests" / "fixtures" / "lit_app" / part, project / part,
                        ignore=shutil.ignore_patterns("__pycache__"))
    files = howto_app_files()
    assert set(files) == {"conf/task/train.yaml", "conf/variable/lr.yaml", "conf/variable/model.yaml"}, files
    for path, body in files.items():
        (project / path).write_text(body)
    commit_all(project, "the how-to's app")
    return project


def test_every_app_command_of_the_howto_passes_a_dry_run(app_project: Path) -> None:
    cmds = sorted({(n, i, c) for n, i, c in COMMANDS if APP_TASK in shlex.split(c) and c.split()[1] == "-m"},
                  key=lambda x: x[1])
    assert {n for n, _, _ in cmds} == {"howto.md"} and len(cmds) >= 5, cmds
    assert any("variable=lr,model" in c for _, _, c in cmds) and any("scale.key=" in c for _, _, c in cmds)
    failures = [f for n, i, c in cmds for f in dry_run(app_project, n, i, c)]
    assert not failures, "\n".join(failures)
    assert not (app_project / "outputs").exists()


def test_every_sweep_dir_command_of_the_docs_runs_on_a_real_sweep_dir(project: Path) -> None:
    add_pure_task(project)  # the commands are under test, not training: `resume` and `repro` re-run no torch
    res = ablate_in(project, "-m", "variable=lr", "task=pure", "seeds=3", "launcher=inline", "task.epochs=1",
                    "hydra.sweep.dir=outputs/docs")
    assert res.returncode == 0, res.stderr
    sd = str(project / "outputs" / "docs")
    done, failures = set(), []
    for name, line, cmd in COMMANDS:
        argv = shlex.split(cmd)[1:]
        if cmd in NOT_RUN or argv[0] not in SUBCOMMANDS or argv[0] in ON_RUNS or cmd in done:
            continue
        done.add(cmd)
        argv = [sd if a == "DIR" or a.startswith("outputs/ablate/<") else a for a in argv]
        # the console script for the commands that start trials (resume, repro), ablate's CLI entry in this
        # process for the others (status, verdict, collect, track of a finished sweep dir)
        res = (ablate_cli if argv[0] in ("resume", "repro") else ablate_in)(project, *argv)
        want_rc, want_msg = EXPECTED_FAIL.get(cmd, (0, ""))
        if res.returncode != want_rc or want_msg not in res.stderr or "Traceback" in res.stderr:
            failures.append(f"{name}:{line}: {cmd}\n  exit {res.returncode}: {res.stderr.strip()[-400:]}")
    assert not failures, "\n".join(failures)
    assert {c.split()[1] for c in done} == set(SUBCOMMANDS) - set(ON_RUNS)
    assert (project / "outputs" / "docs" / "verdict.md").is_file()


def _howto_dvc_block() -> list[str]:
    """The command lines of docs/howto.md's "The data under DVC, in a new project" block, as written."""
    lines = (REPO / "docs" / "howto.md").read_text().splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("The data under DVC, in a new project"))
    block = []
    for ln in lines[start + 1:]:
        if ln.startswith("    "):
            block.append(ln.strip())
        elif block:
            break
    return [b for b in block if b]


def test_howto_dvc_steps_run_as_written_in_a_new_project(tmp_path: Path) -> None:
    """The how-to's DVC steps, run line by line in a fresh directory holding data/ and conf/, leave a git
    tree ablate pins as clean (no uncommitted tracked change), with the data tracked by DVC."""
    import os
    import subprocess
    import sys

    from ablate.pin.pins import pin_code

    block = _howto_dvc_block()
    assert block[0].startswith("git init && dvc init") and len(block) == 4
    proj = tmp_path / "myproj"
    (proj / "data").mkdir(parents=True)
    (proj / "data" / "train.npz").write_bytes(b"\x00" * 1024)
    (proj / "conf").mkdir()
    (proj / "conf" / "ablate.yaml").write_text("defaults:\n  - ablate_base\n  - _self_\n")
    (proj / "my_project").mkdir()
    (proj / "my_project" / "train.py").write_text("def main(cfg):\n    return {'val_acc': 0.5}\n")
    env = {**os.environ, "DVC_NO_ANALYTICS": "1", "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    for line in block:
        res = subprocess.run(["bash", "-c", line], cwd=proj, env=env, capture_output=True, text=True, timeout=300)
        assert res.returncode == 0, f"{line}\n{res.stdout}\n{res.stderr}"
    assert subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=proj, capture_output=True,
                          text=True, check=True).stdout == ""
    assert (proj / "data.dvc").is_file() and "/data" in (proj / ".gitignore").read_text()
    tracked = subprocess.run(["git", "ls-files"], cwd=proj, capture_output=True, text=True, check=True).stdout.split()
    assert "my_project/train.py" in tracked and "conf/ablate.yaml" in tracked and "data/train.npz" not in tracked
    code = pin_code(proj, allow_dirty=False)
    assert code["dirty"] is False


def _benchmark_commands() -> list[tuple[str, str]]:
    """(doc, command) for every ``python benchmarks/NAME.py [--flags]`` a doc shows, in a block or inline."""
    out = []
    for path in DOCS:
        for m in re.finditer(r"python (benchmarks/\w+\.py(?: [^`\n#]*)?)", path.read_text()):
            out.append((path.name, m.group(1).strip()))
    return out


def test_every_benchmark_command_of_the_docs_names_a_script_and_flags_it_takes() -> None:
    """The benchmarks take minutes to an hour, so the docs test does not run them: each one a doc names exists,
    starts (``--help``, exit 0), and takes every ``--flag`` the doc gives it."""
    import subprocess
    import sys

    cmds = _benchmark_commands()
    assert len(cmds) >= 12
    helps: dict[str, str] = {}
    for doc, cmd in cmds:
        script, *args = shlex.split(cmd)
        assert (REPO / script).is_file(), f"{doc}: {script} does not exist"
        if script not in helps and not helps:  # the first as a command, with its own interpreter ...
            res = subprocess.run([sys.executable, script, "--help"], cwd=REPO, capture_output=True, text=True,
                                 timeout=300)
            assert res.returncode == 0, f"{doc}: {script} --help: {res.stderr[-400:]}"
            helps[script] = res.stdout
        elif script not in helps:  # ... the others run as `__main__` in this process (31 interpreters and their
            helps[script] = _help_in_process(doc, script)  # numpy/scipy imports were 5.6 s of CPU)
        for flag in (a for a in args if a.startswith("--")):
            assert flag in helps[script], f"{doc}: {script} does not take {flag}"


def _help_in_process(doc: str, script: str) -> str:
    """``python SCRIPT --help`` (``script`` relative to the repository) run as ``__main__`` in this process, as
    the interpreter would run it (its folder first on ``sys.path``, ``sys.argv``), with the warnings filters of a
    plain interpreter; the output of its help, exit 0 asserted. ``sys.path``, ``sys.argv``, the working dir and the
    modules it imported from this repository (``_common``, ``tests.unit...``) are restored after."""
    import contextlib
    import io
    import runpy
    import sys
    import warnings

    out = io.StringIO()
    path, argv, modules = list(sys.path), list(sys.argv), set(sys.modules)
    try:
        sys.path.insert(0, str((REPO / script).parent))
        sys.argv = [script, "--help"]
        with contextlib.chdir(REPO), contextlib.redirect_stdout(out), warnings.catch_warnings():
            warnings.resetwarnings()
            try:
                runpy.run_path(str(REPO / script), run_name="__main__")
            except SystemExit as exc:
                assert exc.code in (0, None), f"{doc}: {script} --help: exit {exc.code}"
    finally:
        sys.path[:], sys.argv[:] = path, argv
        for name in set(sys.modules) - modules:  # the installation's (numpy: once per process) stay
            file = str(getattr(sys.modules[name], "__file__", "") or "")
            if file.startswith(str(REPO)) and not file.startswith(sys.prefix):
                del sys.modules[name]
    return out.getvalue()
