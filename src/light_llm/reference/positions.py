"""Position information in NumPy: the sinusoidal table and rotary embeddings (RoPE), with
RoPE's backward (seed 001 "Position Encodings"; seed 002 §8.2, eqs. 31-34; seed 003 §9;
seed 004). Learned positions are an embedding table (``embedding.py``)."""

from __future__ import annotations

import numpy as np


def sinusoidal_table(
    n_positions: int, dim: int, base: float = 10000.0, dtype=np.float64
) -> np.ndarray:
    """PE(pos, 2i) = sin(pos / base^(2i/d)), PE(pos, 2i+1) = cos(pos / base^(2i/d))
    (seed 002 §8.2, eqs. 31-32; seed 003 §9 uses base 100). Computed in float64, returned
    in ``dtype``: (n_positions, dim). It is added to the token embeddings and has no
    parameters, so its backward is the identity on the sum."""
    position = np.arange(n_positions, dtype=np.float64)[:, None]  # (T, 1)
    two_i = np.arange(0, dim, 2, dtype=np.float64)[None, :]  # (1, d/2)
    angle = position / base ** (two_i / dim)  # (T, d/2)
    table = np.empty((n_positions, dim), dtype=np.float64)
    table[:, 0::2] = np.sin(angle)
    table[:, 1::2] = np.cos(angle)
    return table.astype(dtype)


def rope_angles(
    positions: np.ndarray, head_dim: int, base: float = 10000.0, dtype=np.float64
) -> tuple[np.ndarray, np.ndarray]:
    """cos(m θ_i) and sin(m θ_i), θ_i = base^(-2i/d) for the pairs i = 0..d/2-1
    (seed 001 "Rotary Position Embedding"; seed 002 §8.2). positions: integer (..., T)
    -> two arrays (..., T, head_dim/2), computed in float64 and returned in ``dtype``."""
    inv_freq = base ** (-np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)  # θ_i
    angle = np.asarray(positions, dtype=np.float64)[..., None] * inv_freq  # (..., T, d/2)
    return np.cos(angle).astype(dtype), np.sin(angle).astype(dtype)


def rotary_forward(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> tuple[np.ndarray, tuple]:
    """Rotate each pair (x_2i, x_2i+1) by the angle m θ_i (seed 002 §8.2, eqs. 33-34):

        [x_2i, x_2i+1] -> [x_2i cos - x_2i+1 sin,  x_2i sin + x_2i+1 cos]

    x: (B, nh, T, hs); cos, sin: (T, hs/2) or (B, 1, T, hs/2)."""
    x_even, x_odd = x[..., 0::2], x[..., 1::2]  # (B, nh, T, hs/2)
    out = np.empty_like(x)
    out[..., 0::2] = x_even * cos - x_odd * sin
    out[..., 1::2] = x_even * sin + x_odd * cos
    return out, (cos, sin)


def rotary_backward(dout: np.ndarray, cache: tuple) -> np.ndarray:
    """A rotation R(mθ) is orthogonal, so the gradient goes back through R^T = R(-mθ):

    [g_2i, g_2i+1] -> [g_2i cos + g_2i+1 sin,  -g_2i sin + g_2i+1 cos]"""
    cos, sin = cache
    d_even, d_odd = dout[..., 0::2], dout[..., 1::2]
    dx = np.empty_like(dout)
    dx[..., 0::2] = d_even * cos + d_odd * sin
    dx[..., 1::2] = d_odd * cos - d_even * sin
    return dx
