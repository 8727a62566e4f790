"""The ``ablate`` command: a thin layer over the Python API.

- ``ablate -m variable=lr seeds=10 [overrides]``: run an ablation (Hydra command line).
- ``ablate [overrides]``: one trial of the control, like a Hydra single run.
- ``ablate --help``: usage, config groups and settings, without starting Hydra (fast); with
  overrides (``ablate --help task=x``) Hydra's own app help.
- ``--cfg job`` / ``--hydra-help`` / ``--info`` / ``--shell-completion``: Hydra's own.
- ``ablate status|verdict|resume|collect|extend|repro|track DIR``: act on an existing sweep dir; dispatched
  before Hydra parses the command line.
- ``ablate audit SOURCE...``: judge runs ablate did not launch (:mod:`ablate.audit`).

User mistakes print one line (``ablate: error: ...``) and exit 2; a failed ablation exits 1.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from ablate.errors import AblateError, UserError

SUBCOMMANDS = ("status", "verdict", "resume", "collect", "extend", "repro", "track", "audit")


def _fail(exc: AblateError) -> int:
    print(f"ablate: error: {exc}", file=sys.stderr)
    return exc.exit_code


def main(argv: Sequence[str] | None = None) -> int:
    """Console entry point; returns the exit code (0 ok, 1 ablation failed, 2 bad input)."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        if args in (["--help"], ["-h"]):
            from ablate.cli.help import print_help

            code = print_help()
        elif args == ["--version"]:
            from importlib.metadata import version

            from ablate import __version__

            print(f"ablate {__version__} (Hydra {version('hydra-core')}, submitit {version('submitit')})")
            code = 0
        elif args and args[0] in SUBCOMMANDS:
            from ablate.cli.commands import dispatch

            code = dispatch(args[0], args[1:])
        else:
            code = _hydra_main(args)
    except AblateError as exc:
        code = _fail(exc)
    except KeyboardInterrupt:
        from ablate.orchestrate import pipeline as orchestrate

        where = orchestrate.CURRENT_SWEEP_DIR or "DIR"
        print(f"ablate: interrupted; `ablate resume {where}` finishes the ablation (interrupted trials are "
              "re-run, finished ones kept)", file=sys.stderr)
        code = 130
    except BrokenPipeError:  # `ablate status DIR | head`: the reader left; that is not an error
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        code = 0
    if argv is None:
        leave(code)
    return code


def leave(code: int) -> NoReturn:
    """End the ``ablate`` command with ``code`` as a normal exit would, less the interpreter's teardown of its
    modules (``scipy.stats`` alone takes 0.3-0.5 s of it, after the verdict is written): non-daemon threads are
    joined, the ``atexit`` functions run (trackers and logging flush there), the streams are flushed, then
    ``os._exit``. Never returns."""
    import atexit
    import contextlib
    import threading

    try:
        for t in threading.enumerate():
            if t is not threading.main_thread() and not t.daemon:
                t.join()
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):  # a reader that left (`ablate status DIR | head`)
                stream.flush()
        os._exit(code)


