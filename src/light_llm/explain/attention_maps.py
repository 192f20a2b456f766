"""Attention weights of a trained model for a prompt, per layer and head, as pictures.

``GPT.attention_maps`` runs the prompt through the explicit attention formula and returns
A = softmax(Q K^T / sqrt(d_k)) with the causal mask for every layer (seed 000 §3);
``BertEncoder.attention_maps`` the same without the mask (bidirectional, seed 003 §16-25),
over the prompt with [CLS] and [SEP] around it; a GPT with linear attention its weights
φ(q_i)·φ(k_j) / Σ_{j'<=i} φ(q_i)·φ(k_j') (seed 002 §11.3, eq. 48). This module checks the
request against the model (context length, layer and head ranges), picks the layers and heads
asked for and draws them with the tokens on both axes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from light_llm.errors import ConfigError, TokenizerError
from light_llm.explain import plots
from light_llm.models.bert import BertEncoder


@dataclass(frozen=True)
class PromptAttention:
    """The attention weights of one prompt: ``maps[a, b]`` is the (T, T) matrix of layer
    ``layers[a]``, head ``heads[b]``; row i is what token i attends to."""

    tokens: list[str]
    ids: list[int]
    layers: list[int]
    heads: list[int]
    maps: np.ndarray  # (len(layers), len(heads), T, T)


def token_label(token: str) -> str:
    """A token as an axis label: spaces and newlines made visible, '$' kept literal."""
    visible = token.replace(" ", "␣").replace("\n", "\\n").replace("\t", "\\t")
    return visible.replace("$", r"\$") or "''"


def checked_index(kind: str, index: int | None, count: int) -> list[int]:
    """[index] if it is in 0..count-1, every index when None; ConfigError naming the range."""
    if index is None:
        return list(range(count))
    if not 0 <= index < count:
        raise ConfigError(f"{kind} {index} does not exist: the model has {kind}s 0 to {count - 1}.")
    return [index]


def model_input_ids(model, tokenizer, prompt: str) -> list[int]:
    """The ids the model sees for ``prompt``: its tokens, with [CLS] ... [SEP] around them for
    an encoder (seed 003 §3), never truncated."""
    if isinstance(model, BertEncoder):
        return tokenizer.encode_plus(prompt, truncation=False)["input_ids"]
    return tokenizer.encode(prompt)


def context_error(n_tokens: int, block_size: int) -> str:
    """The sentence for a prompt longer than the model's context."""
    return (
        f"the prompt is {n_tokens} tokens long, but the model's context holds at most "
        f"{block_size} tokens (1 to {block_size})."
    )


def prompt_attention(
    model, tokenizer, prompt: str, layer: int | None = None, head: int | None = None
) -> PromptAttention:
    """The attention weights of ``model`` for ``prompt``, for one layer / head or all of them.

    A model with linear attention gives the weights a_ij = φ(q_i)·φ(k_j) / Σ_{j'<=i}
    φ(q_i)·φ(k_j') its output averages the values with (seed 002 §11.3, eq. 48), which its
    running sums never form as a matrix.

    Raises ConfigError when the layer or head does not exist or when the prompt is longer than
    the model's context; TokenizerError when the prompt has no tokens.
    """
    config = model.config
    layers = checked_index("layer", layer, config.n_layer)
    heads = checked_index("head", head, config.n_head)
    if not tokenizer.encode(prompt):
        raise TokenizerError("the prompt has no tokens: give some text.")
    ids = model_input_ids(model, tokenizer, prompt)
    if len(ids) > config.block_size:
        raise ConfigError(context_error(len(ids), config.block_size))
    idx = torch.tensor([ids], dtype=torch.long, device=model.device)
    was_training = model.training
    model.eval()
    try:
        per_layer = model.attention_maps(idx)  # n_layer x (1, nh, T, T)
    finally:
        model.train(was_training)
    maps = torch.stack([per_layer[i][0, heads] for i in layers])  # (layers, heads, T, T)
    return PromptAttention(tokenizer.tokens(ids), ids, layers, heads, maps.float().cpu().numpy())


def span(kind: str, indices: Sequence[int]) -> str:
    """ "layer 3" or "layers 0-5"."""
    if len(indices) == 1:
        return f"{kind} {indices[0]}"
    return f"{kind}s {indices[0]}-{indices[-1]}"


def write_attention_figures(attention: PromptAttention, out: str | Path, title: str) -> list[Path]:
    """Draw the weights. ``out`` ending in .png: one file, a grid of layers x heads. Otherwise a
    folder: one file per layer, ``attention_layer{L}.png``, a row of its heads."""
    out = Path(out)
    labels = [token_label(token) for token in attention.tokens]
    if out.suffix.lower() == ".png":
        heading = f"{title}\n{span('layer', attention.layers)}, {span('head', attention.heads)}"
        return [
            plots.attention_maps_figure(
                out, attention.maps, labels, attention.layers, attention.heads, heading
            )
        ]
    written = []
    for row, layer in enumerate(attention.layers):
        heading = f"{title}\nlayer {layer}, {span('head', attention.heads)}"
        path = out / f"attention_layer{layer}.png"
        written.append(
            plots.attention_maps_figure(
                path,
                attention.maps[row : row + 1],
                labels,
                [layer],
                attention.heads,
                heading,
            )
        )
    return written
