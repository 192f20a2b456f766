"""The smear: a one-token look-back on the embedding (modded-nanogpt's "smear", issue 25).

On the embedding X_0 = Dropout(E[tokens] + P[positions]), for every position t ≥ 1:

    g_t = λ σ(w · X_0[t, :k]),    k = min(12, d_model)
    X_0'[t] = X_0[t] + g_t X_0[t-1],    X_0'[0] = X_0[0]

w ∈ R^k (``gate``, (k,)) and λ (``gain``, (1,)) are learned, both from 0, so that a fresh
model computes the plain one; both are vectors, so neither takes weight decay (AdamW's decay
goes to matrices). With left padding a real token does not look back at a
pad: g_t is multiplied by mask[t-1] (the first real token of a row has no previous one).
Decoding with a KV cache needs the previous token's X_0[t-1], the cache's
``previous_embedding``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from light_llm.config import ModelConfig, smear_width


class Smear(nn.Module):
    """The smear's gain λ and gate w, and its term g_t X_0[t-1] (module docstring)."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.gain = nn.Parameter(torch.zeros(1))  # λ
        self.gate = nn.Parameter(torch.zeros(smear_width(config)))  # w: (k,)

    def reset_parameters(self) -> None:
        """λ = 0 and w = 0: the smear starts as nothing (the plain model's embedding)."""
        nn.init.zeros_(self.gain)
        nn.init.zeros_(self.gate)

    def gates(self, x: torch.Tensor) -> torch.Tensor:
        """g = λ σ(w · x[..., :k]): (B, T, d) -> (B, T, 1)."""
        return self.gain * torch.sigmoid(x[..., : self.gate.numel()] @ self.gate)[..., None]

    def forward(
        self,
        x: torch.Tensor,
        offset: int = 0,
        previous: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """The smear's term g_t X_0[t-1] (B, T, d) of x = X_0 (B, T, d), whose first token
        sits at position ``offset``; ``previous`` (B, d): X_0[offset - 1] (from the cache);
        ``attention_mask`` (B, offset + T): 1 for real tokens, 0 for left padding."""
        return look_back(x, offset, previous, attention_mask) * self.gates(x)


def look_back(
    x: torch.Tensor,
    offset: int = 0,
    previous: torch.Tensor | None = None,
    attention_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """X_0[t-1] mask[t-1] for every t (B, T, d), 0 where t-1 is before the sequence or a pad."""
    B, T, _ = x.shape
    first = previous[:, None] if offset > 0 and previous is not None else torch.zeros_like(x[:, :1])
    shifted = torch.cat([first, x[:, :-1]], dim=1)  # X_0[t-1]
    if attention_mask is None:
        before = torch.ones(offset + T, dtype=x.dtype, device=x.device).expand(B, -1)
    else:
        before = attention_mask.to(x.dtype)
    before = F.pad(before, (1, 0))[:, offset : offset + T]  # mask[t-1], 0 at t = 0
    return shifted * before[..., None]
