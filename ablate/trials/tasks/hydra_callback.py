"""A Hydra callback that saves the ``@hydra.main`` function's return value (``app`` form).

Hydra drops what the task function returns; its ``on_job_end`` callback still receives it. An app
trial adds this callback on the command line
(``+hydra.callbacks.ablate_return._target_=ablate.trials.tasks.hydra_callback.SaveReturn``), so the app
itself is not edited. The value goes to ``<hydra output dir>/ablate_return.json`` as
``{"value": ..., "type": ...}``; numpy and torch scalars are stored as numbers.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

#: The override that installs this callback.
CALLBACK_OVERRIDE = "+hydra.callbacks.ablate_return._target_=ablate.trials.tasks.hydra_callback.SaveReturn"


def _plain(v: Any) -> Any:
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


class SaveReturn:
    """Hydra callback (``hydra.experimental.callback.Callback`` protocol): saves the return value."""

    def on_job_end(self, config: Any, job_return: Any, **kwargs: Any) -> None:
        """Write the job's return value to ``ablate_return.json`` in its output dir (not when it failed)."""
        try:
            value = job_return.return_value
        except Exception:  # the task raised: Hydra re-raises it after the callbacks
            return
        out = Path(config.hydra.runtime.output_dir) / "ablate_return.json"
        out.write_text(json.dumps({"value": _plain(value), "type": type(value).__name__}))
