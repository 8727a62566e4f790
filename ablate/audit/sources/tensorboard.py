"""TensorBoard log dirs: each dir holding event files is a run, read with TensorBoard's own reader
(``EventAccumulator``): its scalars are the metrics, its hparams (the HParams plugin's session records, as
``SummaryWriter.add_hparams`` and Keras' ``hp.KerasCallback`` write them) the config, and the hparams' session
end its status. A hparams record in a subdir of a run (``add_hparams`` with its default ``run_name``) belongs to
that run.

TensorBoard records no commit, library, hardware or data; the commit is inferred from the git history at the
run's first event when the dir is in a git repo (as for Hydra dirs), and marked inferred. A run with no hparams
records no config, so it cannot be put in an arm: it is left out and said (a run writes its hparams when it
ends, so one without is most often a run that did not finish).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ablate.audit.runs import GitHistory, Run
from ablate.audit.sources.base import Selection, progress
from ablate.errors import ConfigError

#: The HParams plugin's name, and its session-end status meaning success (``api_pb2.Status.STATUS_SUCCESS``).
PLUGIN, SUCCESS = "hparams", 1


def _accumulator(d: Path) -> Any:
    try:
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: PLC0415  # lazy: an extra
    except ImportError:
        raise ConfigError(f"{d} holds TensorBoard event files, and reading them needs the `tensorboard` package",
                          where="ablate audit SOURCE", fix="pip install 'hydra-ablate[tensorboard]'") from None
    acc = EventAccumulator(str(d), size_guidance={"scalars": 0, "tensors": 0})
    try:
        acc.Reload()
    except Exception as exc:  # a truncated or corrupt event file
        raise ConfigError(f"{d} holds an event file TensorBoard cannot read ({type(exc).__name__}: {exc})",
                          where="ablate audit SOURCE", fix="restore it, or leave that dir out of the sources") from None
    return acc


def _hparams(acc: Any) -> tuple[dict[str, Any], str | None]:
    """The run's hparams and its session status (``finished`` / ``failed``; None with no session end)."""
    from tensorboard.plugins.hparams import plugin_data_pb2  # noqa: PLC0415  # lazy: with the reader

    config: dict[str, Any] = {}
    status = None
    try:
        contents = list(acc.PluginTagToContent(PLUGIN).values())
    except KeyError:  # no hparams written
        contents = []
    for content in contents:
        data = plugin_data_pb2.HParamsPluginData.FromString(content)
        which = data.WhichOneof("data")
        if which == "session_start_info":
            for k, v in data.session_start_info.hparams.items():
                kind = v.WhichOneof("kind")
                got = getattr(v, kind) if kind else None
                config[k] = int(got) if isinstance(got, float) and got.is_integer() and kind == "number_value" else got
        elif which == "session_end_info":
            status = "finished" if data.session_end_info.status == SUCCESS else "failed"
    return config, status


def _runs(root: Path) -> list[Path]:
    """Dirs holding event files under ``root`` (``root`` included), in path order."""
    return sorted({p.parent for p in root.rglob("events.out.tfevents.*") if p.is_file()})


def read(source: str, left_out: list[str] | None = None, selection: Selection | None = None) -> list[Run]:
    """Every run (dir of event files) under ``source`` with its hparams; those without are named in
    ``left_out``."""
    dirs = _runs(Path(source))
    say = progress(source, "TensorBoard runs")
    git = GitHistory()
    read_: dict[Path, tuple[dict[str, Any], str | None, dict[str, Any], float | None]] = {}
    for i, d in enumerate(dirs, 1):
        acc = _accumulator(d)
        config, status = _hparams(acc)
        metrics = {t: [(int(e.step), float(e.value)) for e in acc.Scalars(t)] for t in acc.Tags().get("scalars", [])}
        try:
            first = float(acc.FirstEventTimestamp())
        except ValueError:
            first = None
        read_[d] = (config, status, {k: v for k, v in metrics.items() if v}, first)
        say(i, len(dirs))
    runs = []
    for d, (config, status, metrics, first) in read_.items():
        if d.parent in read_ and config and not read_[d.parent][0]:  # add_hparams' own subdir: its parent's
            continue
        kids = [c for c in read_ if c.parent == d and read_[c][0] and not config]
        for c in kids[:1]:
            config, status = read_[c][0], read_[c][1]
            metrics = {**read_[c][2], **metrics}
        if not config:
            if left_out is not None:
                left_out.append(f"TensorBoard run {d}: no hparams recorded (TensorBoard records the config only "
                                "there, most often written when the run ends)")
            continue
        if status == "failed":
            if left_out is not None:
                left_out.append(f"TensorBoard run {d}: its hparams session ended as failed")
            continue
        repo = git.toplevel(str(d.absolute()))
        commit = git.commit_at(repo, first) if repo and first else None
        runs.append(Run(source="tensorboard", id=str(d), config=config, metrics=metrics, commit=commit,
                        commit_how="inferred from the git history at the run's first event (TensorBoard records no "
                        "commit)" if commit else "", started=first, repo=repo, status=status))
    return runs
