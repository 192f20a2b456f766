"""Seed 002 §11 (KV cache, linear attention) and seed 001's gradient checkpointing, against
plain NumPy and counts written here."""

from __future__ import annotations

import math

import numpy as np

from light_llm import explain
from light_llm.explain import efficiency_examples as eff


def values(name: str) -> dict[str, np.ndarray]:
    return {s.title: np.asarray(s.value, dtype=np.float64) for s in explain.run(name)}


def test_kv_cache_appends_one_key_and_value_and_keeps_the_logits():
    got = values("kv-cache")
    before = got["K_cache before the step (layer 0, head 0)"]
    after = got["K_cache after the step: [K_cache; k_new]"]
    np.testing.assert_array_equal(after[:-1], before)
    np.testing.assert_allclose(
        after[-1], got["k_new = LayerNorm(E[new] + P[6]) W^K + b^K (layer 0, head 0)"], rtol=1e-12
    )
    assert got["Largest change of the cached prompt rows"] == 0.0
    np.testing.assert_allclose(
        got["Next-token logits with the cache"],
        got["Next-token logits without the cache (all 7 tokens recomputed)"],
        rtol=1e-10,
        atol=1e-15,
    )


def test_kv_cache_work_matches_the_count_of_multiply_adds():
    config = eff.CACHE_CONFIG
    d, vocab, layers, heads = config.n_embd, config.vocab_size, config.n_layer, config.n_head
    hs = d // heads
    per_token = layers * 2 * (3 * d * d + d * d + 2 * 4 * d * d) + 2 * d * vocab  # projections
    work = values("kv-cache")["Work for the logits of token n: FLOPs without and with the cache"]
    for row, n in zip(work, eff.CACHE_LENGTHS, strict=True):
        without = n * per_token + layers * heads * 2 * (2 * n * n * hs)  # Q K^T and A V
        with_cache = per_token + layers * heads * 2 * (2 * n * hs)
        np.testing.assert_array_equal(row, [without, with_cache, without / with_cache])


def elu_plus_one(x):
    return np.where(x > 0, x + 1.0, np.exp(np.minimum(x, 0.0)))


def test_linear_attention_running_state_equals_the_quadratic_form():
    got = values("linear-attention")
    q, k, v = np.random.default_rng([eff.SEED, 11]).standard_normal((3, 6, 4))
    phi_q, phi_k = elu_plus_one(q), elu_plus_one(k)
    kernel = np.tril(phi_q @ phi_k.T)
    np.testing.assert_allclose(got["Kernel φ(Q) φ(K)^T ⊙ M, φ(x) = elu(x) + 1"], kernel)
    quadratic = kernel @ v / kernel.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(
        got["Outputs, quadratic form: (φ(Q)φ(K)^T ⊙ M) V / row sums"], quadratic, rtol=1e-12
    )
    state, norm, running = np.zeros((4, 4)), np.zeros(4), []
    for t in range(6):
        state += np.outer(phi_k[t], v[t])
        norm += phi_k[t]
        running.append(phi_q[t] @ state / (phi_q[t] @ norm))
    np.testing.assert_allclose(got["Running state, token by token"], running, rtol=1e-12)
    np.testing.assert_allclose(
        got["State after the last token: S = Σ φ(k) v^T (d x d) and z = Σ φ(k)"],
        np.vstack([state, norm]),
        rtol=1e-12,
    )
    scores = np.where(np.tril(np.ones((6, 6), bool)), q @ k.T / 2.0, -np.inf)
    softmax = np.exp(scores - scores.max(1, keepdims=True))
    np.testing.assert_allclose(
        got["Weights of softmax attention, same Q and K"],
        softmax / softmax.sum(1, keepdims=True),
        rtol=1e-12,
    )


def test_checkpointing_keeps_only_the_block_inputs():
    got = values("checkpointing")
    table = got["Kept for the backward pass (KiB), and compute, by depth"]
    config = eff.CHECKPOINT_CONFIG
    block_input_kib = eff.CHECKPOINT_BATCH * config.block_size * config.n_embd * 4 / 1024
    layers = np.array(eff.CHECKPOINT_LAYERS)
    np.testing.assert_allclose(table[:, 2], layers * block_input_kib)  # info's L·T·d x batch
    per_layer = got["Memory per extra layer (KiB)"]
    np.testing.assert_allclose(per_layer[:, 1], block_input_kib)  # with: one input per block
    # without: a block keeps at least its T x T attention weights and the 4d-wide MLP input
    attention_kib = eff.CHECKPOINT_BATCH * config.n_head * config.block_size**2 * 4 / 1024
    mlp_kib = eff.CHECKPOINT_BATCH * config.block_size * 4 * config.n_embd * 4 / 1024
    assert (per_layer[:, 0] > attention_kib + mlp_kib).all()
    assert (table[:, 1] < table[:, 0]).all()
    assert 0.2 < got["Extra compute of checkpointing"] < 1 / 3 + 1e-9
    kept, attention = got[
        "The seed's model (seed 000) at T = 1024: residual stream L·T·d, per sequence (MiB)"
    ]
    assert kept == 6 * 1024 * 384 * 4 / 2**20 and attention == 6 * 1024**2 * 4 / 2**20
    assert math.isclose(table[-1, 3] - 1, got["Extra compute of checkpointing"])
