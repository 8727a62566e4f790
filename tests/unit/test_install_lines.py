"""Every `pip install` the docs and ablate's own messages show installs this project (issue 23).

The name `ablate` on the package index belongs to an unrelated project, so `pip install 'ablate[x]'` run
anywhere but inside a clone's venv installs someone else's code. This project's distribution is
`hydra-ablate`; the docs install it from a clone (`pip install -e '.[tensorboard]'`) or by that name.
"""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DISTRIBUTION = "hydra-ablate"
#: Requirements other than this project that the docs may install (the CPU torch build first, and uv, which then
#: installs this project from the clone).
OTHERS = {"torch", "uv", "dvc", "mlflow", "wandb", "tensorboard"}
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
SOURCES = [*sorted((REPO / "ablate").rglob("*.py")), *sorted((REPO / "ablate" / "conf").rglob("*.yaml"))]


def install_commands(text: str) -> list[str]:
    """Each `pip install ...` command in ``text``, cut at the end of its shell command, markdown code
    span, docstring literal or line."""
    found = []
    for m in re.finditer(r"pip install\b", text):
        rest = text[m.end():].split("\n", 1)[0]
        rest = re.split(r"&&|;|\|\||\||`|#|\"|,\s|\s\(|\)", rest, maxsplit=1)[0]
        found.append("pip install" + rest.rstrip())
    return found


def requirement_names(command: str) -> list[str]:
    """The project names (or local paths) a `pip install` command installs, options left out."""
    words = shlex.split(command)[2:]
    out = []
    skip_next = False
    for w in words:
        if skip_next:
            skip_next = False
            continue
        if w in ("-r", "-c", "--index-url", "-i", "--extra-index-url", "-f", "--find-links"):
            skip_next = True
            continue
        if w.startswith("-") and w not in ("-e", "--editable"):
            continue
        if w in ("-e", "--editable") or w.startswith("{"):  # an option, or a placeholder in a message
            continue
        out.append(w)
    return out


def is_this_project(req: str) -> bool:
    base = req.split("[", 1)[0]
    if base.startswith((".", "/", "~")) or base == "":  # a local path: a clone of this project
        return True
    name = re.split(r"[<>=!~ ;@]", base, maxsplit=1)[0]
    return re.sub(r"[-_.]+", "-", name).lower() == DISTRIBUTION


def name_of(req: str) -> str:
    base = req.split("[", 1)[0]
    return re.sub(r"[-_.]+", "-", re.split(r"[<>=!~ ;@]", base, maxsplit=1)[0]).lower()


def test_the_distribution_is_named_hydra_ablate_and_keeps_the_ablate_command() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["name"] == DISTRIBUTION
    assert project["scripts"] == {"ablate": "ablate.cli.main:main"}


def test_the_parser_reads_the_forms_the_docs_use() -> None:
    text = ("    python3 -m venv .venv && pip install torch==2.13.0 && pip install -e '.[examples,dev]' && dvc repro\n"
            "extras: `pip install 'ablate[mlflow]'` / x\n")
    commands = install_commands(text)
    assert commands == ["pip install torch==2.13.0", "pip install -e '.[examples,dev]'",
                        "pip install 'ablate[mlflow]'"]
    assert [requirement_names(c) for c in commands] == [["torch==2.13.0"], [".[examples,dev]"], ["ablate[mlflow]"]]
    assert not is_this_project("ablate[mlflow]") and is_this_project("hydra-ablate[wandb]")
    assert is_this_project("/path/to/ablate[tensorboard]") and is_this_project(".")


@pytest.mark.parametrize("path", DOCS + SOURCES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_install_line_names_this_project(path: Path) -> None:
    text = path.read_text()
    for command in install_commands(text):
        reqs = requirement_names(command)
        assert reqs or "{" in command, f"{path.name}: {command!r} installs nothing"  # {library}: a message's
        for req in reqs:
            assert is_this_project(req) or name_of(req) in OTHERS, (
                f"{path.relative_to(REPO)}: {command!r} installs {req!r}, not this project "
                f"(`ablate` on the index is another project; use `pip install -e '.[...]'` or '{DISTRIBUTION}[...]')")


def test_the_docs_install_this_project_somewhere() -> None:
    """README's quick start installs from the clone, and README names the distribution for other projects."""
    readme = (REPO / "README.md").read_text()
    reqs = [r for c in install_commands(readme) for r in requirement_names(c)]
    assert any(r.startswith(".[") for r in reqs)
    assert any(name_of(r) == DISTRIBUTION for r in reqs)
    every = [r for p in DOCS for c in install_commands(p.read_text()) for r in requirement_names(c)]
    assert len(every) >= 8
    assert not [r for r in every if name_of(r) == "ablate" and not is_this_project(r)]
