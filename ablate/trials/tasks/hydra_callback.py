"""A Hydra callback that saves the ``@hydra.main`` function's return value (``app`` form).

Hydra drops what the task function returns; its ``on_job_end`` callback still receives it. An app
trial adds this callback on the command line
(``+hydra.callbacks.ablate_return._target_=ablate.trials.tasks.hydra_callback.SaveReturn``), so the app
itself is not edited. The value goes to ``<hydra output dir>/ablate_return.json`` as
``{"value": ..., "type": ...}``; numpy and torch scalars are stored as numbers. What the app saw goes
to ``ablate_seen.json``: its config resolved in its own process after ``main()`` ran, and the Hydra
values it may read (``job.override_dirname``, ``runtime.output_dir`` ...), and torch's threads and
determinism flags in the app's process; the trial's manifest records that, not ablate's own resolution
(nor ablate's own torch, which composing the app imported).
"""

from __future__ import annotations

import enum
import json
import math
import sys
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import OmegaConf

from ablate.metrics.files import SEEN_FILE
from ablate.pin.imported import imported_distributions
from ablate.trials.seeding import torch_flags

#: The override that installs this callback.
CALLBACK_OVERRIDE = "+hydra.callbacks.ablate_return._target_=ablate.trials.tasks.hydra_callback.SaveReturn"


def _plain(v: Any) -> Any:
    if isinstance(v, enum.Enum):
        return v.name  # as Hydra writes an Enum value to .hydra/config.yaml
    if hasattr(v, "item") and callable(v.item) and getattr(v, "ndim", 0) == 0:
        v = v.item()
    if isinstance(v, dict) or hasattr(v, "items"):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_plain(x) for x in v]
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)  # JSON has no nan/inf; read back with float()
    if v is None or isinstance(v, bool | int | float | str):
        return v
    return repr(v)



def seen_config(config: Any) -> dict[str, Any]:
    """The app's config as the app saw it: resolved in its own process, once its ``main()`` has run.

    So resolvers registered inside ``main()``, environment variables the app set (``PROJECT_ROOT``)
    and ``${hydra:...}`` values (``job.override_dirname``, ``runtime.output_dir``) are the app's. A
    node that still cannot be resolved is kept as its unresolved text.
    """
    out: dict[str, Any] = {}
    for key in config:
        if key == "hydra":
            continue
        node = config._get_node(key)
        try:
            value = OmegaConf.to_container(node, resolve=True, enum_to_str=True) if OmegaConf.is_config(node) \
                else config[key]
        except Exception:
            value = OmegaConf.to_container(node, resolve=False, enum_to_str=True) if OmegaConf.is_config(node) \
                else node._value()
        out[str(key)] = _plain(value)
    return out


def seen_torch() -> dict[str, Any] | None:
    """torch's thread count and determinism flags in the app's own process, once its ``main()`` ran.

    None when the app never imported torch (it is never imported here for this).
    """
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    return {"threads": int(torch.get_num_threads()), "flags": torch_flags()}


def seen_hydra(config: Any) -> dict[str, Any]:
    """The Hydra values of the app's run that its config may read (``${hydra:...}``)."""
    h = config.hydra
    return {"job.override_dirname": h.job.override_dirname, "job.name": h.job.name,
            "runtime.output_dir": h.runtime.output_dir, "runtime.cwd": h.runtime.cwd,
            "mode": getattr(h.mode, "name", str(h.mode))}


class SaveReturn(Callback):
    """Hydra callback: saves the return value, and what the app saw (:func:`seen_config`, :func:`seen_hydra`,
    :func:`seen_torch`) to ``ablate_seen.json``.

    A subclass of Hydra's own ``Callback``, so Hydra finds every hook it calls (``on_run_start``,
    ``on_job_start`` ...: Hydra's no-ops): Hydra 1.3 warns "Callback SaveReturn.on_run_start raised
    AttributeError" for a hook a callback lacks, and an app that turns warnings into errors
    (``warnings.simplefilter("error")``) would fail every trial on that warning.
    """

    def on_job_end(self, config: Any, job_return: Any, **kwargs: Any) -> None:
        """Write the job's return value to ``ablate_return.json`` in its output dir (not when it failed)."""
        out_dir = Path(config.hydra.runtime.output_dir)
        try:
            seen = {"config": seen_config(config), "hydra": seen_hydra(config), "torch": seen_torch(),
                    "packages": imported_distributions()}
            (out_dir / SEEN_FILE).write_text(json.dumps(seen))
        except Exception as exc:  # never fail the app's run over a record
            (out_dir / SEEN_FILE).write_text(json.dumps({"error": f"{type(exc).__name__}: {exc}"}))
        try:
            value = job_return.return_value
        except Exception:  # the task raised: Hydra re-raises it after the callbacks
            return
        out = out_dir / "ablate_return.json"
        out.write_text(json.dumps({"value": _plain(value), "type": type(value).__name__}))
