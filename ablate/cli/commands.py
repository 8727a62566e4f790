"""Subcommands that act on an existing sweep dir: ``status``, ``verdict``, ``resume``, ``collect``, ``extend``,
``repro``, ``track``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from datetime import datetime

from ablate.errors import ConfigError, SweepDirError
from ablate.record.results import nothing_finished, without_result
from ablate.record.sweepdir import SweepDir


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise ConfigError(message, where=self.prog, fix=f"see `{self.prog} --help`")


def dispatch(name: str, argv: Sequence[str]) -> int:
    """Run subcommand ``name`` with its arguments; returns the exit code."""
    return {"status": cmd_status, "verdict": cmd_verdict, "resume": cmd_resume, "collect": cmd_resume,
            "repro": cmd_repro, "track": cmd_track, "audit": cmd_audit, "extend": cmd_extend}[name](list(argv), name)


def cmd_verdict(argv: list[str], name: str = "verdict") -> int:
    """``ablate verdict DIR [--alpha A] [--margin M|none] [--multiplicity holm|dunnett|bh|none] [--pairing P]
    [--family suite|variable] [--against OTHER_DIR] [--curve [KEY=VALUE ...] | --curve off] [--no-plots |
    --wait-plots] [--recompute] [--reset]``: recompute verdict.json and verdict.md from the trial records (trials
    are never touched; ``--curve`` compares curves after the run, :mod:`ablate.judge.curves_recorded`).

    The command returns once the text is written; the PNG plots are drawn after it by a detached process
    holding the sweep dir's lock (:func:`ablate.judge.verdict.draw_plots_in_background`), or before returning
    with ``--wait-plots``. When nothing the verdict depends on changed since it was written (trial
    records, plan, options, config files, ablate; :mod:`ablate.record.verdict_key`), it is kept as it is
    and its path printed, without recomputing (``--recompute`` forces it)."""
    args = _verdict_parser(name).parse_args(argv)
    if args.curve is not None:
        args.curve = curve_settings(args.curve)
    from ablate.orchestrate.transfer import is_transfer_dir

    if is_transfer_dir(args.dir):  # a transfer check: every scale's verdict, then the transfer report
        return _verdict_of_transfer(args, name)
    sd = SweepDir.open(args.dir)
    _require_a_result(sd, name)
    if args.against is not None:
        try:  # checked before anything is written; the error names the option, not this command's DIR
            args.against = str(SweepDir.open(args.against).root.absolute())
        except SweepDirError as exc:
            raise SweepDirError(exc.what, where="--against", fix=exc.fix) from None
    overrides = {k: v for k, v in vars(args).items()
                 if k not in ("dir", "wait_plots", "recompute") and v is not None}
    if not sd.try_acquire(clean=False):  # an ablation is running here: its final verdict must not be overwritten
        return _verdict_while_running(sd, overrides, name)
    try:
        verdict = _verdict_written_or_reused(sd, overrides, args)
    finally:
        sd.release()
    kept = [o for o in verdict.get("non_default_options") or [] if o["source"] == "remembered"]
    if kept:
        print("note: options remembered from an earlier `ablate verdict` still apply: "
              + ", ".join(f"{o['option']}={o['value']}" for o in kept)
              + f" (clear them with `ablate verdict {args.dir} --reset`)", file=sys.stderr)
    print(sd.verdict_md)
    return 0


def _verdict_parser(name: str) -> _Parser:
    """The argument parser of ``ablate verdict`` (its options: :func:`cmd_verdict`)."""
    p = _Parser(prog=f"ablate {name}",
                description="Recompute verdict.json and verdict.md from a sweep dir's trial records (no trial is "
                "run). Options given here replace the ablation's own and are remembered in "
                "verdict_options.json, so a later `ablate resume` keeps them.")
    p.add_argument("dir", metavar="DIR", help="the ablation's sweep dir")
    p.add_argument("--alpha", type=float, help="family-wise significance level over all treatments (e.g. 0.01)")
    p.add_argument("--margin", help="smallest effect of interest: metric units (0.01) or %% of the control mean "
                   "(2%%); turns on the `equivalent` verdict; `none` clears it")
    p.add_argument("--multiplicity", choices=["holm", "dunnett", "bh", "none"],
                   help="correction for testing several treatments (default holm)")
    p.add_argument("--pairing", choices=["auto", "paired", "unpaired"],
                   help="auto pairs trials by seed when the design shares randomness across arms (a fn task "
                        "under determinism=seeded|strict), else Welch; paired declares it")
    p.add_argument("--family", choices=["suite", "variable"],
                   help="a suite's multiplicity family: suite (all treatments, default) or variable (one per variable)")
    p.add_argument("--against", metavar="OTHER_DIR",
                   help="a target run's sweep dir: say in the verdict what differs from it (data, code, config)")
    p.add_argument("--curve", nargs="*", metavar="KEY=VALUE",
                   help="compare curves too (curve verdicts), after the run: each trial's series read from its "
                   "curve.json, else from what it left (ablate.log_step values, its metric's CSV/TensorBoard/JSONL "
                   "log or printed lines); settings as in the config (x=epoch summary=auc threshold=0.9 ...); "
                   "`--curve off` turns it off")
    p.add_argument("--no-plots", dest="plots", action="store_false", default=None,
                   help="skip the PNG plots (saves the matplotlib import and rendering)")
    p.add_argument("--wait-plots", action="store_true",
                   help="draw the PNG plots before returning (default: drawn after the text by a background "
                   "process that holds the sweep dir until done; other ablate commands on it wait for it)")
    p.add_argument("--recompute", action="store_true",
                   help="compute the verdict again even when nothing it depends on changed (by default an "
                   "unchanged verdict is reused, not recomputed: same trial records, plan, options, config files and "
                   "ablate)")
    p.add_argument("--reset", action="store_true", default=None,
                   help="forget the options remembered from earlier `ablate verdict` calls (back to the "
                   "ablation's own); `--margin none` clears only the margin")
    return p


def _verdict_of_transfer(args: argparse.Namespace, name: str) -> int:
    """``ablate verdict`` on a transfer check's dir: every scale's verdict, then the transfer report; returns 0.

    Raises :class:`SweepDirError` when no scale has a finished trial, :class:`ConfigError` for ``--against``."""
    from pathlib import Path

    from ablate.orchestrate.transfer import TRANSFER_MD, scale_dirs, write_transfer

    scales = [SweepDir.open(child) for child in scale_dirs(args.dir)]
    if all(nothing_finished(child) for child in scales):
        left = sum(without_result(child)[1] for child in scales)
        raise SweepDirError(f"no trial has finished yet: {left} pending in the {len(scales)} scales of "
                            f"{args.dir}, so there is no verdict to compute", where=f"ablate {name}",
                            fix=f"run them with `ablate resume` on each scale's sweep dir "
                            f"(`ablate status {args.dir}` lists them)")

    if args.against is not None:
        raise ConfigError("--against compares one sweep dir, not a transfer check", where="--against",
                          fix=f"give one scale's sweep dir, e.g. `ablate verdict {args.dir}/<scale> --against ...`")
    write_transfer(args.dir, {k: v for k, v in vars(args).items()  # plots drawn in-process, never reused
                              if k not in ("dir", "wait_plots", "recompute") and v is not None})
    print(Path(args.dir) / TRANSFER_MD)
    return 0


def _verdict_written_or_reused(sd: SweepDir, overrides: dict, args: argparse.Namespace) -> dict:
    """The verdict of ``sd`` (lock held by the caller): the one on disk when nothing it depends on changed, else
    written again; the plots drawn now or handed to a detached process. Returns the verdict's JSON dict."""
    from ablate.judge.verdict import reuse_call, write_verdict
    from ablate.record.results import write_results
    from ablate.record.verdict_key import TrialDigest, reusable

    later = False
    plan = sd.plan()
    if not args.recompute and args.against is None and reusable(sd, plan, reuse_call(plan, overrides)):
        from ablate.record.sweepdir import read_json  # unchanged inputs: the verdict on disk is this one

        verdict = read_json(sd.verdict_json)
    else:
        later = overrides.get("plots") is not False and not args.wait_plots
        digest = TrialDigest()
        verdict = write_verdict(sd, overrides, rows=write_results(sd, digest=digest), plots_later=later,
                                digest=digest)
    if later:
        from ablate.judge.verdict import draw_plots_in_background

        draw_plots_in_background(sd)  # the child holds the lock from here, and cleans the debris
    else:
        sd.clean_debris()  # temp files of writers that died (what try_acquire does by default)
    return verdict


