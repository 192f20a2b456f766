"""Worked examples of high-dimensional geometry: cosine similarity and Euclidean distance as the
dimension grows, and maximum inner product search as hard attention (seed 002 §6, §15.1); the
variance of q·k and why attention divides by sqrt(d_k) (seed 002 §7.2, eq. 24).

The random vectors are standard normal draws from NumPy's generator, seeded per dimension with
``numpy.random.default_rng([SEED, d])``, so every run (and the tests) see the same numbers.
Attention weights come from the attention code the models use
(``light_llm.nn.attention.attention_explicit``).
"""

from __future__ import annotations

import functools
import math
from pathlib import Path

import numpy as np
import torch

from light_llm.explain import plots
from light_llm.explain.steps import Example, Step
from light_llm.nn.attention import attention_explicit

SEED = 0
GEOMETRY_DIMS = (2, 8, 32, 128, 512, 2048)
GEOMETRY_POINTS = 120  # random vectors per dimension
SEED_002_GEOMETRY = "seed 002 §6.1; §15.1"


def random_vectors(d: int, count: int, salt: int = 0) -> np.ndarray:
    """(count, d) standard normal vectors from default_rng([SEED, d, salt])."""
    return np.random.default_rng([SEED, d, salt]).standard_normal((count, d))


def pair_statistics(points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Cosine similarities and Euclidean distances of every distinct pair of rows."""
    norms = np.linalg.norm(points, axis=1)
    gram = points @ points.T
    cosine = gram / np.outer(norms, norms)
    squared = norms[:, None] ** 2 + norms[None, :] ** 2 - 2 * gram
    upper = np.triu_indices(len(points), k=1)
    return cosine[upper], np.sqrt(np.maximum(squared[upper], 0.0))


@functools.cache
def concentration_table() -> np.ndarray:
    """(Computed once, read-only.) Per dimension d: mean |cos|, std of cos, 1/sqrt(d), mean
    distance / sqrt(2d), and the relative contrast (max - min) / min of the distances from the
    first point to the others."""
    rows = []
    for d in GEOMETRY_DIMS:
        points = random_vectors(d, GEOMETRY_POINTS)
        cosine, distance = pair_statistics(points)
        from_first = np.linalg.norm(points[1:] - points[0], axis=1)
        contrast = (from_first.max() - from_first.min()) / from_first.min()
        rows.append(
            [
                np.abs(cosine).mean(),
                cosine.std(),
                1 / math.sqrt(d),
                distance.mean() / math.sqrt(2 * d),
                contrast,
            ]
        )
    return read_only(np.array(rows))


def read_only(array: np.ndarray) -> np.ndarray:
    """``array`` made unwritable, so that a cached result cannot be changed by a caller."""
    array.setflags(write=False)
    return array


MIPS_KEYS = [
    [0.9, 0.1, 0.0, 0.3],
    [0.2, 1.0, 0.4, 0.0],
    [0.5, 0.5, 0.5, 0.5],
    [1.5, 0.0, 0.2, 0.1],
    [0.0, 0.3, 1.1, 0.6],
    [0.3, 0.2, 0.1, 1.2],
]
MIPS_QUERY = [1.0, 0.2, 0.4, 0.1]
MIPS_SHARPNESS = (1.0, 4.0, 16.0, 64.0)  # β in softmax(β q·v)


def mips_weights(keys: torch.Tensor, query: torch.Tensor, beta: float) -> torch.Tensor:
    """softmax(β q·v_i) by the models' attention code (which divides by sqrt(d), so the query
    is scaled by β sqrt(d) first)."""
    d = query.size(-1)
    _, weights = attention_explicit(
        (query * beta * math.sqrt(d))[None, None, None], keys[None, None], keys[None, None]
    )
    return weights[0, 0, 0]


def high_dimensions() -> list[Step]:
    """Concentration of measure on random Gaussian vectors (seed 002 §6.1, §15.1), and maximum
    inner product search v* = argmax_v q·v (§6.2) as the limit of attention's softmax."""
    table = concentration_table()
    dims = tuple(f"d={d}" for d in GEOMETRY_DIMS)
    keys = torch.tensor(MIPS_KEYS, dtype=torch.float64)
    query = torch.tensor(MIPS_QUERY, dtype=torch.float64)
    scores = keys @ query
    best = int(torch.argmax(scores))
    weights = torch.stack([mips_weights(keys, query, beta) for beta in MIPS_SHARPNESS])
    outputs = weights @ keys
    key_names = tuple(f"v{i}" for i in range(len(MIPS_KEYS)))
    unit = random_vectors(64, 2, salt=1)
    unit /= np.linalg.norm(unit, axis=1, keepdims=True)
    return [
        Step(
            "Cosine similarity and distance of random vectors, by dimension",
            f"{GEOMETRY_POINTS} standard normal vectors per dimension d, every pair compared. "
            "The cosine of two random directions concentrates around 0 with spread about "
            "1/sqrt(d): in high dimension, random vectors are nearly orthogonal. Distances "
            "concentrate too: all pairs are about sqrt(2d) apart, and the relative contrast "
            "(farthest - nearest) / nearest from one point shrinks towards 0, so 'nearest' "
            "means less and less.",
            table,
            SEED_002_GEOMETRY,
            rows=dims,
            columns=("mean |cos|", "std cos", "1/sqrt(d)", "dist/sqrt(2d)", "contrast"),
            key="cosine-similarity-and-distance-of-random-vectors",
        ),
        Step(
            "For unit vectors: ||u - v||² = 2 - 2 cos(u, v)",
            "Two random unit vectors in d = 64: the squared distance and 2 - 2 cos agree, so "
            "once vectors are normalised, distance and cosine rank neighbours the same way; "
            "the seed's advice to prefer cosine (§15.1) is about ignoring the vectors' lengths.",
            [float(np.sum((unit[0] - unit[1]) ** 2)), float(2 - 2 * unit[0] @ unit[1])],
            "seed 002 §6.1",
            columns=("||u - v||²", "2 - 2 cos"),
            key="for-unit-vectors-u-v-2-2-2-cos-u-v",
        ),
        Step(
            "Keys v_i and query q (d = 4)",
            "Assumed: six keys and a query (the seed gives formulas only).",
            torch.cat([keys, query[None]]),
            "seed 002 §6.2",
            rows=(*key_names, "q"),
            key="keys-v-i-and-query-q-d-4",
        ),
        Step(
            "Inner products q · v_i",
            "Eq. 20 for every key: the scores attention computes before its softmax.",
            scores,
            "seed 002 §6.2; §7.1, eq. 20",
            columns=key_names,
            key="inner-products-q-v-i",
        ),
        Step(
            "MIPS: v* = argmax_v q · v",
            f"Maximum inner product search returns one key, here v{best}: hard attention.",
            keys[best],
            "seed 002 §6.2",
            key="mips-v-argmax-v-q-v",
        ),
        Step(
            "softmax(β q · v_i) for growing β",
            "Soft attention over the same scores, by the attention code the models use. As β "
            "grows the weights pile onto the best key: the softmax becomes the argmax of MIPS.",
            weights,
            "seed 002 §6.2; §7.1, eq. 21",
            rows=tuple(f"β={b:g}" for b in MIPS_SHARPNESS),
            columns=key_names,
            key="softmax-beta-q-v-i-for-growing-beta",
        ),
        Step(
            "Attention output Σ α_i v_i for each β",
            f"The weighted sum of the keys (as values); at large β it is v{best} itself.",
            outputs,
            "seed 002 §6.2; §7.1, eq. 22",
            rows=tuple(f"β={b:g}" for b in MIPS_SHARPNESS),
            key="attention-output-sigma-alpha-i-v-i-for-each-beta",
        ),
    ]


