"""LoRA: low-rank adaptation of a trained linear layer (Hu et al., 2021, "LoRA: Low-Rank
Adaptation of Large Language Models"; seed 002 §16.2 names parameter-efficient fine-tuning as
the next step after the transformer).

A frozen weight W (d_out, d_in) is adapted by a product of two small trained matrices:

    W' = W + (α / r) B A          A: (r, d_in),  B: (d_out, r),  r << min(d_in, d_out)
    y  = x W^T + b + (α / r) (dropout(x) A^T) B^T

B starts at zero, so at the start W' = W and the adapted model computes exactly what the
base computes; A starts random (Kaiming-uniform, as ``nn.Linear`` initialises its weight), so
that B's first gradient, (α/r) dY^T (x A^T), is not zero. Only A and B are trained: r (d_in +
d_out) numbers per layer instead of d_in d_out. Dropout acts on the input of the A path only.
After training, :func:`merge_lora` folds (α/r) B A into W: a plain model again, as fast as the
base.

The adapted layers are chosen by name (``c_attn``, ``c_proj``, ``c_fc``, ``c_v``,
``lm_head``, or a longer suffix such as ``mlp.c_proj``). The NumPy engine's twin, with its
backward pass by hand, is :mod:`light_llm.reference.lora`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from light_llm.errors import ConfigError
from light_llm.limits import check_real
from light_llm.nn.linear import Linear

LORA_PARAMETERS = ("lora_A", "lora_B")


class LoRALinear(nn.Linear):
    """A linear layer y = x W^T + b with a low-rank update (Hu et al. 2021):

        y = x W^T + b + (α / r) (dropout(x) A^T) B^T,    i.e.   W' = W + (α / r) B A

    ``weight`` (d_out, d_in) and ``bias`` are the base layer's (frozen by :func:`add_lora`);
    ``lora_A`` (r, d_in) and ``lora_B`` (d_out, r) are the trained adapters, B zero at the
    start. The state dict keeps the base's names (``weight``, ``bias``) beside ``lora_A`` and
    ``lora_B``, so base checkpoints load into it unchanged.
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        rank: int,
        alpha: float,
        dropout: float = 0.0,
        bias: bool = True,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__(in_features, out_features, bias=bias, device=device, dtype=dtype)
        check_rank(rank, in_features, out_features)
        self.rank = rank
        self.alpha = alpha
        self.scaling = alpha / rank  # α / r
        self.lora_A = nn.Parameter(torch.empty(rank, in_features, device=device, dtype=dtype))
        self.lora_B = nn.Parameter(torch.zeros(out_features, rank, device=device, dtype=dtype))
        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))  # nn.Linear's own init
        self.lora_dropout = nn.Dropout(dropout)

    @classmethod
    def adapting(
        cls, linear: nn.Linear, rank: int, alpha: float, dropout: float = 0.0
    ) -> LoRALinear:
        """A LoRALinear around ``linear``'s own weight and bias tensors (shared, not copied)."""
        layer = cls(
            linear.in_features,
            linear.out_features,
            rank,
            alpha,
            dropout,
            bias=linear.bias is not None,
            device=linear.weight.device,
            dtype=linear.weight.dtype,
        )
        layer.weight = linear.weight
        layer.bias = linear.bias
        return layer

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (..., d_in) -> (..., d_out)
        base = F.linear(x, self.weight, self.bias)  # x W^T + b, exactly the base layer
        low_rank = F.linear(self.lora_dropout(x), self.lora_A)  # (..., r)
        return base + self.scaling * F.linear(low_rank, self.lora_B)

    def merged_weight(self) -> torch.Tensor:
        """W' = W + (α / r) B A: (d_out, d_in)."""
        return self.weight + self.scaling * (self.lora_B @ self.lora_A)

    def merged(self) -> Linear:
        """A plain linear layer (:class:`~light_llm.nn.linear.Linear`) computing x W'^T + b, the
        adapters folded in."""
        linear = Linear(
            self.in_features,
            self.out_features,
            bias=self.bias is not None,
            device=self.weight.device,
            dtype=self.weight.dtype,
        )
        with torch.no_grad():
            linear.weight.copy_(self.merged_weight())
            if self.bias is not None:
                linear.bias.copy_(self.bias)
        return linear

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, rank={self.rank}, alpha={self.alpha:g}"


def check_rank(
    rank: int, in_features: int | None = None, out_features: int | None = None, name: str = ""
) -> None:
    """ConfigError unless 0 < rank <= min(d_in, d_out) (the bound when the sizes are given):
    a larger rank adds nothing that a full update of W would not, at a larger cost."""
    where = f" of {name} ({out_features} x {in_features})" if name else ""
    if not isinstance(rank, int) or isinstance(rank, bool) or rank < 1:
        raise ConfigError(f"the LoRA rank must be a positive integer, got {rank!r}.")
    if in_features is not None and rank > min(in_features, out_features):
        raise ConfigError(
            f"the LoRA rank {rank} is larger than the layer{where}: it must be at most "
            f"{min(in_features, out_features)}."
        )


