"""Attention maps of a GPT for a prompt against a NumPy forward pass written here (pre-LN
blocks, learned positions, exact GELU), and the range checks."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from light_llm.config import ModelConfig
from light_llm.errors import ConfigError, TokenizerError
from light_llm.explain.attention_maps import prompt_attention, token_label
from light_llm.models.gpt import GPT
from light_llm.tokenizers import CharTokenizer
from tests.conftest import tiny_config

TEXT = "the cat sat on the mat"


@pytest.fixture(scope="module")
def model_and_tokenizer():
    tokenizer = CharTokenizer.from_text(TEXT)
    torch.manual_seed(3)
    config = ModelConfig(
        vocab_size=tokenizer.vocab_size, block_size=16, n_layer=2, n_head=2, n_embd=8
    )
    model = GPT(config)
    with torch.no_grad():  # larger weights than the N(0, 0.02) init, so the maps are not flat
        for parameter in model.parameters():
            parameter.normal_(0.0, 0.5)
    return model.eval(), tokenizer


def numpy_attention_maps(model: GPT, ids: list[int]) -> list[np.ndarray]:
    """softmax(Q K^T / sqrt(d_k)) with the causal mask per layer, from the weights alone."""
    w = {name: t.detach().double().numpy() for name, t in model.state_dict().items()}
    n_head, d = model.config.n_head, model.config.n_embd
    hs = d // n_head
    t = len(ids)

    def layer_norm(x, prefix):
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / np.sqrt(var + 1e-5) * w[f"{prefix}.weight"] + w[f"{prefix}.bias"]

    def linear(x, prefix):
        return x @ w[f"{prefix}.weight"].T + w[f"{prefix}.bias"]

    gelu = np.vectorize(lambda z: 0.5 * z * (1.0 + math.erf(z / math.sqrt(2.0))))
    x = w["transformer.wte.weight"][ids] + w["transformer.wpe.weight"][:t]
    maps = []
    for i in range(model.config.n_layer):
        p = f"transformer.h.{i}"
        qkv = linear(layer_norm(x, f"{p}.ln_1"), f"{p}.attn.c_attn")
        q, k, v = (
            qkv[:, j * d : (j + 1) * d].reshape(t, n_head, hs).transpose(1, 0, 2) for j in range(3)
        )
        scores = q @ k.transpose(0, 2, 1) / math.sqrt(hs)
        scores = np.where(np.tril(np.ones((t, t), dtype=bool)), scores, -np.inf)
        weights = np.exp(scores - scores.max(-1, keepdims=True))
        weights /= weights.sum(-1, keepdims=True)
        maps.append(weights)
        heads = (weights @ v).transpose(1, 0, 2).reshape(t, d)
        x = x + linear(heads, f"{p}.attn.c_proj")
        x = x + linear(gelu(linear(layer_norm(x, f"{p}.ln_2"), f"{p}.mlp.c_fc")), f"{p}.mlp.c_proj")
    return maps


def test_maps_match_numpy_for_every_layer_and_head(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    prompt = "the cat sat"
    got = prompt_attention(model, tokenizer, prompt)
    expected = numpy_attention_maps(model, tokenizer.encode(prompt))
    assert got.layers == [0, 1] and got.heads == [0, 1]
    assert got.tokens == list(prompt)
    np.testing.assert_allclose(got.maps, np.stack(expected), atol=2e-5)
    assert np.ptp(got.maps[1, 0]) > 0.1  # not a flat picture


def test_one_layer_and_head(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    got = prompt_attention(model, tokenizer, "the mat", layer=1, head=0)
    expected = numpy_attention_maps(model, tokenizer.encode("the mat"))
    assert got.maps.shape == (1, 1, 7, 7)
    np.testing.assert_allclose(got.maps[0, 0], expected[1][0], atol=2e-5)


@pytest.mark.parametrize(
    "options, message",
    [
        ({"layer": 2}, "layer 2 does not exist: the model has layers 0 to 1"),
        ({"layer": -1}, "layers 0 to 1"),
        ({"head": 5}, "head 5 does not exist: the model has heads 0 to 1"),
    ],
)
def test_out_of_range_layer_or_head(model_and_tokenizer, options, message):
    model, tokenizer = model_and_tokenizer
    with pytest.raises(ConfigError, match=message):
        prompt_attention(model, tokenizer, "the", **options)


def test_prompt_longer_than_the_context(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    with pytest.raises(ConfigError, match="17 tokens long.*at most 16 tokens"):
        prompt_attention(model, tokenizer, "the cat sat on th")


def test_empty_prompt(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    with pytest.raises(TokenizerError, match="no tokens"):
        prompt_attention(model, tokenizer, "")


def test_linear_attention_maps_give_each_layers_output():
    """A linear-attention model's map holds the weights a_ij of seed 002 eq. 48: causal, each
    row summing to 1, and the layer's own output (computed from running sums, never a T x T
    matrix) is c_proj(Σ_j a_ij v_j) with the map's a."""
    tokenizer = CharTokenizer.from_text(TEXT)
    torch.manual_seed(5)
    config = tiny_config(vocab_size=tokenizer.vocab_size, n_embd=8, attention="linear")
    model = GPT(config).eval()
    seen = {}

    def keep(module, args, kwargs, output):
        seen[module] = (args[0], kwargs.get("rope"), output)

    hooks = [
        attn.register_forward_hook(keep, with_kwargs=True) for attn in model.attention_layers()
    ]
    try:
        maps = prompt_attention(model, tokenizer, "the cat sat").maps  # (layers, heads, T, T)
    finally:
        for hook in hooks:
            hook.remove()
    T = maps.shape[-1]
    np.testing.assert_allclose(maps.sum(-1), 1.0, rtol=1e-5)
    assert np.all(np.triu(maps, k=1) == 0)
    for layer, attn in enumerate(model.attention_layers()):
        x, rope, output = seen[attn]
        with torch.no_grad():
            _, _, v = attn.queries_keys_values(x, rope)  # (1, nh, T, hs)
            heads = torch.from_numpy(maps[layer]).to(v.dtype)[None] @ v
            rebuilt = attn.c_proj(heads.transpose(1, 2).reshape(1, T, config.n_embd))
        torch.testing.assert_close(rebuilt, output, rtol=1e-4, atol=1e-5)


def test_token_labels_are_visible_and_literal():
    assert token_label(" the") == "␣the"
    assert token_label("\n") == "\\n"
    assert token_label(" $5") == "␣\\$5"
