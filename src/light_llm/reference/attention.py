"""Scaled dot-product attention with causal and padding masks, and the multi-head split and
merge, forward and backward (seed 000 §3; seed 001 "Attention Mechanism Mathematics",
"Backpropagation Through Transformers"; seed 002 §7.1, §7.3, §8.1, §12.1).

Every function works on a whole batch of heads at once: (B, nh, T, hs) arrays and batched
matrix products, no loop over batch, heads or positions.
"""

from __future__ import annotations

import math

import numpy as np

from light_llm.errors import ConfigError
from light_llm.reference.dropout import dropout_backward, dropout_forward
from light_llm.reference.softmax import softmax_backward, softmax_forward


def split_heads(x: np.ndarray, n_head: int) -> np.ndarray:
    """(B, T, d_model) -> (B, nh, T, hs): reshape, then swap T and the heads (seed 000 §3;
    seed 002 §8.1, "Reshape tensors to separate heads"). Its backward is
    :func:`merge_heads`, since it only moves entries."""
    B, T, C = x.shape
    if C % n_head != 0:
        raise ConfigError(f"{C} features cannot be split into {n_head} heads of equal size.")
    return x.reshape(B, T, n_head, C // n_head).transpose(0, 2, 1, 3)


def merge_heads(x: np.ndarray) -> np.ndarray:
    """(B, nh, T, hs) -> (B, T, d_model): Concat(head_1, ..., head_h) (seed 002 §8.1, eq. 30;
    seed 000 §3). The inverse of :func:`split_heads`, and so its backward (and vice versa)."""
    B, nh, T, hs = x.shape
    return x.transpose(0, 2, 1, 3).reshape(B, T, nh * hs)


def attention_mask(
    n_query: int,
    n_key: int,
    offset: int = 0,
    causal: bool = True,
    key_padding: np.ndarray | None = None,
) -> np.ndarray | None:
    """Which keys each query may see, ``allowed[b, 0, i, j]`` (True = attend), or None when
    nothing is masked. Shape (1 or B, 1, n_query, n_key).

    Causal (seed 000 §3 "Causal Masking"): query i, at absolute position offset + i, sees keys
    j <= offset + i. Padding (seed 003 §4): key j is seen only where ``key_padding[b, j]`` is
    true. A query that would then see nothing (a pad at the start of a left-padded row) sees
    itself, so its softmax stays finite; its output is never used.
    """
    allowed = None
    query_pos = np.arange(n_query)[:, None] + offset  # (Tq, 1)
    key_pos = np.arange(n_key)[None, :]  # (1, Tk)
    if causal:
        allowed = (key_pos <= query_pos)[None, None]  # (1, 1, Tq, Tk)
    if key_padding is not None:
        real_key = np.asarray(key_padding, dtype=bool)[:, None, None, :n_key]  # (B, 1, 1, Tk)
        allowed = real_key if allowed is None else allowed & real_key
        allowed = allowed | (key_pos == query_pos)[None, None]
    return allowed


def attention_forward(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    allowed: np.ndarray | None = None,
    dropout_p: float = 0.0,
    rng: np.random.Generator | None = None,
) -> tuple[np.ndarray, tuple]:
    """Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V (seed 002 §7.1, eq. 23; seed 000 §3):

        S = Q K^T / sqrt(d_k)          scores                      (B, nh, Tq, Tk)
        S[~allowed] = -inf             causal / padding mask
        P = softmax(S)                 rows sum to 1 (masked entries are exactly 0)
        P~ = Dropout(P)                attention dropout (seed 002 §12.1, eq. 49)
        O = P~ V                       weighted sum of values      (B, nh, Tq, hs)

    q: (B, nh, Tq, hs); k, v: (B, nh, Tk, hs). Returns (O, cache)."""
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise ConfigError(
            f"attention needs q (.., Tq, d_k), k (.., Tk, d_k) and v (.., Tk, d_v); got "
            f"{q.shape}, {k.shape} and {v.shape}."
        )
    scale = 1.0 / math.sqrt(q.shape[-1])
    scores = q @ k.swapaxes(-1, -2)  # Q K^T: (B, nh, Tq, Tk)
    scores *= scale
    if allowed is not None:
        scores += np.where(allowed, 0.0, -np.inf).astype(scores.dtype)  # x + (-inf) = -inf
    weights, softmax_cache = softmax_forward(scores)  # P
    dropped, dropout_cache = dropout_forward(weights, dropout_p, rng)  # P~
    out = dropped @ v  # (B, nh, Tq, hs)
    return out, (q, k, v, dropped, softmax_cache, dropout_cache, scale)


def attention_backward(dout: np.ndarray, cache: tuple) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gradients of O = softmax(Q K^T / sqrt(d_k)) V (seed 002 §7.3; seed 001
    "Backpropagation Through Transformers"; worked example seed 002 §14.2):

        dV = P~^T dO                                   (B, nh, Tk, hs)
        dP~ = dO V^T,  dP = Dropout backward of dP~    (B, nh, Tq, Tk)
        dS = P ⊙ (dP - rowsum(dP ⊙ P))                 softmax Jacobian, row by row
        dQ = dS K / sqrt(d_k)        dK = dS^T Q / sqrt(d_k)

    Masked entries have P = 0, so they pass no gradient. Returns (dq, dk, dv)."""
    q, k, v, dropped, softmax_cache, dropout_cache, scale = cache
    dv = dropped.swapaxes(-1, -2) @ dout  # P~^T dO
    dweights = dropout_backward(dout @ v.swapaxes(-1, -2), dropout_cache)  # dP
    dscores = softmax_backward(dweights, softmax_cache)  # dS
    dscores *= scale
    dq = dscores @ k  # (B, nh, Tq, hs)
    dk = dscores.swapaxes(-1, -2) @ q  # (B, nh, Tk, hs)
    return dq, dk, dv