def linear_layers(model: nn.Module) -> dict[str, nn.Linear]:
    """Every linear layer of ``model`` by its qualified name (``transformer.h.0.attn.c_attn``)."""
    modules = model.named_modules()
    return {name: module for name, module in modules if isinstance(module, nn.Linear)}


def layer_kinds(model: nn.Module) -> list[str]:
    """The names a LoRA target can give: the last part of each linear layer's name, sorted."""
    return sorted({name.rsplit(".", 1)[-1] for name in linear_layers(model)})


def parse_targets(targets: str | Sequence[str]) -> list[str]:
    """``"c_attn, c_proj"`` or a sequence of names -> a list of names (no blanks)."""
    if isinstance(targets, str):
        targets = targets.split(",")
    if not isinstance(targets, Sequence) or not all(isinstance(name, str) for name in targets):
        raise ConfigError(f"the LoRA targets are layer names such as c_attn, got {targets!r}.")
    names = [name.strip() for name in targets if name.strip()]
    if not names:
        raise ConfigError("the LoRA targets name no layer (give e.g. c_attn,c_proj,c_fc).")
    return names


def matched_layers(model: nn.Module, targets: Sequence[str]) -> list[str]:
    """The qualified names of the linear layers that ``targets`` name (a target matches a
    layer whose name equals it or ends with ``.target``); ConfigError for a target that
    names no layer, listing the layer names there are."""
    layers = linear_layers(model)
    chosen: list[str] = []
    for target in targets:
        found = [name for name in layers if name == target or name.endswith("." + target)]
        if not found:
            raise ConfigError(
                f"the LoRA target {target!r} names no linear layer of this model; its layers "
                f"are {', '.join(layer_kinds(model))}."
            )
        chosen += [name for name in found if name not in chosen]
    return chosen


def add_lora(
    model: nn.Module,
    targets: str | Sequence[str],
    rank: int,
    alpha: float | None = None,
    dropout: float = 0.0,
) -> list[str]:
    """Adapt the linear layers ``targets`` names with LoRA of rank ``rank`` and scale
    ``alpha`` / ``rank`` (``alpha`` None: the rank, a scale of 1), and freeze every other
    parameter: afterwards only the ``lora_A`` / ``lora_B`` tensors require gradients.
    Returns the qualified names of the adapted layers.

    ConfigError for a target that names no layer, a rank <= 0 or above a layer's
    min(d_in, d_out), and the output head when it is tied to the token embedding (W' would
    change the input table too)."""
    check_rank(rank)
    alpha = check_real("the LoRA alpha", rank if alpha is None else alpha, 0, low_open=True)
    check_real("the LoRA dropout", dropout, 0.0, 1.0, high_open=True)
    if not isinstance(model, nn.Module):
        raise ConfigError(f"LoRA adapts a torch model, not {type(model).__name__}.")
    names = matched_layers(model, parse_targets(targets))
    modules = dict(model.named_modules())
    for name in names:
        linear = modules[name]
        if isinstance(linear, LoRALinear):
            raise ConfigError(f"the layer {name} already has LoRA adapters.")
        check_rank(rank, linear.in_features, linear.out_features, name)
        if any(
            other is not linear and getattr(other, "weight", None) is linear.weight
            for other in modules.values()
        ):
            raise ConfigError(
                f"{name} shares its weight with another layer (a tied output head): adapt an "
                "untied model, or leave it out of the targets."
            )
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    for name in names:
        parent_name, _, child = name.rpartition(".")
        parent = modules[parent_name] if parent_name else model
        setattr(parent, child, LoRALinear.adapting(modules[name], rank, alpha, dropout))
    return names


def lora_layers(model: nn.Module) -> dict[str, LoRALinear]:
    """The adapted layers of ``model`` by qualified name."""
    return {
        name: module for name, module in model.named_modules() if isinstance(module, LoRALinear)
    }


def lora_state(model: nn.Module) -> dict[str, torch.Tensor]:
    """The adapters alone: every ``lora_A`` and ``lora_B`` by its state-dict name."""
    return {
        name: tensor
        for name, tensor in model.state_dict().items()
        if name.rsplit(".", 1)[-1] in LORA_PARAMETERS
    }


def merge_lora(model: nn.Module) -> nn.Module:
    """Fold every adapter into its weight, W <- W + (α / r) B A, replacing each LoRALinear by
    a plain ``nn.Linear``; every parameter requires gradients again. Returns ``model``."""
    if not isinstance(model, nn.Module):
        raise ConfigError(
            f"LoRA adapters are merged into a torch model, not {type(model).__name__}."
        )
    for name, layer in lora_layers(model).items():
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, child, layer.merged())
    for parameter in model.parameters():
        parameter.requires_grad_(True)
    return model