def curve_settings(words: Sequence[str]) -> dict[str, object] | bool:
    """``--curve`` as a verdict override: the ``KEY=VALUE`` settings (values read as YAML scalars, as Hydra reads
    an override's), ``{}`` for the defaults, or False for ``off``.

    Raises
    ------
    ConfigError
        A word that is not ``KEY=VALUE`` (or ``off`` alone).
    """
    import yaml

    if [w.strip().lower() for w in words] in (["off"], ["none"], ["false"]):
        return False
    out: dict[str, object] = {}
    for w in words:
        key, eq, value = w.partition("=")
        key = key.strip().removeprefix("curve.")
        if not eq or not key:
            raise ConfigError(f"{w!r} is not a curve setting KEY=VALUE", where="--curve",
                              fix="e.g. `--curve x=epoch summary=auc`, `--curve` for the defaults, or `--curve off`")
        try:
            out[key] = yaml.safe_load(value) if value.strip() else None
        except yaml.YAMLError:
            out[key] = value
    return out


def _require_a_result(sd: SweepDir, name: str) -> None:
    """Refuse a verdict on a sweep dir where no trial has a result yet: one line naming how many are pending,
    and what to run (exit 2): there is no number to compute a verdict from."""
    empty = nothing_finished(sd)
    if empty is None:
        return
    running = sd.is_locked() and not sd.drawing_plots()
    fix = (f"wait for the running ablation (`ablate status {sd.root}` shows its progress), then run `ablate {name}` "
           "again" if running else f"run them with `ablate resume {sd.root}`, which writes the verdict")
    raise SweepDirError(f"{empty} in {sd.root}, so there is no verdict to compute", where=f"ablate {name}", fix=fix)


