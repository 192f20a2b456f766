"""Seed 002 §3: gradient descent, momentum and the residual stream, against plain NumPy."""

from __future__ import annotations

import numpy as np
from scipy.linalg import expm

from light_llm import explain

H = np.diag([1.0, 4.0])
THETA_0 = np.array([2.0, 1.0])
SHOWN = [0, 1, 2, 5, 10, 20]


def values() -> dict[str, np.ndarray]:
    return {s.title: np.asarray(s.value, dtype=np.float64) for s in explain.run("gradient-flow")}


def descent(lr, steps, beta=0.0):
    theta, velocity, path = THETA_0.copy(), np.zeros(2), [THETA_0.copy()]
    for _ in range(steps):
        velocity = beta * velocity + (1 - beta) * (H @ theta)
        theta = theta - lr * velocity
        path.append(theta.copy())
    return np.array(path)


def test_descent_and_flow():
    got = values()
    np.testing.assert_allclose(
        got["Gradient descent θ_{t+1} = θ_t - η ∇L, η = 0.1"], descent(0.1, 20)[SHOWN]
    )
    flow = np.array([THETA_0 * np.exp(-np.diag(H) * 0.1 * k) for k in SHOWN])
    np.testing.assert_allclose(got["Gradient flow θ(t) = e^{-Ht} θ_0 at t = kη"], flow, rtol=1e-12)
    errors = got["Distance from the flow at t = 2, for shrinking η"]
    exact = THETA_0 * np.exp(-np.diag(H) * 2.0)
    expected = [
        np.linalg.norm(descent(lr, round(2 / lr))[-1] - exact) for lr in (0.2, 0.1, 0.05, 0.01)
    ]
    np.testing.assert_allclose(errors, expected, rtol=1e-9)
    assert (np.diff(errors) < 0).all()  # smaller steps follow the flow more closely


def test_momentum_is_the_seeds_exponential_average():
    got = values()["Momentum: v_t = β v_{t-1} + (1-β) ∇L, θ_t = θ_{t-1} - η v_t"]
    np.testing.assert_allclose(got, descent(0.1, 20, beta=0.9)[SHOWN])


def test_residual_stream_converges_to_the_ode():
    got = values()
    a = np.array([[-0.5, -2.0], [2.0, -0.5]])

    def stream(depth):
        h = [np.array([1.0, 0.0])]
        for _ in range(depth):
            h.append(h[-1] + a @ h[-1] / depth)
        return np.array(h)

    np.testing.assert_allclose(
        got["Residual stream: h_{l+1} = h_l + F(h_l), L = 10 layers"], stream(10)[[0, 1, 2, 5, 10]]
    )
    ends = got["Output h_L of the stream against the ODE's h(1) = e^A h_0"]
    np.testing.assert_allclose(ends[:3], [stream(d)[-1] for d in (4, 10, 100)])
    np.testing.assert_allclose(ends[3], expm(a) @ [1.0, 0.0], rtol=1e-12)
    gaps = np.linalg.norm(ends[:3] - ends[3], axis=1)
    assert (np.diff(gaps) < 0).all()
