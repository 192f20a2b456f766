"""Inverted dropout, forward and backward (seed 002 §12.1, eqs. 49-50)."""

from __future__ import annotations

import numpy as np

from light_llm.errors import ConfigError


def dropout_forward(
    x: np.ndarray, p: float, rng: np.random.Generator | None
) -> tuple[np.ndarray, np.ndarray | None]:
    """Zero each entry with probability p and scale the survivors by 1/(1-p), so that the
    expected output is x (seed 002 §12.1). With p = 0 (or in evaluation, where the caller
    passes p = 0) the input is returned unchanged and the cache is None.

    The cache is the scaled mask m ∈ {0, 1/(1-p)}: out = x ⊙ m."""
    if p == 0.0:
        return x, None
    if not 0.0 < p < 1.0:
        raise ConfigError(f"dropout probability must be in [0, 1), got {p}.")
    if rng is None:
        raise ConfigError("dropout in training mode needs a numpy random Generator.")
    mask = (rng.random(x.shape, dtype=x.dtype) >= p).astype(x.dtype)
    mask *= 1.0 / (1.0 - p)
    return x * mask, mask


def dropout_backward(dout: np.ndarray, cache: np.ndarray | None) -> np.ndarray:
    """out = x ⊙ m, so dx = dout ⊙ m: dropped entries pass no gradient."""
    return dout if cache is None else dout * cache
