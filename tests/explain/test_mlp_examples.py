"""Seed 002 §5's two-layer MLP: forward and backward against plain NumPy and finite
differences."""

from __future__ import annotations

import math

import numpy as np

from light_llm import explain


def values() -> dict[str, np.ndarray]:
    return {s.title: np.asarray(s.value, dtype=np.float64) for s in explain.run("mlp-backprop")}


X = np.array([[1.0, -0.5, 2.0]])
W1 = np.array([[0.2, -0.4, 0.1, 0.5], [0.3, 0.1, -0.2, 0.4], [-0.1, 0.3, 0.2, -0.3]])
B1 = np.array([0.1, 0.0, -0.1, 0.05])
W2 = np.array([[0.5, -0.2], [-0.3, 0.4], [0.2, 0.1], [0.1, -0.5]])
B2 = np.array([0.0, 0.1])
Y = np.array([[1.0, 0.0]])
PHI = np.vectorize(lambda z: 0.5 * (1 + math.erf(z / math.sqrt(2))))


def gelu(z):
    return z * PHI(z)


def loss(w1=W1, w2=W2):
    return 0.5 * float(((gelu(X @ w1 + B1) @ w2 + B2 - Y) ** 2).sum())


def numeric_gradient(f, w, h=1e-6):
    grad = np.zeros_like(w)
    for index in np.ndindex(w.shape):
        step = np.zeros_like(w)
        step[index] = h
        grad[index] = (f(w + step) - f(w - step)) / (2 * h)
    return grad


def test_forward_pass_equations_13_to_15():
    got = values()
    z1 = X @ W1 + B1
    np.testing.assert_allclose(got["z1 = x W1 + b1"], z1[0])
    np.testing.assert_allclose(got["h1 = σ(z1), σ = GELU"], gelu(z1)[0], rtol=1e-12)
    z2 = gelu(z1) @ W2 + B2
    np.testing.assert_allclose(got["z2 = h1 W2 + b2"], z2[0], rtol=1e-12)
    assert got["Loss L = ½ ||ŷ - y||²"] == loss()


def test_backward_pass_equations_16_to_18_against_finite_differences():
    got = values()
    z1 = X @ W1 + B1
    h1 = gelu(z1)
    grad_z2 = h1 @ W2 + B2 - Y
    np.testing.assert_allclose(got["∂L/∂z2 = ∂L/∂ŷ = ŷ - y"], grad_z2[0], rtol=1e-12)
    np.testing.assert_allclose(got["∂L/∂W2 = h1^T ∂L/∂z2"], h1.T @ grad_z2, rtol=1e-12)
    slope = PHI(z1) + z1 * np.exp(-(z1**2) / 2) / math.sqrt(2 * math.pi)
    np.testing.assert_allclose(got["σ'(z1): the slope of GELU at z1"], slope[0], rtol=1e-12)
    grad_w1 = X.T @ ((grad_z2 @ W2.T) * slope)
    np.testing.assert_allclose(got["∂L/∂W1 = x^T (∂L/∂z2 W2^T ⊙ σ'(z1))"], grad_w1, rtol=1e-12)
    np.testing.assert_allclose(
        got["∂L/∂W1 = x^T (∂L/∂z2 W2^T ⊙ σ'(z1))"],
        numeric_gradient(lambda w: loss(w1=w), W1),
        atol=1e-8,
    )
    np.testing.assert_allclose(
        got["∂L/∂W2 = h1^T ∂L/∂z2"], numeric_gradient(lambda w: loss(w2=w), W2), atol=1e-8
    )
    np.testing.assert_allclose(got["∂L/∂x = ∂L/∂z1 W1^T"], (grad_w1 / X.T)[0] @ W1.T)
