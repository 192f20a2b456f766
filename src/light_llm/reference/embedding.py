"""Embedding lookup, forward and backward (seed 000 §2; seed 002 §10.2, eq. 42: e_i = E[i])."""

from __future__ import annotations

import numpy as np

from light_llm.errors import ConfigError


def embedding_forward(idx: np.ndarray, weight: np.ndarray) -> tuple[np.ndarray, tuple]:
    """out[..., :] = E[idx[...]] (seed 002 §10.2, eq. 42). idx: integer array (...),
    E: (V, d) -> (..., d). A lookup is a product with one-hot rows, so its backward adds each
    row's gradient into the row of E it came from."""
    idx = np.asarray(idx)
    if idx.size and (idx.min() < 0 or idx.max() >= weight.shape[0]):
        bad = idx.min() if idx.min() < 0 else idx.max()
        raise ConfigError(f"index {bad} is outside the table of {weight.shape[0]} rows.")
    return weight[idx], (idx, weight.shape)


def embedding_backward(dout: np.ndarray, cache: tuple) -> np.ndarray:
    """dE[v] = Σ over positions p with idx[p] = v of dout[p]: the one-hot product E^T-side
    gradient (seed 002 §2.2 with A = one-hot rows). Returns dweight (V, d)."""
    idx, shape = cache
    dweight = np.zeros(shape, dtype=dout.dtype)
    np.add.at(dweight, idx.reshape(-1), dout.reshape(-1, shape[1]))
    return dweight
