"""Hydra run and multirun dirs: ``.hydra/config.yaml`` (the composed config), ``overrides.yaml``, ``hydra.yaml``.

Hydra records the config, the command-line overrides, its own version and the working dir; not the code
commit, the data, the libraries or the hardware. The metrics are what the app wrote into its run dir, read
with the readers ablate uses for its own trials (Lightning CSV, TensorBoard, ``*.json`` / ``*.jsonl``). When
the working dir is a git repo, the commit is inferred from its history at the run's start (the time Hydra
wrote ``config.yaml``) and marked inferred: uncommitted edits or a checkout of another branch are invisible.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ablate.audit.arms import CHOICE
from ablate.audit.runs import Run, flatten, git_out, git_toplevel
from ablate.errors import ConfigError


def run_dirs(root: Path) -> list[Path]:
    """The run dirs under ``root`` (``root`` itself for a single run), in path order."""
    if (root / ".hydra" / "config.yaml").is_file():
        return [root]
    return sorted(p.parent.parent for p in root.glob("**/.hydra/config.yaml"))


def _load(path: Path) -> Any:
    from omegaconf import OmegaConf

    try:
        return OmegaConf.to_container(OmegaConf.load(path), resolve=False)
    except Exception as exc:  # a truncated or hand-edited file
        raise ConfigError(f"{path} is not readable YAML ({type(exc).__name__}: {exc})", where="ablate audit SOURCE",
                          fix="restore the file, or leave that run dir out of the sources") from None


def _resolved(path: Path, flat: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """``flat`` with each interpolation resolved where OmegaConf can (``${hydra:...}`` cannot, outside the
    run: kept as written), and the interpolations as written."""
    from omegaconf import OmegaConf

    texts = {k: v for k, v in flat.items() if isinstance(v, str) and "${" in v}
    if not texts:
        return flat, {}
    cfg = OmegaConf.load(path)
    out = dict(flat)
    for k in texts:
        try:
            out[k] = OmegaConf.select(cfg, k, throw_on_missing=True)
        except Exception:  # a resolver only the app or Hydra registers
            continue
    return out, texts


def _metrics(run_dir: Path) -> dict[str, list[tuple[int | None, float]]]:
    from ablate.metrics import read_csv, read_json, read_tensorboard

    for reader in (read_csv, read_tensorboard, read_json):
        found, _ = reader(run_dir)
        if found:
            return found
    return {}


def _inferred_commit(repo: str, started: float) -> str | None:
    out = git_out(repo, "rev-list", "-1", f"--before=@{int(started)}", "HEAD")
    return out.strip() or None if out else None


def read(source: str, left_out: list[str] | None = None) -> list[Run]:
    """Every run dir under ``source`` as a :class:`Run`."""
    runs = []
    for d in run_dirs(Path(source)):
        cfg = _load(d / ".hydra" / "config.yaml")
        hydra = (_load(d / ".hydra" / "hydra.yaml") or {}).get("hydra", {}) if (d / ".hydra" / "hydra.yaml").is_file() \
            else {}
        runtime = hydra.get("runtime") or {}
        started = (d / ".hydra" / "config.yaml").stat().st_mtime
        context: dict[str, Any] = {}
        if runtime.get("version"):
            context["hydra"] = str(runtime["version"])  # Hydra's own version: no other library's
        choices = runtime.get("choices") or {}
        config, interpolations = _resolved(d / ".hydra" / "config.yaml", flatten(cfg or {}))
        config.update({f"{CHOICE}{k}": v for k, v in choices.items() if not str(k).startswith("hydra/")})
        repo = git_toplevel(runtime.get("cwd"))
        job = (hydra.get("job") or {}).get("name")
        if job and runtime.get("cwd") and (Path(runtime["cwd"]) / f"{job}.py").is_file():
            context["program"] = str(Path(runtime["cwd"]) / f"{job}.py")
        commit = _inferred_commit(repo, started) if repo else None
        runs.append(Run(source="hydra", id=str(d), config=config, metrics=_metrics(d), commit=commit,
                        commit_how="inferred from the git history at the run's start (Hydra records no commit)"
                        if commit else "", context=context, started=started, repo=repo,
                        interpolations=interpolations))
    return runs
