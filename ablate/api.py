"""The Python API; the CLI is a thin layer over it (``ablate -m ...`` composes, then calls :func:`run_composed`).

::

    import ablate

    verdict = ablate.run("conf", variable="lr", seeds=10, launcher="local", overrides={"task.epochs": 5})
    verdict.words                  # {"lr=0.005": "worse", "lr=0.2": "inconclusive", "lr=0.1": "better (indicative)"}
    df = ablate.load(verdict)      # one row per trial: arm, value, seed, status, ..., duration_s, metrics

See docs/api.md for a notebook walk-through. ``import ablate`` loads this module on first use of a public name, and
this module loads the pipeline (Hydra, OmegaConf, numpy ...) inside the functions that run it.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ablate.plan.compose import Composed

if TYPE_CHECKING:
    import pandas as pd


class Verdict(dict):  # type: ignore[type-arg]
    """The verdict of an ablation: the content of ``verdict.json`` plus ``sweep_dir``.

    It is a ``dict`` (``verdict["comparisons"]``, ``json.dumps(verdict)`` work as on the file's
    content) with a few read-only conveniences. In a notebook it displays as ``verdict.md``.

    Attributes
    ----------
    sweep_dir : Path
        The ablation's sweep dir (every record of the ablation is there).
    words : dict
        Treatment arm name -> verdict word as verdict.md's bottom line says it: ``better``, ``worse``,
        ``better (indicative)``, ``worse (indicative)``, ``equivalent``, ``inconclusive``, ``insufficient data``.
        An indicative better/worse (below 20 seeds per arm unless p x 10 clears the level, and below 8 on a
        continuous metric whatever p) is a lead to confirm, not a result, so its word says so; the plain word is
        ``verdict["comparisons"][i]["verdict"]``.
    firm : dict
        Treatment arm name -> verdict.json's ``firm``: True (a firm better/worse), False (indicative), None (the
        other verdicts). ``verdict.words[arm] == "better"`` holds only for a firm better.
    invalid : bool
        True when the whole ablation is invalid (confounded, or too many failed trials).

    Its repr is the metric, its direction and the sweep dir, then verdict.md's bottom line in plain text
    (:meth:`bottom_line`): per treatment one sentence, then the Next line.
    curves : dict or None
        The curve verdicts (``curve.enabled=true``): verdict.json's ``curves``; ``curve_words`` gives each
        treatment's as one sentence.
    markdown : str
        The text of ``verdict.md``.
    """

    @classmethod
    def open(cls, sweep_dir: str | os.PathLike[str]) -> Verdict:
        """Read the verdict of an existing sweep dir (``ablate verdict DIR`` rewrites it).

        Raises
        ------
        SweepDirError
            When ``sweep_dir`` is not an ablate sweep dir or has no verdict yet.
        """
        from ablate.errors import SweepDirError
        from ablate.record.sweepdir import SweepDir, read_json

        sd = SweepDir.open(sweep_dir)
        if not sd.verdict_json.is_file():
            raise SweepDirError(f"{sd.root} has no verdict.json yet", where="DIR",
                                fix=f"finish the ablation (`ablate resume {sd.root}`) or write it (`ablate verdict "
                                f"{sd.root}`)")
        return cls(read_json(sd.verdict_json), sweep_dir=str(sd.root))

    @property
    def sweep_dir(self) -> Path:
        return Path(self["sweep_dir"])

    @property
    def words(self) -> dict[str, str]:
        from ablate.stats.core import verdict_label

        return {str(c.get("arm")): verdict_label(c.get("verdict"), c.get("firm"))
                for c in self.get("comparisons") or []}

    @property
    def firm(self) -> dict[str, bool | None]:
        return {str(c.get("arm")): c.get("firm") for c in self.get("comparisons") or []}

    @property
    def curves(self) -> dict[str, Any] | None:
        """verdict.json's ``curves`` (``curve.enabled=true``): per treatment, where along the x-axis it is better,
        worse or indistinguishable, with the simultaneous band and the summaries; None without curves."""
        return self.get("curves")

    @property
    def curve_words(self) -> dict[str, str]:
        """Treatment arm -> the curve verdict as one sentence ("better from step 10 to 170; indistinguishable
        after"); empty without curves."""
        return {str(c["arm"]): str(c.get("sentence") or c.get("insufficient"))
                for c in (self.get("curves") or {}).get("comparisons") or []}

    @property
    def invalid(self) -> bool:
        return bool(self.get("invalid"))

    @property
    def markdown(self) -> str:
        from ablate.record.sweepdir import VERDICT_MD

        return (self.sweep_dir / VERDICT_MD).read_text(encoding="utf-8")

    def results(self) -> pd.DataFrame:
        """The trials as a tidy DataFrame (see :func:`ablate.load`)."""
        from ablate.record.results import load

        return load(self.sweep_dir)

    def _repr_markdown_(self) -> str:  # Jupyter
        try:
            return self.markdown
        except OSError:
            return f"`{self!r}`"

    def bottom_line(self) -> list[str]:
        """verdict.md's bottom line in plain text: per treatment its sentence, then the Next line (the same words,
        from verdict.json's ``bottom_line``; computed for a verdict written before it was recorded)."""
        bl = self.get("bottom_line")
        if not isinstance(bl, Mapping) or not bl.get("treatments"):
            from ablate.judge.bottom_line import bottom_line  # lazy: numpy (ablate.stats), only for old verdicts

            bl = bottom_line(self).to_json()
        return [*(str(t["sentence"]) for t in bl["treatments"]), str(bl["next"]["line"])]

    def __repr__(self) -> str:
        from ablate.judge.bottom_line import direction  # lazy: numpy (ablate.stats), only when a verdict is shown

        state = "INVALID ABLATION; " if self.invalid else ""
        lines = self.bottom_line() if self.get("comparisons") else ["no comparisons"]
        body = "".join(f"\n  {line}" for line in lines)
        return f"Verdict({self.get('metric')}, {direction(self.get('goal'))}; {state}{self.get('sweep_dir')}{body})"


def run_composed(composed: Composed, *, cwd: str | os.PathLike[str] | None = None,
                 plots_later: bool = False, command: Mapping[str, Any] | None = None
                 ) -> Verdict | dict[str, Any] | None:
    """Run the ablation described by an already composed config; returns the verdict (None for dry
    runs; ``{"sweep_dir": ..., "submitted": True}`` for ``wait=false``). ``plots_later`` (``ablate -m``):
    return with the verdict's text, its PNGs drawn after it by a detached process
    (:func:`ablate.orchestrate.pipeline.execute`); by default they are drawn before returning. ``command``: the
    command line it came from (:func:`ablate.plan.overrides.command_record`), recorded in the plan so the verdict's
    "Next:" line can give the command that runs it again."""
    from ablate.orchestrate.pipeline import start

    sd = start(composed.cfg, sweep_dir=composed.sweep_dir, variable_name=composed.variable_name,
               available_variables=composed.variables, compose=composed.compose, cwd=cwd,
               config_dirs=composed.config_dirs, choices=composed.choices, plots_later=plots_later, command=command)
    return _verdict_of(sd)


def _verdict_of(sd: Any) -> Verdict | dict[str, Any] | None:
    """The verdict of a sweep dir just run: None for a dry run (no sweep dir), the submitted dir for ``wait=false``."""
    if sd is None:
        return None
    root = Path(sd.root).absolute()  # valid from any working dir (ablate.run from a subdirectory restores it)
    if not sd.verdict_json.exists():  # wait=false: submitted, collected later with `ablate collect`
        return {"sweep_dir": str(root), "submitted": True}
    return Verdict.open(root)


def _override(key: str, value: Any) -> str:
    """Render ``key=value`` in Hydra override syntax, quoting strings safely."""
    from ablate.plan.overrides import format_override

    return format_override(key, value)


def run(config_dir: str | os.PathLike[str] | None = None, *, variable: str | Sequence[str] | None = None,
        values: Sequence[Any] | None = None, seeds: int | Sequence[int] | None = None,
        launcher: str | None = None, overrides: Sequence[str] | Mapping[str, Any] = (),
        sweep_dir: str | os.PathLike[str] | None = None, **settings: Any) -> Verdict | dict[str, Any] | None:
    """Run an ablation and return its verdict; the Python form of ``ablate -m variable=... seeds=...``.

    It runs in the project directory, the one holding ``config_dir`` (the git work tree whose commit is pinned;
    ``task.data`` and ``task.fn`` modules are relative to it), as the CLI with ``--config-path`` does: called
    from a subdirectory (``ablate.run("../conf")`` in ``notebooks/``), it changes there for the call, says so,
    and changes back. It blocks until every trial has finished
    (unless ``wait=False``) and raises nothing for failing trials: they are in the verdict.

    Parameters
    ----------
    config_dir : path-like, optional
        The project's config dir (with ``task/`` and ``variable/``); default ``./conf`` when it exists.
    variable : str or list of str, optional
        The ``conf/variable/<name>.yaml`` to ablate; a list runs a suite (one ablation per variable against
        one shared control, like ``ablate -m variable=lr,dropout``).
    values : sequence, optional
        Treatment values, replacing the variable file's ``values``.
    seeds : int or sequence of int, optional
        Seeds per arm (``10`` means 0..9; 1..10 for ``command``/``app`` tasks) or the seed list.
    launcher : {"local", "inline", "slurm"}, optional
        Where trials run (default ``local``: a process per trial). ``inline`` runs them in this
        process, one after another (breakpoints work).
    overrides : sequence of str or mapping, optional
        Further config overrides: ``["task.epochs=5"]`` in Hydra syntax, or ``{"task.epochs": 5}``
        (values are quoted for you). For an ``app`` task, ``app.``-prefixed keys are the app's own
        overrides (``{"app.trainer.max_epochs": 1}``, ``["app.model=mnist_wide"]``).
    sweep_dir : path-like, optional
        Where to write the sweep dir (default ``outputs/ablate/<date>/<time>_<variable>``).
    **settings
        Any top-level ablate setting: ``alpha=0.01``, ``determinism="strict"``, ``timeout_min=30``,
        ``tracker="mlflow"``, ``dry_run=True`` ... (see ``ablate --help``).

    Returns
    -------
    Verdict or dict or None
        The verdict (a dict of verdict.json plus ``sweep_dir``; see :class:`Verdict`), None when
        ``dry_run=True``, or ``{"sweep_dir": ..., "submitted": True}`` when ``wait=False``
        (``launcher="slurm"``: collect it later with ``ablate collect DIR``).

    Raises
    ------
    UserError
        For invalid input (a bad key, value or option; a dirty git tree; untracked data): nothing
        is launched. Its message names the setting and the fix.
    AblationFailed
        When ``on_failure="abort"`` stopped the ablation.

    Examples
    --------
    >>> verdict = ablate.run("conf", variable="lr", values=[0.1, 0.01], seeds=5, launcher="inline",
    ...                      overrides={"task.epochs": 1})                       # doctest: +SKIP
    >>> verdict.words                                                            # doctest: +SKIP
    {'lr=0.1': 'inconclusive', 'lr=0.01': 'worse'}
    """
    from ablate.plan.compose import compose
    from ablate.plan.project import default_config_path

    ovs: list[str] = []
    suite = list(variable) if isinstance(variable, list | tuple) else None
    if variable is not None and suite is None:
        ovs.append(f"variable={variable}")
    if values is not None and (isinstance(values, str | bytes) or not isinstance(values, Sequence)):
        from ablate.errors import ConfigError

        raise ConfigError(f"must be a list of treatment values, got {values!r}", where="values",
                          fix=f"e.g. ablate.run(..., values=[{values!r}])")
    if values is not None:
        ovs.append(_override("variable.values", list(values)))
    if seeds is not None:
        ovs.append(_override("seeds", list(seeds) if not isinstance(seeds, int) else seeds))
    if launcher is not None:
        ovs.append(f"launcher={launcher}")
    for k, v in settings.items():
        ovs.append(_override(k, v))
    if isinstance(overrides, Mapping):
        ovs.extend(_override(str(k), v) for k, v in overrides.items())
    elif isinstance(overrides, str):
        ovs.append(overrides)
    else:
        ovs.extend(overrides)
    if sweep_dir is not None:
        ovs.append(_override("hydra.sweep.dir", str(Path(sweep_dir).absolute())))
    cfg_path = str(config_dir) if config_dir is not None else default_config_path()
    from ablate.plan.overrides import command_record
    from ablate.plan.project import project_of
    from ablate.trials.tasks.interface import split_cli, with_cli_overrides

    typed = [*([f"variable={','.join(str(n) for n in suite)}"] if suite is not None else []), *ovs]
    ovs, app_ovs = split_cli(ovs)
    root = project_of(cfg_path)
    if root is not None:  # a config dir elsewhere (from notebooks/: "../conf"): run in its project, as the CLI does
        cfg_path = os.path.abspath(cfg_path)  # type: ignore[arg-type]
        print(f"ablate: running in {root}, the project of config_dir {config_dir} (its paths are relative to it; "
              "this process's working dir is restored after)", file=sys.stderr)
    with contextlib.chdir(root) if root is not None else contextlib.nullcontext():
        # the CLI line this call equals, recorded in the plan: verdict.md's "Next:" command
        command = command_record(typed, config_path=cfg_path, via="api")
        if suite is not None:  # a suite: one ablation per variable, one shared control
            from ablate.orchestrate.suite import run_suite

            return _verdict_of(run_suite([str(n) for n in suite], ovs, config_path=cfg_path, app_overrides=app_ovs,
                                         command=command))
        composed = compose(ovs, config_path=cfg_path)
        return run_composed(with_cli_overrides(composed, app_ovs), command=command)
