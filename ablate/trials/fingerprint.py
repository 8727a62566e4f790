"""Per-step fingerprints for the strong reproducibility check (``ablate repro --strong``).

A task calls :func:`log_step` once per training step (or epoch)::

    ablate.log_step(step, loss=loss.item(), params=model)

Inside a trial this appends one JSON line to ``trials/<arm>/seed=<k>/steps.jsonl`` with the loss
(exactly, as a float's hex form) and a SHA-256 of every parameter tensor's bytes. Two runs are
bitwise identical up to a step when their fingerprints agree up to it. Outside a trial (a plain
script) it does nothing, so tasks can call it unconditionally.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ablate.record.sweepdir import open_log

_sink: Path | None = None


@contextlib.contextmanager
def recording(path: str | os.PathLike[str] | None, *, resume: bool = False) -> Iterator[None]:
    """Within the block, :func:`log_step` appends to ``path``.

    The file is truncated first, unless ``resume`` is true: a trial requeued after a preemption
    continues the same attempt (from the task's own checkpoint), so its earlier steps are kept.
    """
    global _sink
    previous = _sink
    _sink = Path(path) if path is not None else None
    if _sink is not None and _sink.exists() and not resume:
        _sink.unlink()
    try:
        yield
    finally:
        _sink = previous


def params_digest(params: Any) -> str:
    """SHA-256 hex digest of a model's parameters (a ``torch.nn.Module``, a tensor, an array, or an
    iterable of them), over each tensor's raw bytes in order."""
    h = hashlib.sha256()
    if hasattr(params, "state_dict"):
        items = list(params.state_dict().items())
    elif isinstance(params, dict):
        items = list(params.items())
    elif hasattr(params, "detach") or hasattr(params, "tobytes"):
        items = [("", params)]
    else:
        items = [(str(i), p) for i, p in enumerate(params)]
    for name, t in items:
        if hasattr(t, "detach"):
            t = t.detach().cpu().contiguous().numpy()
        h.update(name.encode())
        h.update(t.tobytes() if hasattr(t, "tobytes") else repr(t).encode())
    return h.hexdigest()


def log_step(step: int, *, loss: float | None = None, params: Any = None, **values: float) -> None:
    """Record a fingerprint of one training step (no-op outside an ablate trial).

    Parameters
    ----------
    step : int
        Step or epoch number, increasing.
    loss : float, optional
        The step's loss; stored exactly (``float.hex``) so any bit difference shows.
    params : torch.nn.Module, tensor, array or iterable, optional
        Hashed with :func:`params_digest`.
    **values : float
        Other scalars to record exactly (e.g. ``grad_norm``).
    """
    if _sink is None:
        return
    rec: dict[str, Any] = {"step": int(step)}
    if loss is not None:
        rec["loss"] = float(loss).hex()
    for k, v in values.items():
        rec[k] = float(v).hex()
    if params is not None:
        rec["params"] = params_digest(params)

    with os.fdopen(open_log(_sink), "a", encoding="utf-8") as fh:
        fh.write(json.dumps(rec) + "\n")
