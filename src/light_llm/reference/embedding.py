"""Embedding lookup, forward and backward (seed 000 §2; seed 002 §10.2, eq. 42: e_i = E[i])."""

from __future__ import annotations

import numpy as np

from light_llm.errors import ConfigError, SamplingError


def check_ids_in_vocabulary(
    ids: np.ndarray, vocab_size: int, name: str = "token id", ignore_index: int | None = None
) -> None:
    """SamplingError unless every id of the integer array ``ids`` (but ``ignore_index``) lies in
    [0, vocab_size): E[ids] and -log softmax(logits)[y] are defined for nothing else (NumPy
    would read a negative id from the table's end)."""
    scored = ids if ignore_index is None else ids[ids != ignore_index]
    if scored.size and (scored.min() < 0 or scored.max() >= vocab_size):
        bad = int(scored.min()) if scored.min() < 0 else int(scored.max())
        besides = "" if ignore_index is None else f", or {ignore_index}: not scored"
        raise SamplingError(
            f"{name} {bad} is outside the model's vocabulary (ids run from 0 to "
            f"{vocab_size - 1}{besides})."
        )


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
