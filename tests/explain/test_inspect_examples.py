"""The worked examples of looking inside (logit-lens, attribution, ablation, patching) against
the tiny model's forward written out here in plain NumPy from its weights (seed 000's formulas),
not with light-llm's functions."""

from __future__ import annotations

import math

import numpy as np
import pytest

from light_llm import explain
from light_llm.explain.inspect_examples import PATCH_CLEAN, PATCH_CORRUPT, PROMPT, tiny_model


def values(name: str) -> list[np.ndarray]:
    return [np.asarray(step.value, dtype=np.float64) for step in explain.run(name)]


def layer_norm(x, gain):
    centred = x - x.mean(-1, keepdims=True)
    return gain * centred / np.sqrt((centred**2).mean(-1, keepdims=True) + 1e-5)


def softmax(x):
    shifted = np.exp(x - x.max(-1, keepdims=True))
    return shifted / shifted.sum(-1, keepdims=True)


def gelu(x):
    return x * 0.5 * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


def forward(tokens, drop_head=None, clean_resid=None, at=None):
    """(x_0, head outputs (2, T, 4), x_mid, x_1, logits) of the tiny one-layer GPT; with
    ``drop_head`` that head's output is zero; with ``clean_resid`` and ``at`` = (stage,
    position), that residual is taken from ``clean_resid`` (stage 0: entering, 1: leaving)."""
    w = {k: v.detach().numpy() for k, v in tiny_model().state_dict().items()}
    p = "transformer.h.0."
    T = len(tokens)
    x0 = w["transformer.wte.weight"][tokens] + w["transformer.wpe.weight"][:T]
    if at is not None and at[0] == 0:
        x0[at[1]] = clean_resid[0][at[1]]
    qkv = layer_norm(x0, w[p + "ln_1.weight"]) @ w[p + "attn.c_attn.weight"].T
    q, k, v = qkv[:, :4], qkv[:, 4:8], qkv[:, 8:]
    heads = []
    for h in range(2):
        s = slice(2 * h, 2 * h + 2)
        scores = q[:, s] @ k[:, s].T / math.sqrt(2.0)
        scores = np.where(np.tril(np.ones((T, T), bool)), scores, -np.inf)
        out = softmax(scores) @ v[:, s] @ w[p + "attn.c_proj.weight"][:, s].T
        heads.append(np.zeros_like(out) if h == drop_head else out)
    x_mid = x0 + heads[0] + heads[1]
    hidden = gelu(layer_norm(x_mid, w[p + "ln_2.weight"]) @ w[p + "mlp.c_fc.weight"].T)
    x1 = x_mid + hidden @ w[p + "mlp.c_proj.weight"].T
    if at is not None and at[0] == 1:
        x1[at[1]] = clean_resid[1][at[1]]
    unembed = w["transformer.wte.weight"]
    logits = layer_norm(x1, w["transformer.ln_f.weight"]) @ unembed.T
    return x0, np.stack(heads), x_mid, x1, logits, w


def test_logit_lens_rows_are_the_norm_and_unembedding_of_each_residual():
    x0, heads, x_mid, x1, logits, w = forward(PROMPT)
    steps = values("logit-lens")
    np.testing.assert_allclose(steps[0], x0, atol=1e-12)
    np.testing.assert_allclose(steps[1], heads[0], atol=1e-12)
    np.testing.assert_allclose(steps[2], heads[1], atol=1e-12)
    expected = [
        softmax(layer_norm(x[-1], w["transformer.ln_f.weight"]) @ w["transformer.wte.weight"].T)
        for x in (x0, x_mid, x1)
    ]
    np.testing.assert_allclose(steps[5], np.stack(expected), atol=1e-12)
    np.testing.assert_allclose(steps[6], softmax(logits[-1]), atol=1e-12)


def test_attribution_parts_add_up_to_the_logit_difference():
    x0, heads, x_mid, x1, logits, w = forward(PROMPT)
    steps = values("attribution")
    first, second = np.argsort(-logits[-1], kind="stable")[:2]
    scale = 1.0 / np.sqrt(x1[-1].var() + 1e-5)
    assert steps[5] == pytest.approx(scale)
    direction = w["transformer.wte.weight"][first] - w["transformer.wte.weight"][second]
    assert steps[6].sum() == pytest.approx(logits[-1, first] - logits[-1, second], abs=1e-12)
    head0 = (heads[0][-1] - heads[0][-1].mean()) * scale * w["transformer.ln_f.weight"] @ direction
    assert steps[6][2] == pytest.approx(head0, abs=1e-12)  # parts: embed, pos_embed, L0H0, ...


def test_ablation_rows_are_the_distribution_without_each_head():
    steps = values("ablation")
    for head in range(2):
        expected = softmax(forward(PROMPT, drop_head=head)[4][-1])
        np.testing.assert_allclose(steps[1][head], expected, atol=1e-12)
    np.testing.assert_allclose(steps[3], steps[1][0], atol=1e-12)


def test_patching_grid_is_each_clean_residual_patched_in():
    clean = forward(PATCH_CLEAN)
    corrupt = forward(PATCH_CORRUPT)
    steps = values("patching")
    answer = int(np.argmax(clean[4][-1]))
    wrong = int(np.argmax(corrupt[4][-1] - clean[4][-1]))

    def metric(logits):
        return logits[-1, answer] - logits[-1, wrong]

    assert steps[0][0] == pytest.approx(metric(clean[4]))
    for stage in range(2):
        for position in range(3):
            patched = forward(PATCH_CORRUPT, clean_resid=(clean[0], clean[3]), at=(stage, position))
            assert steps[1][stage, position] == pytest.approx(metric(patched[4]), abs=1e-12)
