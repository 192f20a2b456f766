"""A GPT's weights rounded to int8 (weight-only, per output channel; the formula in
``light_llm/nn/int8.py``), for fast decoding on a CPU.

What is quantised: every linear layer of every block (W^QKV, W^O, W_1, W_2, and SwiGLU's V) and
the output head; the token table with it. A tied model's head *is* its token table, so that one
matrix is quantised once and used both ways (the lookup E[t] = q[t] s_t reads the same int8 rows
the head multiplies by): the model stays one matrix, as it was trained. An untied model's token
table is quantised the same way, by rows. Learned positions, norms and biases stay float.
"""

from __future__ import annotations

import torch
from torch import nn

from light_llm.config import ModelConfig
from light_llm.errors import ConfigError
from light_llm.models.gpt import GPT
from light_llm.nn.int8 import Int8Embedding, Int8Linear, quantize_rows
from light_llm.nn.lora import merge_lora
from light_llm.reference.quantize import non_finite_weight_message


def is_quantized(model: nn.Module) -> bool:
    """Whether ``model``'s token table is int8 (:func:`quantize_gpt` ran on it)."""
    return isinstance(model.transformer.wte, Int8Embedding)


@torch.no_grad()
def quantize_gpt(model: nn.Module, rounded: bool = True) -> nn.Module:
    """Replace, in place, ``model``'s linear layers, head and token table by their int8 forms
    (:func:`light_llm.nn.int8.quantize_rows`); returns the model. The float weights are
    released. ConfigError (naming the tensor) when a weight holds NaN or infinity: its scale
    absmax / 127 would not be a number. LoRA adapters are merged into their weights first.
    ``rounded=False`` only shapes the int8 layers (zeros), for a checkpoint to fill."""
    if not isinstance(model, GPT):  # an encoder's or the NumPy engine's weights are not read
        raise ConfigError(f"quantize_gpt quantizes a PyTorch GPT, not a {type(model).__name__}.")
    if is_quantized(model):
        return model
    if rounded:
        check_finite_weights(model)
    merge_lora(model)  # adapters folded in first, W' = W + (α/r) B A: quantise what runs
    for block in model.transformer.h:
        for parent in (block.attn, block.mlp):
            for name, child in list(parent.named_children()):
                if isinstance(child, nn.Linear):
                    setattr(parent, name, Int8Linear.from_linear(child, rounded))
    table = model.transformer.wte.weight  # E: (V, d)
    embedding = Int8Embedding(*table.shape).to(table.device)
    if rounded:
        embedding.weight, embedding.weight_scale = quantize_rows(table)
    if model.config.tie_embeddings:
        head = Int8Linear(table.size(1), table.size(0), bias=False).to(table.device)
        head.weight, head.weight_scale = embedding.weight, embedding.weight_scale  # one matrix
    else:
        head = Int8Linear.from_linear(model.lm_head, rounded)
    model.transformer.wte = embedding
    model.lm_head = head
    return model


def check_finite_weights(model: nn.Module) -> None:
    """ConfigError naming the first weight of ``model`` that holds NaN or infinity."""
    for name, tensor in model.state_dict().items():
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            raise ConfigError(non_finite_weight_message(name))


def empty_quantized_gpt(config: ModelConfig) -> nn.Module:
    """A GPT of ``config`` in its int8 form, to load an int8 checkpoint into (its values are
    placeholders until then)."""
    from light_llm.models.gpt import GPT

    return quantize_gpt(GPT(config), rounded=False)
