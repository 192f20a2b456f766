"""Cross-entropy of next-token prediction with an ignore index and label smoothing, forward
and backward (seed 000 §7; seed 002 §2.3, eq. 2; §10.1, eq. 41; §12.2, eq. 51)."""

from __future__ import annotations

import numpy as np

from light_llm.errors import ConfigError
from light_llm.limits import check_real
from light_llm.reference.softmax import log_softmax_backward, log_softmax_forward

IGNORE_INDEX = -1


def cross_entropy_forward(
    logits: np.ndarray,
    targets: np.ndarray,
    ignore_index: int = IGNORE_INDEX,
    label_smoothing: float = 0.0,
) -> tuple[float, tuple]:
    """Mean cross-entropy over the targets that are not ``ignore_index``
    (seed 000 §7: L = -(1/N) Σ_t log p_t[y_t]; seed 002 §2.3, eq. 2), with the one-hot target
    replaced by y_smooth = (1-α) y + α/V (seed 002 §12.2, eq. 51):

        L = (1/N) Σ_t [ (1-α) (-log p_t[y_t]) + (α/V) Σ_v (-log p_t[v]) ]

    the definition ``torch.nn.functional.cross_entropy`` uses. logits: (..., V); targets:
    integer (...). Returns (loss, cache); the loss is NaN when every target is ignored."""
    vocab = logits.shape[-1]
    targets = np.asarray(targets)
    if not np.issubdtype(targets.dtype, np.integer):
        raise ConfigError(f"targets must be integer token ids, got {targets.dtype} values.")
    if targets.shape != logits.shape[:-1]:
        raise ConfigError(
            f"targets of shape {targets.shape} do not fit logits of shape {logits.shape}."
        )
    check_real("label_smoothing", label_smoothing, 0.0, 1.0)  # as the torch engine's
    rows = logits.reshape(-1, vocab)  # (N, V)
    flat_targets = targets.reshape(-1)
    valid = flat_targets != ignore_index
    bad = flat_targets[valid & ((flat_targets < 0) | (flat_targets >= vocab))]
    if bad.size:
        raise ConfigError(f"target {bad[0]} is outside the vocabulary of {vocab} tokens.")
    log_probs, softmax_cache = log_softmax_forward(rows)  # log p: (N, V)
    count = int(valid.sum())
    picked = log_probs[np.nonzero(valid)[0], flat_targets[valid]]  # log p_t[y_t]
    nll = -picked.sum()
    smooth = -log_probs[valid].sum() / vocab if label_smoothing else 0.0
    loss = ((1.0 - label_smoothing) * nll + label_smoothing * smooth) / count if count else np.nan
    cache = (logits.shape, flat_targets, valid, count, label_smoothing, softmax_cache)
    return float(loss), cache


def cross_entropy_backward(cache: tuple, dloss: float = 1.0) -> np.ndarray:
    """Gradient of the mean smoothed cross-entropy at the logits. At the log-probabilities it
    is -(y_smooth)/N on every counted row (0 on ignored rows); through the log-softmax this
    becomes (p - y_smooth)/N (seed 002 §2.3, point 4: predicted minus true probability)."""
    shape, flat_targets, valid, count, label_smoothing, softmax_cache = cache
    vocab = shape[-1]
    dlog_probs = np.zeros(softmax_cache.shape, dtype=softmax_cache.dtype)  # (N, V)
    if count:
        rows = np.nonzero(valid)[0]
        weight = dloss / count
        if label_smoothing:
            dlog_probs[rows] = -label_smoothing * weight / vocab
        dlog_probs[rows, flat_targets[valid]] -= (1.0 - label_smoothing) * weight
    return log_softmax_backward(dlog_probs, softmax_cache).reshape(shape)
