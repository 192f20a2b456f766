"""The transformer block: attention and FFN sub-layers with residuals, pre-LN or post-LN."""

from __future__ import annotations

import torch
from torch import nn

from light_llm.config import ModelConfig
from light_llm.nn.attention import SelfAttention
from light_llm.nn.feedforward import build_feedforward
from light_llm.nn.norms import build_norm


class Block(nn.Module):
    """One transformer layer (seed 000 §6; seed 002 §9.1, eqs. 35-38; seed 002 §15.3).

    pre-LN  (GPT-2):               x = x + Attn(LN_1(x));   x = x + FFN(LN_2(x))
    post-LN (original, and BERT):  x = LN_1(x + Attn(x));   x = LN_2(x + FFN(x))

    ``causal`` is True for the GPT and False for the encoder: only the mask differs.
    """

    def __init__(self, config: ModelConfig, causal: bool = True) -> None:
        super().__init__()
        if config.embedding_skip:  # (λ, μ): the block reads λ x + μ x_0 (models/gpt.py)
            self.x0_gains = nn.Parameter(torch.tensor([1.0, 0.0]))
        self.pre_norm = config.block_order == "pre"
        self.ln_1 = build_norm(config)
        self.attn = SelfAttention(config, causal=causal)
        self.ln_2 = build_norm(config)
        self.mlp = build_feedforward(config)

    def forward(self, x: torch.Tensor, **attention_kwargs) -> torch.Tensor:  # (B, T, d)
        if self.pre_norm:
            x = x + self.attn(self.ln_1(x), **attention_kwargs)
            return x + self.mlp(self.ln_2(x))
        x = self.ln_1(x + self.attn(x, **attention_kwargs))
        return self.ln_2(x + self.mlp(x))
