"""The optimiser side of training: global-norm gradient clipping and the optimizer of a run:
AdamW with weight decay on matrices only, or Muon for the block matrices with AdamW for the
rest (:mod:`light_llm.train.muon`). The learning-rate schedule is :mod:`light_llm.schedule`,
shared with the NumPy engine.

    g~      = min(1, c / ||g||_2) g                            (seed 000 §10, seed 002 §4.3, eq. 11)
    AdamW   m, v moments, bias correction, decoupled decay λθ  (seed 000 §7, seed 002 §4.1)
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import torch
from torch import nn

from light_llm.errors import ConfigError
from light_llm.train.config import OPTIMIZERS
from light_llm.train.muon import configure_muon
from light_llm.train.param_groups import embedding_group

if TYPE_CHECKING:
    from light_llm.train.config import TrainConfig


def clip_grad_norm(parameters: Iterable[torch.Tensor], max_norm: float) -> torch.Tensor:
    """Scale all gradients together so that their global L2 norm is at most ``max_norm``
    (seed 000 §10, seed 002 §4.3, eq. 11):

        ||g||_2 = sqrt( sum over every parameter p of sum_i g_p,i^2 )
        g  <-  min(1, c / ||g||_2) g

    One factor for all parameters keeps the direction of the update. Returns ||g||_2 before
    clipping as a 0-d tensor (no device sync). torch's ``clip_grad_norm_`` computes exactly
    this (with c / (||g|| + 1e-6) as the factor), with fused per-device kernels.
    """
    if not max_norm > 0:
        raise ConfigError(f"the clipping threshold must be positive, got {max_norm}.")
    return torch.nn.utils.clip_grad_norm_(list(parameters), max_norm)


def decay_groups(model: nn.Module) -> tuple[list[nn.Parameter], list[nn.Parameter]]:
    """Split the trainable parameters into (decayed, not decayed).

    Weight decay shrinks weights towards 0 (the λθ term of AdamW, seed 000 §7); it is meant
    for the matrices that mix features: every tensor with two or more dimensions (linear
    weights, token and position embeddings). Biases and norm gains (1-D) are not decayed:
    pulling a LayerNorm gain towards 0 would switch its features off. A tied matrix
    (wte = lm_head) is listed once.
    """
    decay, no_decay = [], []
    for parameter in model.parameters():  # parameters() yields a shared tensor once
        if parameter.requires_grad:
            (decay if parameter.dim() >= 2 else no_decay).append(parameter)
    return decay, no_decay


def configure_adamw(
    model: nn.Module,
    weight_decay: float,
    lr: float,
    betas: tuple[float, float],
    device_type: str,
    eps: float = 1e-8,
    embedding_lr: float | None = None,
) -> torch.optim.AdamW:
    """AdamW (seed 000 §7) with decay only on tensors of two or more dimensions
    (:func:`decay_groups`); PyTorch's fused kernel on CUDA and on the CPU (on a 2-core CPU it
    made nanoGPT's CPU recipe's step about 1.3x faster than the multi-tensor one), the
    multi-tensor one elsewhere.

    Per parameter θ with gradient g at step t:
        m = β1 m + (1-β1) g,   v = β2 v + (1-β2) g^2,   m^ = m/(1-β1^t),   v^ = v/(1-β2^t)
        θ = θ - α (m^ / (sqrt(v^) + ε) + λ θ)
    """
    if not 0.0 <= betas[0] < 1.0 or not 0.0 <= betas[1] < 1.0:
        raise ConfigError(f"AdamW betas must lie in [0, 1), got {betas}.")
    if weight_decay < 0:
        raise ConfigError(f"weight decay must be >= 0, got {weight_decay}.")
    tables, in_tables = embedding_group(model, lr, embedding_lr, weight_decay)
    decay, no_decay = decay_groups(model)
    groups = [
        *tables,
        {"params": [p for p in decay if id(p) not in in_tables], "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    backend = {"fused": True} if device_type in ("cuda", "cpu") else {"foreach": True}
    return torch.optim.AdamW(groups, lr=lr, betas=betas, eps=eps, **backend)


def configure_optimizer(
    model: nn.Module, cfg: TrainConfig, device_type: str
) -> torch.optim.Optimizer:
    """The optimizer a (resolved) training config asks for: ``cfg.optimizer`` "adamw"
    (:func:`configure_adamw`) or "muon" (:func:`light_llm.train.muon.configure_muon`: Muon at
    peak ``cfg.muon_lr`` on the block matrices, AdamW at peak ``cfg.lr`` on the rest)."""
    betas = (cfg.beta1, cfg.beta2)
    if cfg.optimizer == "adamw":
        return configure_adamw(
            model, cfg.weight_decay, cfg.lr, betas, device_type, embedding_lr=cfg.embedding_lr
        )
    if cfg.optimizer == "muon":
        return configure_muon(
            model,
            cfg.lr,
            cfg.muon_lr,
            cfg.muon_momentum,
            betas,
            cfg.weight_decay,
            embedding_lr=cfg.embedding_lr,
            orthogonaliser=cfg.muon_orthogonaliser,
            cautious=cfg.cautious_weight_decay,
            normuon=cfg.normuon,
            scale=cfg.muon_scale,
        )
    raise ConfigError(f"unknown optimizer {cfg.optimizer!r}; known: {', '.join(OPTIMIZERS)}.")


def set_learning_rate(optimizer: torch.optim.Optimizer, lr: float) -> None:
    """Set every param group's learning rate to ``lr`` (the schedule's, :func:`learning_rate`)
    times the group's ``lr_ratio`` (1 unless set: Muon's group has muon_lr / lr)."""
    for group in optimizer.param_groups:
        group["lr"] = lr * group.get("lr_ratio", 1.0)


def set_muon_momentum(optimizer: torch.optim.Optimizer, momentum: float) -> None:
    """Set the momentum μ of every Muon param group (``kind`` "muon") to ``momentum`` (the
    config's :meth:`~light_llm.train.config.TrainConfig.muon_momentum_at` this step); an
    optimizer without Muon groups is left as it is."""
    for group in optimizer.param_groups:
        if group.get("kind") == "muon":
            group["momentum"] = momentum
