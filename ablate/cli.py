"""The ``ablate`` command: a thin layer over the Python API.

- ``ablate -m variable=lr seeds=10 [overrides]``: run an ablation (Hydra command line).
- ``ablate [overrides]``: one trial of the control, like a Hydra single run.
- ``ablate --help``: usage, config groups and settings, without starting Hydra (fast); with
  overrides (``ablate --help task=x``) Hydra's own app help.
- ``--cfg job`` / ``--hydra-help`` / ``--info`` / ``--shell-completion``: Hydra's own.
- ``ablate status|verdict|resume|collect|repro|track DIR``: act on an existing sweep dir; dispatched
  before Hydra parses the command line.

User mistakes print one line (``ablate: error: ...``) and exit 2; a failed ablation exits 1.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from ablate.errors import AblateError, UserError

SUBCOMMANDS = ("status", "verdict", "resume", "collect", "repro", "track")


def _fail(exc: AblateError) -> int:
    print(f"ablate: error: {exc}", file=sys.stderr)
    return exc.exit_code


def main(argv: Sequence[str] | None = None) -> int:
    """Console entry point; returns the exit code (0 ok, 1 ablation failed, 2 bad input)."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        if args in (["--help"], ["-h"]):
            from ablate.help import print_help

            code = print_help()
        elif args and args[0] in SUBCOMMANDS:
            from ablate.commands import dispatch

            code = dispatch(args[0], args[1:])
        else:
            code = _hydra_main(args)
    except AblateError as exc:
        code = _fail(exc)
    except KeyboardInterrupt:
        print("ablate: interrupted; `ablate resume DIR` finishes the ablation", file=sys.stderr)
        code = 130
    if argv is None:
        sys.exit(code)
    return code


def _hydra_main(argv: list[str]) -> int:
    from hydra._internal.utils import get_args_parser

    from ablate.config import default_config_path

    parser = get_args_parser()
    parser.prog = "ablate"
    args = parser.parse_args(argv)
    config_path = args.config_path if args.config_path is not None else default_config_path()
    config_dirs = [args.config_dir] if args.config_dir else []
    hydra_own = args.help or args.hydra_help or args.cfg or args.info or args.shell_completion
    if args.multirun and not hydra_own:
        from ablate.api import run_composed
        from ablate.config import compose

        composed = compose(args.overrides, config_path=config_path, config_dirs=config_dirs)
        run_composed(composed)
        return 0
    if not hydra_own:
        # A single run: compose once here so user mistakes get ablate's one-line errors (exit 2).
        from ablate.config import compose

        compose(args.overrides, config_path=config_path, config_dirs=config_dirs, multirun=False)
    return _delegate_to_hydra(args, parser, config_path)


def _delegate_to_hydra(args: object, parser: object, config_path: str | None) -> int:
    from hydra._internal.utils import _run_hydra

    from ablate.single import single_trial

    abs_path = os.path.abspath(config_path) if config_path else None
    try:
        _run_hydra(args=args, args_parser=parser, task_function=single_trial,  # type: ignore[arg-type]
                   config_path=abs_path, config_name="ablate")
    except SystemExit as exc:
        return int(exc.code or 0)
    except UserError as exc:
        return _fail(exc)
    return 0


if __name__ == "__main__":
    main()
