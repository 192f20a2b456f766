"""Measuring a language model: mean next-token cross-entropy over a split (seed 000 §7) and
perplexity exp(loss) (seed 002 §10.2, eq. 44); for an encoder, the masked-LM cross-entropy
over the masked positions (seed 003 §29).

Two ways to choose the windows scored:

- :func:`sampled_loss` — ``n_batches`` batches at fixed random offsets (the trainer's
  periodic estimate; the same windows at every evaluation of a run);
- :func:`sequential_loss` — consecutive windows from the start of the split, so every token
  is a target once (the number ``light-llm eval`` reports by default); masked-LM windows are
  masked with a fixed seed (:meth:`light_llm.train.mlm.MaskedLMDataset.sequential_batches`).

:func:`unigram_loss` is the yardstick: the loss of a model that ignores the context and
predicts every target from the token frequencies of the training split.

Either works on a :class:`~light_llm.data.TokenDataset` (inputs, next tokens) and on a
:class:`~light_llm.train.mlm.MaskedLMDataset` (masked inputs, labels): both yield (x, y) for
``model(x, y) -> (output, mean loss over the targets of y)``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

import numpy as np
import torch

from light_llm.models.bert import IGNORE_INDEX
from light_llm.train.batches import eval_batch_rng
from light_llm.train.precision import autocast

UNIGRAM_PSEUDO_COUNT = 1.0  # α of unigram_log_probabilities: add-one (Laplace) smoothing


class Windows(Protocol):
    """What is scored: a :class:`~light_llm.data.TokenDataset` or a masked-LM
    ``MaskedLMDataset``, both yielding (x, y) int64 batches of shape (B, T)."""

    block_size: int

    def get_batch(
        self,
        batch_size: int,
        generator: np.random.Generator,
        device: str | torch.device,
        context: int | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]: ...

    def sequential_batches(
        self, batch_size: int, device: str | torch.device, max_batches: int | None = None
    ) -> Iterator[tuple[torch.Tensor, torch.Tensor]]: ...


@torch.no_grad()
def sampled_loss(
    model: torch.nn.Module,
    dataset: Windows,
    split: str,
    *,
    batch_size: int,
    n_batches: int,
    seed: int,
    device: torch.device,
    dtype: str = "float32",
    batch_indices: range | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(the sum over batches ``batch_indices`` (default: all ``n_batches``) of each batch's
    mean loss, how many targets those losses scored: those other than IGNORE_INDEX, an
    encoder's masked positions), two 0-d tensors: divide the sum by ``n_batches`` after adding
    up the shares of all processes. Batch k of ``split`` is drawn by :func:`eval_batch_rng`
    (seed, split, k)."""
    total = torch.zeros((), device=device)
    targets = torch.zeros((), dtype=torch.long, device=device)
    for index in batch_indices if batch_indices is not None else range(n_batches):
        x, y = dataset.get_batch(batch_size, eval_batch_rng(seed, split, index), device)
        with autocast(device, dtype):
            _, loss = model(x, y)
        total += loss.float()
        targets += (y != IGNORE_INDEX).sum()
    return total, targets


@torch.no_grad()
def sequential_loss(
    model: torch.nn.Module,
    dataset: Windows,
    *,
    batch_size: int,
    device: torch.device,
    dtype: str = "float32",
    max_batches: int | None = None,
    on_batch=None,
) -> tuple[float, int]:
    """(mean loss per target token, number of target tokens) over consecutive windows of
    ``dataset.block_size`` tokens (each scored with the context inside its window). Targets
    are the entries of y other than IGNORE_INDEX: every next token, or the masked positions."""
    loss_sum = 0.0
    n_targets = 0
    for x, y in dataset.sequential_batches(batch_size, device, max_batches=max_batches):
        with autocast(device, dtype):
            _, loss = model(x, y)
        batch_targets = int((y != IGNORE_INDEX).sum())
        loss_sum += loss.float().item() * batch_targets
        n_targets += batch_targets
        if on_batch is not None:
            on_batch()
    return loss_sum / max(n_targets, 1), n_targets


def unigram_log_probabilities(
    tokens: np.ndarray, vocab_size: int, pseudo_count: float = UNIGRAM_PSEUDO_COUNT
) -> torch.Tensor:
    """log p(v) = log((c_v + α) / (N + α V)) for every id v < V: the frequency of v among the
    N ``tokens`` (c_v of them are v), smoothed by α pseudo-counts so that no id has
    probability 0 (add-one by default); float32 (V,). The cross-entropy of a model that
    predicts p whatever the context is the unigram baseline (seed 000 §7)."""
    counts = np.bincount(np.asarray(tokens, dtype=np.int64), minlength=vocab_size)[:vocab_size]
    total = counts.sum() + pseudo_count * vocab_size
    return torch.from_numpy(np.log((counts + pseudo_count) / total)).float()


def unigram_loss(
    log_probabilities: torch.Tensor,
    dataset: Windows,
    *,
    batch_size: int,
    max_batches: int | None = None,
) -> float:
    """-(1/N) Σ_i log p(y_i) over the N targets :func:`sequential_loss` scores: the loss of
    predicting ``log_probabilities`` (V,) at every target, the context ignored."""
    total, n_targets = 0.0, 0
    for _, y in dataset.sequential_batches(batch_size, "cpu", max_batches=max_batches):
        targets = y[y != IGNORE_INDEX]
        total -= log_probabilities[targets].double().sum().item()
        n_targets += targets.numel()
    return total / max(n_targets, 1)
