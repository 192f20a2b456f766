"""The seed's worked attention example (seed 002 §14.1-14.2) through the NumPy engine: the
forward pass, and the backward dL/dV = A^T dL/dO, against the exact values written with
math.exp, and against the seed's own figures.

The seed's A ≈ [[0.38, 0.62], [0.5, 0.5]] is off in its first row: softmax([1, 2]/sqrt 3) is
[0.3595, 0.6405]. Its O and dL/dV follow from its rounded A; given that A, the engine's
backward reproduces the seed's dL/dV exactly."""

import math

import numpy as np

from light_llm.reference.attention import attention_backward, attention_forward

Q = np.array([[[[1.0, 0.0, 1.0], [0.0, 1.0, 1.0]]]])  # (B=1, nh=1, n=2, d_k=3)
K = np.array([[[[1.0, 1.0, 0.0], [1.0, 0.0, 1.0]]]])
V = np.array([[[[2.0, 0.0, 1.0], [1.0, 1.0, 0.0]]]])
DL_DO = np.array([[[[1.0, 0.0, 1.0], [0.0, 1.0, 0.0]]]])


def exact_weights() -> np.ndarray:
    """A = softmax(S), S = (1/sqrt 3) [[1, 2], [1, 1]] (seed 002 §14.1, steps 1-2)."""
    e1, e2 = math.exp(1 / math.sqrt(3)), math.exp(2 / math.sqrt(3))
    return np.array([[e1 / (e1 + e2), e2 / (e1 + e2)], [0.5, 0.5]])


def test_forward_is_the_worked_example():
    out, cache = attention_forward(Q, K, V)
    A = exact_weights()
    assert np.allclose(cache[3][0, 0], A, rtol=0, atol=1e-15)  # the attention weights
    assert np.allclose(out[0, 0], A @ V[0, 0], rtol=0, atol=1e-15)
    assert np.allclose(A, [[0.3595, 0.6405], [0.5, 0.5]], atol=5e-5)
    assert np.allclose(out[0, 0], [[1.3595, 0.6405, 0.3595], [1.5, 0.5, 0.5]], atol=5e-5)
    # where the seed's figure differs: its first row says 0.38 / 0.62
    assert abs(A[0, 0] - 0.38) > 0.02 and abs(A[0, 1] - 0.62) > 0.02


def test_backward_gives_dv_equal_to_a_transpose_times_do():
    """seed 002 §14.2: dL/dV = A^T dL/dO = [[0.38, 0.5, 0.38], [0.62, 0.5, 0.62]]."""
    _, cache = attention_forward(Q, K, V)
    dq, dk, dv = attention_backward(DL_DO, cache)
    A = exact_weights()
    exact = A.T @ DL_DO[0, 0]
    assert np.abs(dv[0, 0] - exact).max() <= 4 * np.finfo(np.float64).eps
    assert np.allclose(dv[0, 0], [[0.3595, 0.5, 0.3595], [0.6405, 0.5, 0.6405]], atol=5e-5)
    # and the rest of seed 002 §7.3, written out for this example
    dA = DL_DO[0, 0] @ V[0, 0].T
    dS = A * (dA - (dA * A).sum(axis=1, keepdims=True))
    assert np.allclose(dq[0, 0], dS @ K[0, 0] / math.sqrt(3), rtol=0, atol=1e-15)
    assert np.allclose(dk[0, 0], dS.T @ Q[0, 0] / math.sqrt(3), rtol=0, atol=1e-15)


def test_the_seeds_own_weights_give_its_dv_exactly():
    """With the seed's A = [[0.38, 0.62], [0.5, 0.5]] in the cache, dL/dV is the seed's
    [[0.38, 0.5, 0.38], [0.62, 0.5, 0.62]] (every product here is exact in binary)."""
    seed_A = np.array([[[[0.38, 0.62], [0.5, 0.5]]]])
    cache = (Q, K, V, seed_A, seed_A, None, 1 / math.sqrt(3))
    _, _, dv = attention_backward(DL_DO, cache)
    assert np.array_equal(dv[0, 0], [[0.38, 0.5, 0.38], [0.62, 0.5, 0.62]])


def test_seed_001_backward_example_dv():
    """seed 001 "Backpropagation Through Transformers": with the causal A and a gradient of
    [0.1, 0.2, 0.3] on a single output column, dL/dV = A^T dL/dO = [0.17, 0.25, 0.18]."""
    A = np.array([[1.0, 0.0, 0.0], [0.2, 0.8, 0.0], [0.1, 0.3, 0.6]])
    grad_out = np.array([[0.1], [0.2], [0.3]])
    qkv = np.zeros((1, 1, 3, 1))
    # feed A through the op's backward by handing it a cache whose weights are A
    cache = (qkv, qkv, qkv, A[None, None], A[None, None], None, 1.0)
    _, _, dv = attention_backward(grad_out[None, None], cache)
    assert np.allclose(dv[0, 0, :, 0], A.T @ grad_out[:, 0])
    assert np.allclose(dv[0, 0, :, 0], [0.17, 0.25, 0.18], atol=1e-12)
