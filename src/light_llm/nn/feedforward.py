"""Position-wise feed-forward networks (seed 000 §4; seed 001 "Feed-Forward Networks";
seed 002 §9.1 eq. 39, §12.1 eq. 50)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd.function import once_differentiable

from light_llm.config import ModelConfig
from light_llm.nn.linear import Linear


def activation_fn(name: str, x: torch.Tensor) -> torch.Tensor:
    """The non-linearity σ of the FFN:

    gelu       GELU(x) = x Φ(x), Φ the standard normal CDF (seed 000 §4)
    gelu_tanh  0.5 x (1 + tanh(sqrt(2/π) (x + 0.044715 x³))), GPT-2's approximation (seed 000 §4)
    relu       max(0, x) (seed 001 "Feed-Forward Networks")
    relu2      max(0, x)², ReLU squared (seed 001's ReLU, squared; the NanoGPT speedrun's FFN)
    """
    if name == "gelu":
        return F.gelu(x)
    if name == "gelu_tanh":
        return F.gelu(x, approximate="tanh")
    if name == "relu2":
        return ReLUSquared.apply(x)
    return F.relu(x)


class ReLUSquared(torch.autograd.Function):
    """relu2(x) = max(0, x)² with its derivative written out: d relu2 / dx = 2 max(0, x).

    Autograd would differentiate ``relu(x).square()`` as two steps (a power's backward, then
    ReLU's mask), three passes over the (B, T, d_ff) hidden tensor; here the backward is one
    product with the saved r = max(0, x), which is already zero where x <= 0. Measured on the
    char-cpu shape (4 layers, d_ff 512), autograd's two steps were about a third of a training
    step on a 2-core CPU. The NumPy engine's twin is ``reference/activations.py``."""

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        r = torch.relu(x)
        ctx.save_for_backward(r)
        return r * r

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_output: torch.Tensor) -> torch.Tensor:
        (r,) = ctx.saved_tensors
        return torch.mul(r, grad_output).mul_(2.0)


class MLP(nn.Module):
    """FFN(x) = Dropout(σ(x W_1 + b_1) W_2 + b_2), W_1: d -> d_ff, W_2: d_ff -> d (seed 000 §4),
    σ any of :func:`activation_fn`'s.

    Weight names follow GPT-2 (``c_fc`` = W_1, ``c_proj`` = W_2) so checkpoints map directly.
    """

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.activation = config.activation
        self.c_fc = Linear(config.n_embd, config.ffn_hidden, bias=config.bias)
        self.c_proj = Linear(config.ffn_hidden, config.n_embd, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)

    def hidden(self, x: torch.Tensor) -> torch.Tensor:  # (B, T, d) -> (B, T, d_ff)
        """The hidden units σ(x W_1 + b_1), before W_2."""
        return activation_fn(self.activation, self.c_fc(x))

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, T, d) -> (B, T, d)
        return self.dropout(self.c_proj(self.hidden(x)))


class SwiGLU(nn.Module):
    """SwiGLU(x) = (Swish(x W_1) ⊙ (x V)) W_2, Swish(z) = z σ(z) (seed 001 "SwiGLU", β = 1).

    ``c_fc`` = W_1 (the Swish gate), ``c_v`` = V (the linear value), ``c_proj`` = W_2.
    """

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.c_fc = Linear(config.n_embd, config.ffn_hidden, bias=config.bias)
        self.c_v = Linear(config.n_embd, config.ffn_hidden, bias=config.bias)
        self.c_proj = Linear(config.ffn_hidden, config.n_embd, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)

    def hidden(self, x: torch.Tensor) -> torch.Tensor:  # (B, T, d) -> (B, T, d_ff)
        """The hidden units Swish(x W_1) ⊙ (x V), before W_2."""
        return F.silu(self.c_fc(x)) * self.c_v(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, T, d) -> (B, T, d)
        return self.dropout(self.c_proj(self.hidden(x)))


def build_feedforward(config: ModelConfig) -> nn.Module:
    """The FFN the config asks for."""
    return SwiGLU(config) if config.activation == "swiglu" else MLP(config)