def _verdict_while_running(sd: SweepDir, overrides: dict[str, object], name: str) -> int:
    """``ablate verdict DIR`` while another process holds the sweep dir: print the verdict so far, write
    nothing (a late write would replace the running ablation's final verdict with a stale one)."""
    from ablate.judge.options import VERDICT_OVERRIDES
    from ablate.judge.report import render_markdown
    from ablate.judge.verdict import write_verdict
    from ablate.record.sweepdir import PLOTS_LOG, PLOTS_WAIT_S

    holder = sd.lock_holder()
    if sd.drawing_plots():  # waited PLOTS_WAIT_S for an earlier verdict's plot drawer, which still holds it
        import re

        pid = (re.match(r"pid (\d+)", holder) or [None, "PID"])[1]
        waited = f"{PLOTS_WAIT_S / 60:.0f} minutes" if PLOTS_WAIT_S >= 60 else f"{PLOTS_WAIT_S:g} s"
        busy = f"the process drawing an earlier verdict's plots has held {sd.root} for more than {waited} ({holder})"
        fix = (f"wait for it, or stop it (`kill {pid}`; its log is {sd.root / PLOTS_LOG}), then run `ablate {name}` "
               "again")
        if any(k in VERDICT_OVERRIDES or k == "reset" for k in overrides):
            raise SweepDirError(f"{busy}, so options cannot be remembered now", where=f"ablate {name}", fix=fix)
        verdict = write_verdict(sd, overrides, write=False)
        print(render_markdown(verdict))
        print(f"ablate: {busy}: this verdict is printed and not written. Fix: {fix}", file=sys.stderr)
        return 0
    if any(k in VERDICT_OVERRIDES or k == "reset" for k in overrides):
        raise SweepDirError(f"an ablation is running in {sd.root} ({holder}), so options cannot be remembered now",
                            where=f"ablate {name}",
                            fix=f"wait until it ends (`ablate status {sd.root}`), then run `ablate {name}` again")
    verdict = write_verdict(sd, overrides, write=False)
    print(render_markdown(verdict))
    print(f"ablate: an ablation is running in {sd.root} ({holder}): this is the verdict so far, printed and not "
          "written; the ablation writes verdict.json and verdict.md when it ends", file=sys.stderr)
    return 0


def cmd_resume(argv: list[str], name: str = "resume") -> int:
    """``ablate resume DIR``: run what is left (interrupted or never started trials), then the verdict."""
    p = _Parser(prog=f"ablate {name}", description="Finish an ablation: run what is left, write the verdict.")
    p.add_argument("dir")
    p.add_argument("--resubmit", action="store_true",
                   help="also re-run trials that failed for infrastructure reasons (killed, timeout)")
    args = p.parse_args(argv)
    from ablate.orchestrate.pipeline import execute

    sd = SweepDir.open(args.dir)
    execute(sd, resubmit=args.resubmit)
    return 0


def cmd_extend(argv: list[str], name: str = "extend") -> int:
    """``ablate extend DIR seeds=K``: run seeds N+1..K of every arm into the same sweep dir, then the verdict of
    the two stages combined (:mod:`ablate.orchestrate.extend`)."""
    if argv in (["--help"], ["-h"]):
        print(f"usage: ablate {name} DIR seeds=K\n\nAdd seeds to a finished ablation: runs seeds N+1..K of every arm "
              "into DIR (same pins: code, data, environment), then judges it as a two-stage adaptive design (the "
              "seeds at the look, then the new ones, combined by the inverse-normal test, which keeps α however K "
              "was chosen). A kill is finished by `ablate resume DIR`.")
        return 0
    from ablate.orchestrate.extend import extend, parse_args

    path, k = parse_args(argv)
    extend(path, k)
    return 0


