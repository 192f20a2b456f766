"""Position information: sinusoidal tables and rotary embeddings (RoPE).

Learned position embeddings are a plain ``nn.Embedding`` (seed 000 §2, ``P[i]``) and live in
the model; this file holds the two that are formulas.
"""

from __future__ import annotations

import torch
from torch import nn


def sinusoidal_table(
    n_positions: int, dim: int, base: float = 10000.0, dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """Sinusoidal position encodings (seed 001 "Position Encodings"; seed 002 §8.2, eqs. 31-32;
    seed 003 §9 with base n = 100; seed 004):

        PE(pos, 2i)   = sin(pos / base^(2i / d))
        PE(pos, 2i+1) = cos(pos / base^(2i / d))

    Computed in float64, returned in ``dtype``: shape (n_positions, dim).
    """
    position = torch.arange(n_positions, dtype=torch.float64)[:, None]  # (T, 1)
    two_i = torch.arange(0, dim, 2, dtype=torch.float64)[None, :]  # (1, d/2)
    angle = position / base ** (two_i / dim)  # (T, d/2)
    table = torch.empty(n_positions, dim, dtype=torch.float64)
    table[:, 0::2] = torch.sin(angle)
    table[:, 1::2] = torch.cos(angle)
    return table.to(dtype)


def rope_angles(
    positions: torch.Tensor,
    head_dim: int,
    base: float = 10000.0,
    dtype: torch.dtype = torch.float32,
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos(m θ_i) and sin(m θ_i) for RoPE, with θ_i = base^(-2i/d) (seed 001 "Rotary Position
    Embedding"; seed 002 §8.2). ``positions``: (..., T) integer positions m.
    Computed in float64; returns two ``dtype`` tensors of shape (..., T, head_dim/2)."""
    inv_freq = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    angle = positions.to(torch.float64)[..., None] * inv_freq  # (..., T, d/2)
    return torch.cos(angle).to(dtype), torch.sin(angle).to(dtype)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate each consecutive pair (x_2i, x_2i+1) by the angle m θ_i (seed 002 §8.2, eqs. 33-34):

        [x_2i, x_2i+1] -> [x_2i cos - x_2i+1 sin,  x_2i sin + x_2i+1 cos]

    so that q_m · k_n depends only on m - n. ``x``: (B, nh, T, hs); ``cos``/``sin``:
    (T, hs/2) or (B, 1, T, hs/2).

    In eager mode each pair is read as the complex number z = x_2i + i x_2i+1 and multiplied
    by e^{i m θ_i} = cos + i sin: exactly the rotation above, in one kernel (2.5x faster than
    the pairs taken apart and stacked, forward and backward, on a CPU). Under torch.compile,
    which does not generate code for complex numbers, the pairs are rotated as written above
    and the compiler fuses that instead.
    """
    if torch.compiler.is_compiling():
        x_even, x_odd = x[..., 0::2], x[..., 1::2]  # (B, nh, T, hs/2) each
        rotated_pairs = (x_even * cos - x_odd * sin, x_even * sin + x_odd * cos)
        return torch.stack(rotated_pairs, dim=-1).flatten(-2).to(x.dtype)
    work = torch.promote_types(x.dtype, torch.float32)  # complex needs float32 or float64
    pairs = x.to(work).contiguous().reshape(*x.shape[:-1], -1, 2)  # (B, nh, T, hs/2, 2)
    rotation = torch.complex(cos.to(work), sin.to(work))  # e^{i m θ_i}
    rotated = torch.view_as_complex(pairs) * rotation
    return torch.view_as_real(rotated).flatten(-2).to(x.dtype)


class FixedTables(nn.Module):
    """Tables that are formulas, not parameters: not saved, and recomputed in float64 whenever
    the module changes dtype or device (so ``model.double()`` gets exact tables, not widened
    float32 ones)."""

    def build(self, dtype: torch.dtype) -> dict[str, torch.Tensor]:
        raise NotImplementedError

    def register_tables(self, dtype: torch.dtype = torch.float32) -> None:
        for name, table in self.build(dtype).items():
            self.register_buffer(name, table, persistent=False)

    def _apply(self, fn, recurse=True):
        super()._apply(fn, recurse)
        first = next(iter(self.buffers()))
        for name, table in self.build(first.dtype).items():
            setattr(self, name, table.to(first.device))
        return self


class SinusoidalPositions(FixedTables):
    """A fixed (not learned) table of sinusoidal encodings, looked up like P[i]."""

    def __init__(self, n_positions: int, dim: int, base: float) -> None:
        super().__init__()
        self.n_positions, self.dim, self.base = n_positions, dim, base
        self.register_tables()

    def build(self, dtype: torch.dtype) -> dict[str, torch.Tensor]:
        return {"table": sinusoidal_table(self.n_positions, self.dim, self.base, dtype)}

    def forward(self, positions: torch.Tensor) -> torch.Tensor:  # (..., T) -> (..., T, d)
        return self.table[positions]


class RotaryTables(FixedTables):
    """cos(m θ_i), sin(m θ_i) for every position m < n_positions, looked up per token."""

    def __init__(self, n_positions: int, head_dim: int, base: float) -> None:
        super().__init__()
        self.n_positions, self.head_dim, self.base = n_positions, head_dim, base
        self.register_tables()

    def build(self, dtype: torch.dtype) -> dict[str, torch.Tensor]:
        cos, sin = rope_angles(torch.arange(self.n_positions), self.head_dim, self.base, dtype)
        return {"cos": cos, "sin": sin}  # (T_max, hs/2) each

    def forward(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """positions (T,) -> (T, hs/2) each; (B, T) -> (B, 1, T, hs/2) each (heads broadcast)."""
        cos, sin = self.cos[positions], self.sin[positions]
        if positions.dim() == 2:
            cos, sin = cos[:, None], sin[:, None]
        return cos, sin
