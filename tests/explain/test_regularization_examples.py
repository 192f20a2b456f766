"""Seed 002 §12-13: dropout, label smoothing, initialisation and mixed precision, against plain
NumPy written here."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from light_llm import explain
from light_llm.explain import regularization_examples as reg


def values(name: str) -> dict[str, np.ndarray]:
    return {s.title: np.asarray(s.value, dtype=np.float64) for s in explain.run(name)}


def test_inverted_dropout_keeps_the_expectation():
    got = values("dropout")
    x = np.array(reg.DROPOUT_INPUT)
    rng = np.random.default_rng([reg.SEED, 12])
    first = (rng.random(x.shape) >= reg.DROPOUT_P) * x / (1 - reg.DROPOUT_P)
    table = got["Inverted dropout of x, p = 0.5"]
    np.testing.assert_allclose(table[1], first)
    assert set(np.unique(table[2])) <= {0.0, 2.0}
    mean, exact = got[f"Mean of {reg.DROPOUT_DRAWS} dropped copies against x"]
    standard_error = np.abs(x) * math.sqrt(reg.DROPOUT_P / (1 - reg.DROPOUT_P) / reg.DROPOUT_DRAWS)
    assert (np.abs(mean - x) < 5 * standard_error).all()
    before = got['Attention weights before dropout ("The cat sat", causal)']
    after = got["Attention weights after dropout, p = 0.5"]
    kept = after != 0
    np.testing.assert_allclose(after[kept], 2 * before[kept])
    np.testing.assert_allclose(got["Row sums after dropout"], after.sum(axis=1))


def test_label_smoothing_target_loss_and_gradient():
    got = values("label-smoothing")
    z = np.array(reg.SMOOTHING_LOGITS)
    p = np.exp(z - z.max()) / np.exp(z - z.max()).sum()
    y = np.full(5, 0.1 / 5)
    y[2] += 0.9
    np.testing.assert_allclose(got["y_smooth = (1 - α) y + α / V"], y)
    loss = -(y * np.log(p)).sum()
    np.testing.assert_allclose(
        got["Loss -Σ y_smooth log p: NumPy engine, PyTorch, and without smoothing"],
        [loss, loss, -math.log(p[2])],
        rtol=1e-12,
    )
    np.testing.assert_allclose(got["Gradient at the logits: p - y_smooth"], p - y, atol=1e-15)
    curve = got["Smoothed loss against the confidence c in the true class"]
    assert (np.diff(curve[0]) < 0).all()  # without smoothing: always better to be surer
    assert np.argmin(curve[1]) == 3  # with it: the minimum at c = 0.92


def test_xavier_variance_and_signal_propagation():
    got = values("initialization")
    table = got["Variance of the weights: measured and formula"]
    for row, (n_in, n_out) in zip(table, reg.XAVIER_SHAPES, strict=True):
        torch.manual_seed(reg.SEED)
        weight = torch.nn.init.xavier_normal_(torch.empty(n_out, n_in, dtype=torch.float64))
        # the same formula; a parallel sum's order follows the thread count, which other
        # tests in the process may have set (a last-digit difference failed a CI run)
        assert row[0] == pytest.approx(float(weight.var()), rel=1e-12)
        assert row[1] == 2 / (n_in + n_out)
        # a sample variance of n values is within a few sqrt(2/n) of the truth
        assert abs(row[2] - 1) < 5 * math.sqrt(2 / (n_in * n_out))
    gpt = got["The GPT's initial weights: variance against 0.02²"]
    np.testing.assert_allclose(gpt[:, 0], 0.02**2, rtol=0.05)
    signal = got[f"Activation variance through {reg.DEPTH} linear layers of width {reg.WIDTH}"]
    assert 0.8 < signal[-1, 0] < 1.25  # Xavier keeps the scale
    np.testing.assert_allclose(signal[1:, 1] / signal[:-1, 1], reg.WIDTH * 0.02**2, rtol=0.2)
    np.testing.assert_allclose(signal[1:, 2] / signal[:-1, 2], reg.WIDTH, rtol=0.2)


def test_float16_and_bfloat16_rounding():
    got = values("mixed-precision")
    exact = np.array(reg.PRECISION_NUMBERS)
    stored = got["Numbers as each format stores them"]
    np.testing.assert_array_equal(stored[0], exact.astype(np.float32))
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(stored[1], exact.astype(np.float16))

    def to_bfloat16(x: float) -> float:  # round to nearest even on the top 16 bits
        bits = np.array([x], dtype=np.float32).view(np.uint32)[0]
        rounded = (int(bits) + 0x7FFF + ((int(bits) >> 16) & 1)) >> 16 << 16
        return float(np.array([rounded], dtype=np.uint32).view(np.float32)[0])

    np.testing.assert_array_equal(stored[2], [to_bfloat16(x) for x in exact])
    assert stored[1, reg.PRECISION_NAMES.index("70000")] == np.inf
    assert stored[1, reg.PRECISION_NAMES.index("1e-8")] == 0.0
    sums = got[f"1 + 1e-4 added {reg.SMALL_UPDATES} times (exact: 1.1)"]
    expected = []
    for dtype in (np.float32, np.float16):
        total = dtype(1.0)
        for _ in range(reg.SMALL_UPDATES):
            total = dtype(total + dtype(1e-4))
        expected.append(float(total))
    np.testing.assert_allclose(sums[:2], expected, rtol=1e-6)
    assert sums[2] == 1.0
    unscaled, scaled = got["A gradient of 1e-8 in float16, without and with loss scaling 2^16"]
    assert unscaled == 0.0 and scaled == float(np.float16(1e-8 * 2**16)) / 2**16