def cmd_status(argv: list[str], name: str = "status") -> int:
    """``ablate status DIR``: per arm pending / running / done / failed, with failed trials' errors."""
    p = _Parser(prog=f"ablate {name}", description="Show the progress of an ablation.")
    p.add_argument("dir")
    args = p.parse_args(argv)
    from ablate.orchestrate.status import format_status
    from ablate.orchestrate.transfer import is_transfer_dir, scale_dirs

    if is_transfer_dir(args.dir):  # a transfer check: each scale's sweep dir in turn
        for child in scale_dirs(args.dir):
            print(f"== {child.name} ==\n{format_status(SweepDir.open(child))}")
        return 0
    sd = SweepDir.open(args.dir)
    print(format_status(sd))
    return 0


def cmd_repro(argv: list[str], name: str = "repro") -> int:
    """``ablate repro DIR [--trial ARM/SEED] [--strong]`` (see :mod:`ablate.orchestrate.repro`).

    Exit code 0 when the checked guarantee holds, 1 when it does not, 2 for bad input.
    """
    p = _Parser(prog=f"ablate {name}",
                description="Re-run one trial from its pins (code snapshot, config, seed, determinism mode, data) "
                "and check that it reproduces: the final metrics (weak) and, with --strong, every per-step "
                "fingerprint logged by ablate.log_step. Exit 0 when it holds, 1 when not, 2 for bad input.")
    p.add_argument("dir", metavar="DIR", help="the ablation's sweep dir")
    p.add_argument("--trial", metavar="ARM/SEED",
                   help="the trial to re-run, e.g. control/0 (default: the first completed control trial)")
    p.add_argument("--strong", action="store_true",
                   help="also compare per-step fingerprints and name the first step where the runs diverge")
    args = p.parse_args(argv)
    from ablate.orchestrate.repro import reproduce

    report = reproduce(args.dir, trial=args.trial, strong=args.strong)
    print(report.format())
    return report.exit_code


def cmd_track(argv: list[str], name: str = "track") -> int:
    """``ablate track DIR [tracker=mlflow|wandb] [tracker.<option>=<value> ...]``: log a sweep dir to a tracker.

    Without ``tracker=``, the tracker recorded in the ablation's settings is used. Trials already
    logged to MLflow are not logged twice; W&B runs keep their ids, so a re-sync updates them.
    """
    p = _Parser(prog=f"ablate {name}", description="Log an ablation (trials + verdict) to MLflow or W&B.")
    p.add_argument("dir")
    p.add_argument("settings", nargs="*", metavar="tracker=NAME|tracker.OPTION=VALUE")
    args = p.parse_args(argv)
    import yaml

    from ablate.trackers import TRACKERS, log_ablation

    sd = SweepDir.open(args.dir)
    empty = nothing_finished(sd)
    if empty:
        raise SweepDirError(f"{empty} in {sd.root}, so there is nothing to log", where=f"ablate {name}",
                            fix=f"run them first with `ablate resume {sd.root}`")
    cfg = dict((sd.plan().get("options") or {}).get("tracker") or {})
    for item in args.settings:
        key, sep, value = item.partition("=")
        if not sep or not (key == "tracker" or key.startswith("tracker.")):
            raise ConfigError(f"{item!r} is not tracker=NAME or tracker.OPTION=VALUE", where=f"ablate {name}",
                              fix="e.g. `ablate track DIR tracker=mlflow tracker.tracking_uri=sqlite:///mlflow.db`")
        if key == "tracker":
            cfg = {"name": value} if value != cfg.get("name") else cfg
        else:
            cfg[key.removeprefix("tracker.")] = yaml.safe_load(value)
    if not cfg.get("name"):
        raise ConfigError("the ablation was run without a tracker and none was given", where="tracker",
                          fix=f"add tracker=NAME ({', '.join(TRACKERS)}), e.g. "
                          f"`ablate track {args.dir} tracker=mlflow`")
    print(log_ablation(sd, cfg))
    return 0


