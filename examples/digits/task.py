"""The digits task: an MLP trained with SGD on the fixed split in data/digits.npz.

``train(cfg)`` is what a trial calls. It never seeds itself: ablate seeds python, numpy and torch
from ``cfg.seed`` before calling it (weight init and batch order depend on that seed).

torch and numpy are imported at the top of the module, not inside ``train``: the warm parent of
``launcher=local`` (and of a packed SLURM job) imports this module once, so every trial forked from it
starts with torch loaded (docs/howto.md, "Fast warm trials"). So is ``torch._dynamo``, which torch imports
lazily when the first optimizer is built (about 1 s of CPU): imported here, the warm parent holds it before
the first trial, where learning it would leave the first trial of each slot to pay it and the next fork to
wait while the parent imports it. The task reports its own training time,
``train_s`` (the optimisation loop alone), so a run's wall clock can be set against the training it
exists for.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch
import torch._dynamo  # what torch.optim.SGD(...) imports on first use: paid once, by the warm parent)
from torch import nn

import ablate


def train(cfg: Any) -> dict[str, float]:
    """Train for ``cfg.task.epochs`` epochs, logging each epoch's validation accuracy and loss with
    :func:`ablate.log_step` (the curve a curve verdict compares: ``curve.enabled=true``); the last epoch's
    values are the returned ``val_acc`` and ``val_loss``.

    Returns
    -------
    dict
        ``val_acc`` (0..1), ``val_loss`` (nats), and the training throughput to ablate ``determinism``
        on: ``samples_per_s`` (training samples per wall-clock second of the optimisation loop,
        fingerprinting excluded) and ``samples_per_cpu_s`` (per second of this process's CPU time:
        steadier than wall-clock on a shared machine, comparable between runs with the same threads),
        and ``train_s``, the wall-clock seconds of the optimisation loop (a timing: ``ablate repro`` shows
        it without comparing it).
    """
    t = cfg.task
    data = np.load(t.data_file)
    x_train, y_train = torch.from_numpy(data["x_train"]), torch.from_numpy(data["y_train"])
    x_val, y_val = torch.from_numpy(data["x_val"]), torch.from_numpy(data["y_val"])
    model = nn.Sequential(nn.Linear(64, t.hidden), nn.ReLU(), nn.Linear(t.hidden, 10))
    opt = torch.optim.SGD(model.parameters(), lr=t.optim.lr, momentum=t.optim.momentum)
    loss_fn = nn.CrossEntropyLoss()
    n = len(x_train)
    train_s = train_cpu_s = 0.0
    for epoch in range(t.epochs):
        t0, c0 = time.perf_counter(), time.process_time()
        model.train()
        order = torch.randperm(n)
        for i in range(0, n, t.batch_size):
            idx = order[i:i + t.batch_size]
            opt.zero_grad()
            loss = loss_fn(model(x_train[idx]), y_train[idx])
            loss.backward()
            opt.step()
        train_s += time.perf_counter() - t0
        train_cpu_s += time.process_time() - c0
        val_acc, val_loss = evaluate(model, loss_fn, x_val, y_val)  # the per-epoch validation curve
        ablate.log_step(epoch, loss=loss.item(), params=model, val_acc=val_acc, val_loss=val_loss)
    val_acc, val_loss = evaluate(model, loss_fn, x_val, y_val)
    return {"val_acc": val_acc, "val_loss": val_loss, "samples_per_s": n * t.epochs / train_s,
            "samples_per_cpu_s": n * t.epochs / train_cpu_s, "train_s": train_s}


def evaluate(model: nn.Module, loss_fn: nn.Module, x_val: torch.Tensor, y_val: torch.Tensor) -> tuple[float, float]:
    """Validation accuracy (0..1) and loss (nats) of ``model``, in eval mode without gradients (no generator is
    drawn from: the training that follows is the same with or without it). The model is left in eval mode."""
    model.eval()
    with torch.no_grad():
        logits = model(x_val)
        return (logits.argmax(1) == y_val).float().mean().item(), loss_fn(logits, y_val).item()
