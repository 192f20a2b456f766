"""Measuring a language model: mean next-token cross-entropy over a split (seed 000 §7) and
perplexity exp(loss) (seed 002 §10.2, eq. 44).

Two ways to choose the windows scored:

- :func:`sampled_loss` — ``n_batches`` batches at fixed random offsets (the trainer's
  periodic estimate; the same windows at every evaluation of a run);
- :func:`sequential_loss` — consecutive windows from the start of the split, so every token
  is a target once (the number ``light-llm eval`` reports by default).
"""

from __future__ import annotations

import torch

from light_llm.data import TokenDataset
from light_llm.train.batches import eval_batch_rng
from light_llm.train.precision import autocast


@torch.no_grad()
def sampled_loss(
    model: torch.nn.Module,
    dataset: TokenDataset,
    split: str,
    *,
    batch_size: int,
    n_batches: int,
    seed: int,
    device: torch.device,
    dtype: str = "float32",
    batch_indices: range | None = None,
) -> torch.Tensor:
    """The sum over batches ``batch_indices`` (default: all ``n_batches``) of each batch's
    mean loss, a 0-d tensor: divide by ``n_batches`` after adding up the shares of all
    processes. Batch k of ``split`` is drawn by :func:`eval_batch_rng` (seed, split, k)."""
    total = torch.zeros((), device=device)
    for index in batch_indices if batch_indices is not None else range(n_batches):
        x, y = dataset.get_batch(batch_size, eval_batch_rng(seed, split, index), device)
        with autocast(device, dtype):
            _, loss = model(x, y)
        total += loss.float()
    return total


@torch.no_grad()
def sequential_loss(
    model: torch.nn.Module,
    dataset: TokenDataset,
    *,
    batch_size: int,
    device: torch.device,
    dtype: str = "float32",
    max_batches: int | None = None,
    on_batch=None,
) -> tuple[float, int]:
    """(mean loss per target token, number of target tokens) over consecutive windows of
    ``dataset.block_size`` tokens (each scored with the context inside its window)."""
    loss_sum = 0.0
    n_targets = 0
    for x, y in dataset.sequential_batches(batch_size, device, max_batches=max_batches):
        with autocast(device, dtype):
            _, loss = model(x, y)
        loss_sum += loss.float().item() * y.numel()
        n_targets += y.numel()
        if on_batch is not None:
            on_batch()
    return loss_sum / max(n_targets, 1), n_targets