def high_dimensions_figures(folder: Path) -> list[Path]:
    table = concentration_table()
    dims = np.array(GEOMETRY_DIMS, dtype=float)
    curves = plots.lines_figure(
        folder / "concentration_of_measure.png",
        dims,
        [
            ("std of cos(u, v)", table[:, 1], "o-"),
            ("1/sqrt(d)", table[:, 2], "--"),
            ("relative contrast of distances", table[:, 4], "s-"),
        ],
        f"Random vectors in d dimensions ({GEOMETRY_POINTS} per d): cosines and distances "
        "concentrate (seed 002 §6.1)",
        "dimension d",
        "value",
        log_x=True,
        log_y=True,
    )
    steps = {step.key: np.asarray(step.value) for step in high_dimensions()}
    weights = steps["softmax-beta-q-v-i-for-growing-beta"]
    bars = plots.distributions_figure(
        folder / "mips_hard_attention.png",
        [(f"β = {b:g}", weights[i]) for i, b in enumerate(MIPS_SHARPNESS)],
        [f"v{i}" for i in range(len(MIPS_KEYS))],
        "softmax(β q·v) tends to maximum inner product search (one-hot) as β grows (seed 002 §6.2)",
    )
    return [curves, bars]


# --------------------------------------------------------------------------- §7.2
VARIANCE_DIMS = (4, 16, 64, 256, 1024)
VARIANCE_SIGMAS = (1.0, 0.5)
VARIANCE_SAMPLES = 4000  # pairs (q, k) per d_k
ENTROPY_KEYS = 16  # keys per query in the softmax
ENTROPY_QUERIES = 200


