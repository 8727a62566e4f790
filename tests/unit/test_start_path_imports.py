"""What `ablate -m` imports before its early warm parent starts (issue 42).

Until the warm parent is started (:func:`ablate.orchestrate.pipeline.prepare`), one core is all the ablation uses: the
modules imported before then are on the critical path. numpy, ablate.stats and scipy are the verdict's, needed only
after the trials; imported later, they load while the warm parent imports the task, on the other core.
"""

from __future__ import annotations

import subprocess
import sys

#: The modules `ablate -m variable=... seeds=...` imports on its way to the early warm parent: the command line's
#: (ablate.cli.main._hydra_main's multirun branch) and planning's (pipeline.prepare).
START_PATH = ("ablate.cli.main", "ablate.api", "ablate.orchestrate.suite", "ablate.orchestrate.transfer",
              "ablate.plan.compose", "ablate.plan.overrides", "ablate.plan.suite", "ablate.trials.tasks.interface",
              "ablate.orchestrate.pipeline", "ablate.orchestrate.options", "ablate.trials.launchers",
              "ablate.plan.arms", "ablate.plan.hydra_semantics", "ablate.trackers")


def test_start_path_leaves_the_verdicts_libraries_for_later() -> None:
    code = ("import importlib, sys\n"
            f"for name in {START_PATH!r}:\n"
            "    importlib.import_module(name)\n"
            "print(sorted(m for m in ('numpy', 'scipy', 'ablate.stats', 'ablate.judge.verdict')\n"
            "             if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"

