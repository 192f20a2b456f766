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

Two samplings (``--sampling``). ``uniform`` (nanoGPT's ``get_batch``): every window's start
drawn uniformly from the micro-batch's generator, with replacement, so over P passes' worth
of windows a token is read a Poisson(P) number of times (e^-P of the text never, at P = 3.5
one token in 33). ``passes``: shuffled passes over the training split (:func:`pass_window_starts`),
so that every token is read once a pass; a window is then a function of its index in the run,
j = (windows of the iterations before) + slot B_t + b, again with no sampler state to save.
"""

from __future__ import annotations

import functools

import numpy as np

from light_llm.errors import ConfigError

TRAIN_STREAM = 0
EVAL_STREAM = 1
PASS_STREAM = 2
SPLITS = ("train", "val")
SAMPLINGS = ("uniform", "passes")


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


def windows_per_pass(n_tokens: int, block_size: int) -> int:
    """K, the windows of a pass: K = max(1, floor((N - T) / T)) non-overlapping windows of
    T + 1 tokens (T inputs, each with its next-token target) fit in N tokens after any
    offset o < T, since o + (K - 1) T + T + 1 <= K T <= N - T (one window when N < 2T)."""
    return max(1, (n_tokens - block_size) // block_size)


@functools.lru_cache(maxsize=2)  # the pass a step reads and the next
def pass_order(
    seed: int, n_tokens: int, block_size: int, pass_index: int
) -> tuple[int, np.ndarray]:
    """Pass p's offset o_p and order π_p: o_p uniform in [0, min(T, N - K T)) (so that
    pass after pass a token sits at another place in its window) and π_p a uniformly random
    permutation of the K windows, both from a generator seeded by (seed, p) alone."""
    count = windows_per_pass(n_tokens, block_size)
    rng = np.random.default_rng([PASS_STREAM, seed, pass_index])
    offset = int(rng.integers(0, min(block_size, n_tokens - count * block_size)))
    return offset, rng.permutation(count)


def pass_window_starts(
    seed: int, n_tokens: int, block_size: int, first: int, count: int
) -> np.ndarray:
    """The starts of windows ``first`` .. ``first + count - 1`` of a run sampling shuffled
    passes over a split of N tokens in windows of T: window j is window π_p(j mod K) of pass
    p = floor(j / K),

        start(j) = o_p + T π_p(j mod K),

    so each pass reads its K windows once each, in its own order (:func:`pass_order`); int64,
    shape (count,)."""
    per_pass = windows_per_pass(n_tokens, block_size)
    indices = np.arange(first, first + count)
    starts = np.empty(count, dtype=np.int64)
    for pass_index in np.unique(indices // per_pass):
        in_pass = indices // per_pass == pass_index
        offset, order = pass_order(seed, n_tokens, block_size, int(pass_index))
        starts[in_pass] = offset + block_size * order[indices[in_pass] % per_pass]
    return starts
