"""Seeding for a task's own DataLoader workers: ``from ablate.seeding import worker_init_fn``.

The documented name of the helpers in :mod:`ablate.trials.seeding` (ablate seeds python, numpy and torch in each
trial before its task runs; a DataLoader's worker processes need their own streams, derived from the trial's seed):

    DataLoader(ds, num_workers=4, worker_init_fn=worker_init_fn, generator=dataloader_generator(cfg.seed))
"""

from __future__ import annotations

from ablate.trials.seeding import dataloader_generator, worker_init_fn

__all__ = ["dataloader_generator", "worker_init_fn"]