def score_samples(d_k: int, sigma: float) -> np.ndarray:
    """q·k for VARIANCE_SAMPLES independent pairs with i.i.d. N(0, σ²) entries."""
    draws = np.random.default_rng([SEED, d_k, int(sigma * 1000)]).standard_normal(
        (2, VARIANCE_SAMPLES, d_k)
    )
    q, k = sigma * draws[0], sigma * draws[1]
    return (q * k).sum(axis=1)


def mean_entropy(d_k: int, scaled: bool) -> tuple[float, float]:
    """Mean entropy (nats) and mean largest weight of softmax(q·K^T [/ sqrt(d_k)]) over
    ENTROPY_KEYS keys, for ENTROPY_QUERIES random queries (σ = 1), by the models' attention."""
    draws = np.random.default_rng([SEED, d_k, 7]).standard_normal(
        (ENTROPY_QUERIES, ENTROPY_KEYS + 1, d_k)
    )
    q = torch.from_numpy(draws[:, :1])  # (N, 1, d_k)
    k = torch.from_numpy(draws[:, 1:])  # (N, n, d_k)
    factor = 1.0 if scaled else math.sqrt(d_k)  # undo the 1/sqrt(d_k) for the unscaled case
    _, weights = attention_explicit((q * factor)[:, None], k[:, None], k[:, None])
    weights = weights[:, 0, 0]  # (N, n)
    entropy = -(weights * torch.log(weights.clamp_min(1e-300))).sum(-1)
    return float(entropy.mean()), float(weights.max(-1).values.mean())


@functools.cache
def variance_tables() -> tuple[np.ndarray, np.ndarray]:
    """(Computed once, read-only.) Per (σ, d_k): measured Var(q·k), d_k σ⁴, their ratio and
    Var(q·k / sqrt(d_k)); per d_k: entropy and largest weight, unscaled then scaled."""
    variance_rows = []
    for sigma in VARIANCE_SIGMAS:
        for d_k in VARIANCE_DIMS:
            scores = score_samples(d_k, sigma)
            formula = d_k * sigma**4
            variance_rows.append(
                [scores.var(), formula, scores.var() / formula, (scores / math.sqrt(d_k)).var()]
            )
    entropy_rows = [
        [*mean_entropy(d_k, scaled=False), *mean_entropy(d_k, scaled=True)] for d_k in VARIANCE_DIMS
    ]
    return read_only(np.array(variance_rows)), read_only(np.array(entropy_rows))


