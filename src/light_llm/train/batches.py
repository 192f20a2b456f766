"""Which windows of the corpus each micro-batch holds: a pure function of where it sits.

One optimiser step (an *iteration*) averages the gradients of ``grad_accum`` micro-batches,
numbered by *slot* 0 .. grad_accum-1. The random window offsets of a micro-batch are drawn
from a generator seeded by (seed, iteration, slot) alone, through NumPy's SeedSequence,
which turns any tuple of integers into independent streams. Hence:

- the data position of a run is its iteration number: resuming at iteration i draws exactly
  the batches an uninterrupted run draws there, with no sampler state to save; the number
  of windows is the iteration's too (B_t: ``batch_size``, or ``batch_warmup_size`` during a
  batch-size warmup, :func:`light_llm.schedule.warmup_size`), the same in every slot;
- with N processes each rank takes its own slots (rank r: slots r*G/N .. (r+1)*G/N - 1), so
  every rank samples different batches, and one process with grad_accum = G draws exactly
  the micro-batches N processes draw together: the same global batch;
- evaluation batches come from separate streams, fixed for a run, so every evaluation scores
  the model on the same windows and the training streams are untouched.
"""

from __future__ import annotations

import numpy as np

from light_llm.errors import ConfigError

TRAIN_STREAM = 0
EVAL_STREAM = 1
SPLITS = ("train", "val")


def micro_batch_rng(seed: int, iteration: int, slot: int) -> np.random.Generator:
    """The generator of the micro-batch in ``slot`` of ``iteration``."""
    return np.random.default_rng([TRAIN_STREAM, seed, iteration, slot])


def eval_batch_rng(seed: int, split: str, index: int) -> np.random.Generator:
    """The generator of evaluation batch ``index`` of ``split`` ("train" or "val")."""
    return np.random.default_rng([EVAL_STREAM, seed, SPLITS.index(split), index])


def rank_slots(rank: int, world_size: int, grad_accum: int) -> range:
    """The micro-batch slots rank ``rank`` computes: a contiguous share of grad_accum."""
    if grad_accum % world_size:
        raise ConfigError(
            f"grad_accum ({grad_accum}) must be a multiple of the number of processes "
            f"({world_size}), so that every process computes the same number of micro-batches."
        )
    per_rank = grad_accum // world_size
    return range(rank * per_rank, (rank + 1) * per_rank)
