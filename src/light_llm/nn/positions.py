"""Position information: sinusoidal tables and rotary embeddings (RoPE).

Learned position embeddings are a plain ``nn.Embedding`` (seed 000 §2, ``P[i]``) and live in
the model; this file holds the two that are formulas.
"""

from __future__ import annotations

import torch
from torch import nn


def sinusoidal_table(n_positions: int, dim: int, base: float = 10000.0) -> torch.Tensor:
    """Sinusoidal position encodings (seed 001 "Position Encodings"; seed 002 §8.2, eqs. 31-32;
    seed 003 §9 with base n = 100; seed 004):

        PE(pos, 2i)   = sin(pos / base^(2i / d))
        PE(pos, 2i+1) = cos(pos / base^(2i / d))

    Returns a float64-accurate float32 tensor of shape (n_positions, dim).
    """
    position = torch.arange(n_positions, dtype=torch.float64)[:, None]  # (T, 1)
    two_i = torch.arange(0, dim, 2, dtype=torch.float64)[None, :]  # (1, d/2)
    angle = position / base ** (two_i / dim)  # (T, d/2)
    table = torch.empty(n_positions, dim, dtype=torch.float64)
    table[:, 0::2] = torch.sin(angle)
    table[:, 1::2] = torch.cos(angle)
    return table.float()


def rope_angles(
    positions: torch.Tensor, head_dim: int, base: float = 10000.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos(m θ_i) and sin(m θ_i) for RoPE, with θ_i = base^(-2i/d) (seed 001 "Rotary Position
    Embedding"; seed 002 §8.2). ``positions``: (..., T) integer positions m.
    Returns two tensors of shape (..., T, head_dim/2)."""
    inv_freq = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    angle = positions.to(torch.float64)[..., None] * inv_freq  # (..., T, d/2)
    return torch.cos(angle).float(), torch.sin(angle).float()


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate each consecutive pair (x_2i, x_2i+1) by the angle m θ_i (seed 002 §8.2, eqs. 33-34):

        [x_2i, x_2i+1] -> [x_2i cos - x_2i+1 sin,  x_2i sin + x_2i+1 cos]

    so that q_m · k_n depends only on m - n. ``x``: (B, nh, T, hs); ``cos``/``sin``:
    (T, hs/2) or (B, 1, T, hs/2).
    """
    x_even, x_odd = x[..., 0::2], x[..., 1::2]  # (B, nh, T, hs/2) each
    rotated_even = x_even * cos - x_odd * sin
    rotated_odd = x_even * sin + x_odd * cos
    return torch.stack((rotated_even, rotated_odd), dim=-1).flatten(-2).to(x.dtype)


class SinusoidalPositions(nn.Module):
    """A fixed (not learned) table of sinusoidal encodings, looked up like P[i]."""

    def __init__(self, n_positions: int, dim: int, base: float) -> None:
        super().__init__()
        self.register_buffer("table", sinusoidal_table(n_positions, dim, base), persistent=False)

    def forward(self, positions: torch.Tensor) -> torch.Tensor:  # (..., T) -> (..., T, d)
        return self.table[positions]
