"""Seed 002 §6 (concentration of measure, MIPS as hard attention) and §7.2 (Var(q·k) and the
softmax's entropy), recomputed here in plain NumPy from the same seeded draws."""

from __future__ import annotations

import math

import numpy as np

from light_llm import explain
from light_llm.explain import geometry_examples as geo


def values(name: str) -> dict[str, np.ndarray]:
    return {s.title: np.asarray(s.value, dtype=np.float64) for s in explain.run(name)}


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def test_concentration_table_matches_numpy():
    table = values("high-dimensions")[
        "Cosine similarity and distance of random vectors, by dimension"
    ]
    for row, d in zip(table, geo.GEOMETRY_DIMS, strict=True):
        points = np.random.default_rng([geo.SEED, d, 0]).standard_normal((geo.GEOMETRY_POINTS, d))
        i, j = np.triu_indices(len(points), 1)
        unit = points / np.linalg.norm(points, axis=1, keepdims=True)
        cos = np.einsum("nd,nd->n", unit[i], unit[j])
        dist = np.linalg.norm(points[i] - points[j], axis=1)
        near = np.linalg.norm(points[1:] - points[0], axis=1)
        expected = [
            np.abs(cos).mean(),
            cos.std(),
            d**-0.5,
            dist.mean() / math.sqrt(2 * d),
            (near.max() - near.min()) / near.min(),
        ]
        np.testing.assert_allclose(row, expected, rtol=1e-9)
    # the claim the example makes: spread of cos about 1/sqrt(d), contrast falling with d
    np.testing.assert_allclose(table[:, 1], table[:, 2], rtol=0.15)
    assert (np.diff(table[:, 4]) < 0).all()


def test_mips_is_the_limit_of_softmax_attention():
    got = values("high-dimensions")
    keys, query = np.array(geo.MIPS_KEYS), np.array(geo.MIPS_QUERY)
    scores = keys @ query
    np.testing.assert_allclose(got["Inner products q · v_i"], scores)
    np.testing.assert_allclose(got["MIPS: v* = argmax_v q · v"], keys[np.argmax(scores)])
    weights = np.stack([softmax(beta * scores) for beta in geo.MIPS_SHARPNESS])
    np.testing.assert_allclose(got["softmax(β q · v_i) for growing β"], weights, atol=1e-12)
    np.testing.assert_allclose(got["Attention output Σ α_i v_i for each β"], weights @ keys)
    assert weights[-1, np.argmax(scores)] > 1 - 1e-9


def test_score_variance_against_the_formula_and_numpy():
    got = values("score-variance")
    rows = got["Var(q·k) measured against d_k σ⁴"]
    expected = []
    for sigma in geo.VARIANCE_SIGMAS:
        for d in geo.VARIANCE_DIMS:
            draws = np.random.default_rng([geo.SEED, d, int(sigma * 1000)]).standard_normal(
                (2, geo.VARIANCE_SAMPLES, d)
            )
            dots = np.einsum("nd,nd->n", sigma * draws[0], sigma * draws[1])
            expected.append([dots.var(), d * sigma**4, dots.var() / (d * sigma**4), dots.var() / d])
    np.testing.assert_allclose(rows, expected, rtol=1e-9)
    # eq. 24 holds to sampling error: the variance of a sample variance is about 2/N relative
    assert np.abs(rows[:, 2] - 1).max() < 6 * math.sqrt(2 / geo.VARIANCE_SAMPLES) * math.sqrt(2)


def test_entropy_of_unscaled_attention_collapses_and_scaled_does_not():
    got = values("score-variance")["Entropy of the attention weights, without and with scaling"]
    for row, d in zip(got, geo.VARIANCE_DIMS, strict=True):
        draws = np.random.default_rng([geo.SEED, d, 7]).standard_normal(
            (geo.ENTROPY_QUERIES, geo.ENTROPY_KEYS + 1, d)
        )
        scores = np.einsum("nd,nkd->nk", draws[:, 0], draws[:, 1:])
        expected = []
        for weights in (softmax(scores), softmax(scores / math.sqrt(d))):
            entropy = -(weights * np.log(np.maximum(weights, 1e-300))).sum(-1)
            expected += [entropy.mean(), weights.max(-1).mean()]
        np.testing.assert_allclose(row, expected, rtol=1e-9, atol=1e-12)
    assert (np.diff(got[:, 0]) < 0).all() and got[-1, 0] < 0.5
    assert np.ptp(got[:, 2]) < 0.2
