"""Seed 001's tiny transformer and its backpropagation through attention, against plain NumPy
written here from the formulas."""

from __future__ import annotations

import math

import numpy as np

from light_llm import explain


def steps(name: str) -> dict:
    return {step.title: step for step in explain.run(name)}


def values(name: str) -> dict[str, np.ndarray]:
    return {title: np.asarray(step.value, dtype=np.float64) for title, step in steps(name).items()}


def layer_norm(x: np.ndarray, eps: float = 1e-5) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(((x - mean) ** 2).mean(axis=-1, keepdims=True) + eps)


def test_tiny_transformer_embeddings_residual_and_layernorm():
    got = values("tiny-transformer")
    table = np.array([[0.2, 0.5, 0.3, 0.1], [0.8, 0.2, 0.6, 0.4]])
    positions = np.array([[0.1, 0.0, 0.1, 0.0], [0.0, 0.1, 0.0, 0.1]])
    x = table[[0, 1]] + positions
    np.testing.assert_allclose(got["x = E[id] + P[pos]"], x)
    residual = x + np.array([[0.4, 0.6, 0.3, 0.2], [0.7, 0.4, 0.5, 0.6]])
    np.testing.assert_allclose(got["Residual: x + Attention(x)"], residual)
    normalized = layer_norm(residual)
    np.testing.assert_allclose(got["LayerNorm(x + Attention(x))"], normalized, atol=1e-12)
    # "The": the entries equal to the mean become 0, the others ±0.4 / sqrt(0.08 + ε)
    assert abs(normalized[0, 0]) < 1e-12
    assert math.isclose(normalized[0, 1], 0.4 / math.sqrt(0.08 + 1e-5))
    after_ffn = layer_norm(normalized + np.array([[0.5, 0.8, 0.4, 0.3], [0.9, 0.5, 0.7, 0.6]]))
    np.testing.assert_allclose(got["Layer 1 output: LayerNorm(h + FFN(h))"], after_ffn, atol=1e-12)


def test_tiny_transformer_flags_the_seeds_normalised_vector():
    step = steps("tiny-transformer")["LayerNorm(x + Attention(x))"]
    assert step.seed_differs[0].all() and not step.seed_differs[1].any()
    seed_mean_var = values("tiny-transformer")["Mean and variance of the seed's normalised vector"]
    np.testing.assert_allclose(seed_mean_var, [-0.25, np.var([-0.5, 1.2, -0.5, -1.2])])


def test_attention_backprop_on_the_seeds_a_and_v():
    got = values("attention-backprop")
    a = np.array([[1.0, 0, 0], [0.2, 0.8, 0], [0.1, 0.3, 0.6]])
    v = np.array([[0.5, 0.2, 0.1], [0.8, 0.9, 0.4], [0.3, 0.5, 1.2]])
    q = np.array([[1.0, 0.2, 0.1], [0.3, 1.5, 0.4], [0.2, 0.5, 1.8]])
    g = np.outer([0.1, 0.2, 0.3], np.ones(3))
    np.testing.assert_allclose(got["dL/dV = A^T · dL/dO"], a.T @ g)
    np.testing.assert_allclose(got["dL/dV = A^T · dL/dO"][:, 0], [0.17, 0.25, 0.18], atol=1e-12)
    grad_a = g @ v.T
    np.testing.assert_allclose(got["dL/dA = dL/dO · V^T"], grad_a)
    # softmax Jacobian of each row as a full matrix: J_ij = a_i (δ_ij - a_j)
    grad_s = np.stack(
        [(np.diag(r) - np.outer(r, r)).T @ gr for r, gr in zip(a, grad_a, strict=True)]
    )
    np.testing.assert_allclose(got["dL/dS = A ⊙ (dL/dA - rowsum(dL/dA ⊙ A))"], grad_s, atol=1e-15)
    np.testing.assert_allclose(got["dL/dQ = dL/dS · K / sqrt(d_k)"], grad_s @ q / math.sqrt(3))
    np.testing.assert_allclose(got["dL/dK = dL/dS^T · Q / sqrt(d_k)"], grad_s.T @ q / math.sqrt(3))


def test_attention_backprop_with_the_exact_weights_matches_finite_differences():
    got = values("attention-backprop")
    q = np.array([[1.0, 0.2, 0.1], [0.3, 1.5, 0.4], [0.2, 0.5, 1.8]])
    v = np.array([[0.5, 0.2, 0.1], [0.8, 0.9, 0.4], [0.3, 0.5, 1.2]])
    g = np.outer([0.1, 0.2, 0.3], np.ones(3))

    def loss(query: np.ndarray) -> float:
        scores = np.where(np.tril(np.ones((3, 3), bool)), query @ q.T / math.sqrt(3), -np.inf)
        weights = np.exp(scores - scores.max(axis=1, keepdims=True))
        weights /= weights.sum(axis=1, keepdims=True)
        return float(((weights @ v) * g).sum())

    h = 1e-6
    numeric = np.zeros_like(q)
    for index in np.ndindex(q.shape):
        step = np.zeros_like(q)
        step[index] = h
        numeric[index] = (loss(q + step) - loss(q - step)) / (2 * h)
    np.testing.assert_allclose(got["dL/dQ with the exact A (autograd)"], numeric, atol=1e-8)
