"""Normalisation layers: LayerNorm and RMSNorm (seed 000 §5; seed 001 "Layer Normalization")."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from light_llm.config import ModelConfig


class LayerNorm(nn.Module):
    """LayerNorm(x) = γ ⊙ (x - μ) / sqrt(σ² + ε) + β, statistics over the last (feature)
    dimension (seed 000 §5; seed 001, with ε = 1e-5). β is omitted when ``bias`` is False."""

    def __init__(self, dim: int, eps: float = 1e-5, bias: bool = True) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))  # γ
        self.bias = nn.Parameter(torch.zeros(dim)) if bias else None  # β

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, self.eps)


class RMSNorm(nn.Module):
    """RMSNorm(x) = γ ⊙ x / RMS(x), RMS(x) = sqrt(mean(x²) + ε) (seed 001 "RMSNorm"):
    no mean subtraction and no β."""

    def __init__(self, dim: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))  # γ

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(x, self.weight.shape, self.weight, self.eps)


def rms_normalize(x: torch.Tensor, eps: float) -> torch.Tensor:
    """x / RMS(x) over the last dimension, RMSNorm without a gain (seed 001 "RMSNorm"):
    QK-norm applies it to each head's queries and keys, so that |q · k| <= d_k whatever
    the weights (the softmax's inputs cannot grow without bound)."""
    return F.rms_norm(x, (x.size(-1),), None, eps)


def build_norm(config: ModelConfig) -> nn.Module:
    """The normalisation layer the config asks for."""
    if config.norm == "rmsnorm":
        return RMSNorm(config.n_embd, config.norm_eps)
    return LayerNorm(config.n_embd, config.norm_eps, bias=config.bias)