def cmd_audit(argv: list[str], name: str = "audit") -> int:
    """``ablate audit SOURCE... [--variable KEY] [--metric NAME] [--out DIR] [selection]``: judge runs ablate did not
    launch (Hydra run/multirun dirs, MLflow stores, W&B run dirs, TensorBoard log dirs, DVC experiments, ablate
    sweep dirs); see :mod:`ablate.audit`."""
    p = _Parser(prog=f"ablate {name}",
                description="Read existing runs (each run counted once, however many records show it), group them "
                "into two arms (runs differing only in the seed are replicates; with one config, by data version, "
                "then by commit), classify every difference (variable, derived, confounds), give the verdict's "
                "statistics post hoc, and write the minimal ablation that settles it: audit.md, audit.json.")
    p.add_argument("sources", nargs="+", metavar="SOURCE",
                   help="a Hydra run or multirun dir, an MLflow store (mlflow.db, mlruns/, a tracking URI), a W&B "
                   "run dir (wandb/ or wandb/offline-run-*), a TensorBoard log dir, a DVC project or `dvc exp show "
                   "--json` output, an ablate sweep dir")
    p.add_argument("--variable", metavar="KEY", help="the difference under test: a config key, `commit`, or "
                   "`data:PATH` (default: proposed)")
    p.add_argument("--metric", nargs="+", metavar="NAME", help="the metric to compare (default: the one every run "
                   "logged), or each side's: --metric A=val_acc B=val_accuracy")
    p.add_argument("--goal", choices=["maximize", "minimize"], help="the metric's direction (default: guessed "
                   "from its name's whole tokens: loss, error ... are minimized, acc, auc, f1 ... maximized)")
    p.add_argument("--reduce", choices=["last", "min", "max"], default="last",
                   help="how a metric logged at many steps becomes one value (as for trials)")
    p.add_argument("--seed-key", nargs="+", default=["seed"], metavar="KEY",
                   help="the config key holding the seed (default seed), or each side's: --seed-key A=seed "
                   "B=random_seed")
    p.add_argument("--repo", metavar="DIR", help="the git repo the runs ran in (for the files a commit changed and "
                   "the data versions; default: where the runs say they ran)")
    p.add_argument("--app", metavar="SCRIPT", help="the training script for the minimal ablation (default: the one "
                   "the runs recorded)")
    p.add_argument("--experiment", action="append", default=[], metavar="NAME",
                   help="only runs of this MLflow experiment (name or id) or W&B project (repeatable)")
    p.add_argument("--run-id", action="append", default=[], metavar="ID",
                   help="only this run (MLflow run id or name, W&B run id or name, DVC experiment; repeatable)")
    p.add_argument("--tag", action="append", default=[], metavar="K=V",
                   help="only runs with this tag (MLflow tag K=V; a W&B tag as written; repeatable: all must hold)")
    p.add_argument("--since", metavar="TIME", help="only runs started at or after TIME (ISO date or date-time, "
                   "local time: 2024-05-01, 2024-05-01T14:00)")
    p.add_argument("--until", metavar="TIME", help="only runs started before TIME")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    p.add_argument("--out", metavar="DIR", default="audit", help="where audit.md and audit.json go (default audit/)")
    args = p.parse_args(argv)
    from pathlib import Path

    from ablate.audit import run_audit  # lazy: the audit's readers load only for `ablate audit`
    from ablate.audit.sources import Selection

    selection = Selection(experiments=tuple(args.experiment), run_ids=tuple(args.run_id), tags=tuple(args.tag),
                          since=_when(args.since, "--since"), until=_when(args.until, "--until"))
    run_audit(args.sources, out=args.out, variable=args.variable, metric=_per_side(args.metric, "--metric"),
              goal=args.goal, reduce=args.reduce, seed_key=_per_side(args.seed_key, "--seed-key"), repo=args.repo,
              app=args.app, selection=selection, plots=not args.no_plots)
    print(Path(args.out) / "audit.md")
    return 0


def _per_side(values: list[str] | None, flag: str) -> str | dict[str, str] | None:
    """``NAME`` (both sides), or ``A=NAME B=NAME`` (each side's)."""
    if not values:
        return None
    if len(values) == 1 and "=" not in values[0]:
        return values[0]
    sides = dict(v.split("=", 1) if "=" in v else ("", v) for v in values)
    if set(sides) != {"A", "B"} or not all(sides.values()):
        raise ConfigError(f"{flag} {' '.join(values)} is neither one name nor each side's", where=flag,
                          fix=f"give one name ({flag} NAME) or each side's ({flag} A=NAME B=NAME)")
    return sides


def _when(text: str | None, flag: str) -> float | None:
    """An ISO date or date-time (local time unless it says its zone) as seconds since the epoch."""
    if text is None:
        return None
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        raise ConfigError(f"{flag} {text!r} is not a date", where=flag,
                          fix=f"give an ISO date or date-time, e.g. {flag} 2024-05-01 or {flag} 2024-05-01T14:00")\
            from None
