"""Logit soft-capping: a smooth bound on the output logits (Gemma 2; the NanoGPT speedrun)."""

from __future__ import annotations

import torch


def soft_cap(logits: torch.Tensor, cap: float) -> torch.Tensor:
    """c · tanh(z / c): close to z where |z| << c, never beyond ±c (the slope at 0 is 1).

    It bounds how confident the model can become (at most e^{2c} between two tokens), so that
    the loss cannot be lowered by growing logits without end. The element-wise formula, with
    no seed section of its own: the tanh of seed 000 §4's GELU approximation, scaled."""
    return cap * torch.tanh(logits / cap)