def score_variance() -> list[Step]:
    """Var(q·k) = d_k σ⁴ for i.i.d. entries of variance σ² (seed 002 §7.2, eq. 24), measured
    on random vectors; the entropy of softmax(q·K^T) with and without the 1/sqrt(d_k)."""
    variance_rows, entropy_rows = variance_tables()
    return [
        Step(
            "Var(q·k) measured against d_k σ⁴",
            f"{VARIANCE_SAMPLES} pairs (q, k) per row with i.i.d. N(0, σ²) entries: q·k is a "
            "sum of d_k independent products of variance σ⁴ each, so its variance grows as "
            "d_k σ⁴. Dividing by sqrt(d_k) brings it back to σ⁴ whatever d_k (last column).",
            variance_rows,
            "seed 002 §7.2, eq. 24",
            rows=tuple(f"σ={s:g}, d_k={d}" for s in VARIANCE_SIGMAS for d in VARIANCE_DIMS),
            columns=("measured", "d_k σ⁴", "ratio", "Var(q·k/sqrt d_k)"),
            key="var-q-k-measured-against-d-k-sigma-4",
        ),
        Step(
            "Entropy of the attention weights, without and with scaling",
            f"Mean over {ENTROPY_QUERIES} random queries, each against {ENTROPY_KEYS} random "
            f"keys (σ = 1); uniform weights would have entropy log {ENTROPY_KEYS} = "
            f"{math.log(ENTROPY_KEYS):.4f}. Unscaled scores grow like sqrt(d_k), the softmax "
            "saturates (entropy towards 0, largest weight towards 1: one key takes all, and "
            "its gradient vanishes); scaled scores keep the same spread at every d_k.",
            entropy_rows,
            "seed 002 §7.2; §15.2",
            rows=tuple(f"d_k={d}" for d in VARIANCE_DIMS),
            columns=("H unscaled", "max w unscaled", "H scaled", "max w scaled"),
            key="entropy-of-the-attention-weights-without-and",
        ),
    ]


def score_variance_figures(folder: Path) -> list[Path]:
    steps = {step.key: np.asarray(step.value) for step in score_variance()}
    variances = steps["var-q-k-measured-against-d-k-sigma-4"]
    entropies = steps["entropy-of-the-attention-weights-without-and"]
    dims = np.array(VARIANCE_DIMS, dtype=float)
    n = len(VARIANCE_DIMS)
    variance_plot = plots.lines_figure(
        folder / "score_variance.png",
        dims,
        [
            ("measured Var(q·k), σ = 1", variances[:n, 0], "o"),
            ("d_k σ⁴, σ = 1", variances[:n, 1], "-"),
            ("measured Var(q·k), σ = 0.5", variances[n:, 0], "s"),
            ("d_k σ⁴, σ = 0.5", variances[n:, 1], "--"),
            ("measured Var(q·k / sqrt(d_k)), σ = 1", variances[:n, 3], "^-"),
        ],
        "Var(q·k) = d_k σ⁴ (seed 002 §7.2, eq. 24): measured on random vectors",
        "d_k",
        "variance",
        log_x=True,
        log_y=True,
    )
    entropy_plot = plots.lines_figure(
        folder / "softmax_entropy.png",
        dims,
        [
            ("softmax(q·k): unscaled", entropies[:, 0], "o-"),
            ("softmax(q·k / sqrt(d_k)): scaled", entropies[:, 2], "s-"),
            (f"uniform: log {ENTROPY_KEYS}", np.full(n, math.log(ENTROPY_KEYS)), ":"),
        ],
        f"Entropy of attention over {ENTROPY_KEYS} random keys: unscaled scores saturate",
        "d_k",
        "entropy (nats)",
        log_x=True,
    )
    return [variance_plot, entropy_plot]


# the worked examples of this module, in the order light-llm explain lists them
EXAMPLES = (
    Example(
        "high-dimensions",
        "cosine similarity and distance of random vectors as d grows (concentration of "
        "measure), and maximum inner product search as hard attention (seed 002 §6)",
        high_dimensions,
        high_dimensions_figures,
    ),
    Example(
        "score-variance",
        "Var(q·k) = d_k σ⁴ measured for several d_k, and the entropy of the softmax with "
        "and without 1/sqrt(d_k) (seed 002 §7.2)",
        score_variance,
        score_variance_figures,
    ),
)