def _hydra_main(argv: list[str]) -> int:
    from hydra._internal.utils import get_args_parser

    from ablate.plan.project import default_config_path

    parser = get_args_parser()
    parser.prog = "ablate"
    args = parser.parse_intermixed_args(argv)  # options may come after overrides, as users type them
    if args.config_path is not None:  # absolute first: the project's root may become the working dir
        args.config_path = os.path.abspath(args.config_path)
        _enter_project(args.config_path)
    config_path = args.config_path if args.config_path is not None else default_config_path()
    config_dirs = [args.config_dir] if args.config_dir else []
    if config_path is None and not config_dirs:
        from ablate.errors import ConfigError
        from ablate.plan.project import conf_above

        root = conf_above()
        if root is not None:
            raise ConfigError(f"there is no conf/ in {os.getcwd()}; the project root looks like {root} (it has conf/)",
                              where="--config-path", fix=f"run ablate from {root}, or pass --config-path {root}/conf")
    hydra_own = args.help or args.hydra_help or args.cfg or args.info or args.shell_completion
    if args.multirun and not hydra_own:
        from ablate.api import run_composed
        from ablate.orchestrate.suite import run_suite
        from ablate.plan.compose import compose
        from ablate.plan.overrides import command_record
        from ablate.plan.suite import split_suite
        from ablate.trials.tasks.interface import split_cli, with_cli_overrides

        command = command_record(args.overrides, config_path=args.config_path, config_dirs=config_dirs,
                                 config_name=args.config_name)  # recorded in the plan: the rerun command
        ours, app_overrides = split_cli(args.overrides)
        names, rest = split_suite(ours)
        if names:  # `-m variable=lr,dropout`: a suite, one shared control
            run_suite(names, rest, config_path=config_path, config_dirs=config_dirs, config_name=args.config_name,
                      app_overrides=app_overrides, command=command)
            return 0
        composed = with_cli_overrides(compose(ours, config_path=config_path, config_dirs=config_dirs,
                                              config_name=args.config_name), app_overrides)
        from ablate.orchestrate.transfer import parse_scale, run_transfer

        scale = parse_scale(composed.cfg, os.getcwd())
        if scale is not None:  # `scale.key=... scale.values=[...]`: the ablation once per scale, then the check
            run_transfer(ours, scale, composed, config_path=config_path, config_dirs=config_dirs,
                         config_name=args.config_name, app_overrides=app_overrides, command=command)
            return 0
        run_composed(composed, plots_later=True, command=command)  # the PNGs follow the text (a detached drawer)
        return 0
    if hydra_own:
        args.multirun = False  # `ablate -m ... --cfg job` shows the config, as ablate's messages suggest
    else:
        # A single run: compose once here so user mistakes get ablate's one-line errors (exit 2).
        from ablate.errors import ConfigError
        from ablate.orchestrate import single
        from ablate.plan.compose import compose
        from ablate.trials.tasks.interface import split_cli

        args.overrides, single.APP_OVERRIDES[:] = split_cli(args.overrides)
        c = compose(args.overrides, config_path=config_path, config_dirs=config_dirs, multirun=False,
                    config_name=args.config_name)
        if c.cfg.get("dry_run") is True or c.variable_name is not None:
            what = "dry_run=true" if c.cfg.get("dry_run") is True else f"variable={c.variable_name}"
            raise ConfigError(f"{what} without -m: a run without -m trains the control once", where="-m",
                              fix=f"add -m to plan or run the ablation: `ablate -m {' '.join(argv)}`")
    return _delegate_to_hydra(args, parser, config_path)


def _enter_project(config_path: str) -> None:
    """Run from the root of the project that ``--config-path`` names (the directory holding the config dir).

    A project's paths (``task.data``, the task's module, the git repo its code is pinned to, the sweep dir)
    are relative to its root, the directory holding the config dir. Run from elsewhere, ablate would pin
    the wrong repo and look for the data in the wrong place; it changes to that root and says so once.
    """
    from ablate.plan.project import project_of

    root = project_of(config_path)
    if root is None:
        return  # already there, or Hydra's own error names the missing directory
    os.chdir(root)
    print(f"ablate: running in {root}, the project of --config-path {config_path} (its paths are relative to it)",
          file=sys.stderr)


def _delegate_to_hydra(args: object, parser: object, config_path: str | None) -> int:
    from hydra._internal.utils import _run_hydra

    from ablate.orchestrate.single import single_trial

    abs_path = os.path.abspath(config_path) if config_path else None
    try:
        _run_hydra(args=args, args_parser=parser, task_function=single_trial,  # type: ignore[arg-type]
                   config_path=abs_path, config_name=getattr(args, "config_name", None) or "ablate")
    except SystemExit as exc:
        return int(exc.code or 0)
    except UserError as exc:
        return _fail(exc)
    except ValueError as exc:  # Hydra's own argument checks (e.g. two of --cfg/--info/...)
        return _fail(UserError(str(exc), where="command line", fix="see `ablate --help`"))
    return 0


if __name__ == "__main__":
    main()
