"""ablate: trustworthy ML ablations.

Change one config key, run N seeds per arm with pinned code and data, and get a statistical
verdict. Public API (imported lazily, so ``import ablate`` is cheap)::

    ablate.run(config_dir, variable="lr", seeds=10)   # run an ablation, return its Verdict
    ablate.load(sweep_dir)                            # tidy DataFrame, one row per trial
    ablate.Verdict.open(sweep_dir)                    # the verdict of an existing sweep dir
    ablate.log_step(step, loss=..., params=model)     # per-step fingerprints for `ablate repro --strong`
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from ablate.api import Verdict, run
    from ablate.record.results import load
    from ablate.trials.fingerprint import log_step

_LAZY = {"Verdict": "ablate.api", "run": "ablate.api", "load": "ablate.record.results",
         "log_step": "ablate.trials.fingerprint"}


#: Public modules by their documented names (``ablate.seeding.worker_init_fn``), imported on first use.
_MODULES = {"seeding": "ablate.seeding"}


def __getattr__(name: str) -> Any:
    import importlib

    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    if name in _MODULES:
        return importlib.import_module(_MODULES[name])
    raise AttributeError(f"module 'ablate' has no attribute {name!r}")


__all__ = ["Verdict", "__version__", "load", "log_step", "run"]


def __dir__() -> list[str]:
    """The public names (``dir(ablate)``, tab completion): the lazy ones are not in the module's dict yet."""
    return sorted({*__all__, *_MODULES})
