"""The charlm task: a small character-level transformer language model trained on text that ships
with Python itself (a few standard-library source files, found next to the ``os`` module; nothing is
downloaded).

It exercises ops on PyTorch's nondeterministic list, so it is the example for determinism modes:

- ``nn.Embedding`` for tokens and positions (its backward accumulates rows);
- a bag-of-tokens feature: the embeddings of the ``bag_context`` characters *before* each window are
  summed per window with ``index_add`` (atomic adds on CUDA, so the sum's rounding depends on thread
  timing unless ``determinism=strict``).

``train(cfg)`` never seeds itself: ablate seeds python, numpy and torch from ``cfg.seed`` first
(weight init and the sampled windows depend on that seed). The corpus is pinned indirectly: it is
the standard library of the Python version recorded in every trial's environment.
"""

from __future__ import annotations

import inspect
import os
import time
from pathlib import Path
from typing import Any

import ablate

VOCAB = 128  # ASCII; other characters become "?"


def stdlib_text(files: list[str]) -> str:
    """Concatenate standard-library source files (names relative to the stdlib directory).

    Raises
    ------
    FileNotFoundError
        When a named file is not in this Python's standard library.
    """
    root = Path(inspect.getfile(os)).parent
    return "\n".join((root / f).read_text(encoding="utf-8") for f in files)


def _model(t: Any) -> Any:
    import torch
    from torch import nn

    class CharLM(nn.Module):
        """Token + position embeddings + a bag-of-tokens context vector -> pre-norm causal transformer."""

        def __init__(self) -> None:
            super().__init__()
            self.tok = nn.Embedding(VOCAB, t.d_model)
            self.pos = nn.Embedding(t.context, t.d_model)
            self.bag = nn.Embedding(VOCAB, t.d_model)
            layer = nn.TransformerEncoderLayer(t.d_model, t.heads, 4 * t.d_model, dropout=0.0, batch_first=True,
                                               norm_first=True)
            self.blocks = nn.TransformerEncoder(layer, t.layers, enable_nested_tensor=False)
            self.norm = nn.LayerNorm(t.d_model)
            self.head = nn.Linear(t.d_model, VOCAB)
            self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(t.context), persistent=False)

        def forward(self, x: torch.Tensor, prev: torch.Tensor) -> torch.Tensor:
            """Logits (B, T, VOCAB) for windows ``x`` (B, T) preceded by ``prev`` (B, K) characters."""
            b, k = prev.shape
            rows = torch.arange(b).repeat_interleave(k)  # window of each preceding character
            bag = torch.zeros(b, t.d_model).index_add(0, rows, self.bag(prev.reshape(-1)))  # (B, d)
            h = self.tok(x) + self.pos.weight[: x.shape[1]] + (bag / k)[:, None, :]
            h = self.blocks(h, mask=self.mask[: x.shape[1], : x.shape[1]], is_causal=True)
            return self.head(self.norm(h))

    return CharLM()


def train(cfg: Any) -> dict[str, float]:
    """Train for ``cfg.task.steps`` steps of ``cfg.task.batch_size`` random windows.

    Returns
    -------
    dict
        ``val_loss`` (cross-entropy on the held-out last ``val_fraction`` of the corpus, nats per
        character; lower is better), and the training throughput: ``samples_per_s`` (training windows
        per wall-clock second of the optimisation loop, fingerprinting excluded) and
        ``samples_per_cpu_s`` (per second of this process's CPU time: steadier than wall-clock on a
        shared machine, comparable between runs with the same threads).

    Raises
    ------
    ValueError
        When the corpus is too short for the windows.
    """
    import numpy as np
    import torch
    from torch import nn

    t = cfg.task
    raw = stdlib_text(list(t.files)).encode("ascii", "replace")
    data = torch.from_numpy(np.frombuffer(raw, dtype=np.uint8).astype(np.int64))
    n_val = int(len(data) * t.val_fraction)
    train_data, val_data = data[:-n_val], data[-n_val:]
    T, K = int(t.context), int(t.bag_context)
    if len(val_data) < K + T + 1:
        raise ValueError(f"the corpus ({len(data)} characters) is too short for context={T}, bag_context={K}")

    def windows(src: torch.Tensor, starts: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        offs = torch.arange(T)
        x = src[starts[:, None] + offs]
        y = src[starts[:, None] + offs + 1]
        prev = src[starts[:, None] - K + torch.arange(K)]
        return x, y, prev

    model = _model(t)
    opt = torch.optim.AdamW(model.parameters(), lr=t.lr, weight_decay=t.weight_decay)
    loss_fn = nn.CrossEntropyLoss()
    train_s = train_cpu_s = 0.0
    for step in range(t.steps):
        t0, c0 = time.perf_counter(), time.process_time()
        starts = torch.randint(K, len(train_data) - T - 1, (t.batch_size,))
        x, y, prev = windows(train_data, starts)
        opt.zero_grad()
        loss = loss_fn(model(x, prev).reshape(-1, VOCAB), y.reshape(-1))
        loss.backward()
        opt.step()
        train_s += time.perf_counter() - t0
        train_cpu_s += time.process_time() - c0
        ablate.log_step(step, loss=loss.item(), params=model)
    model.eval()
    val_starts = torch.arange(K, len(val_data) - T - 1, T)[: t.val_windows]
    with torch.no_grad():
        x, y, prev = windows(val_data, val_starts)
        val_loss = loss_fn(model(x, prev).reshape(-1, VOCAB), y.reshape(-1)).item()
    n = t.steps * t.batch_size
    return {"val_loss": val_loss, "samples_per_s": n / train_s, "samples_per_cpu_s": n / train_cpu_s}
