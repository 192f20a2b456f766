"""The worked example of Muon: one Newton-Schulz orthogonalisation of a small matrix, step by
step, with the singular values before and after each step (Keller Jordan's Muon; the
seeds do not cover it). The iterates are computed by ``light_llm.train.muon.newton_schulz``,
the function the optimizer calls, in float64; the singular values by an SVD."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from light_llm.explain import plots
from light_llm.explain.steps import Example, Step
from light_llm.muon_spec import NS_COEFFICIENTS, NS_STEPS
from light_llm.train.muon import newton_schulz

# A 4 x 3 "momentum" whose singular values span a factor of about 10: the directions of
# small singular value are those that a plain gradient step would hardly move.
MUON_MATRIX = [
    [2.0, 0.5, 0.1],
    [1.0, -1.5, 0.05],
    [0.5, 0.3, -0.2],
    [-1.0, 0.8, 0.1],
]
SOURCE = "Keller Jordan's Muon (not in the seeds)"


def singular_values(matrix: np.ndarray) -> np.ndarray:
    """σ_1 >= ... >= σ_r of ``matrix`` by an SVD."""
    return np.linalg.svd(matrix, compute_uv=False)


def along_directions_of_g(matrix: np.ndarray) -> np.ndarray:
    """The diagonal of Uᵀ X V, U and V the singular vectors of MUON_MATRIX (G): for an iterate
    X_k = U p_k(S) Vᵀ, the value p_k(σ_i) that G's i-th singular value has become, in G's
    order. Sorted by size (an SVD of X_k) they can change places: p lifts a small σ above one
    near 1, and σ1 of X_k would then be another direction's."""
    u, _, vt = np.linalg.svd(np.array(MUON_MATRIX), full_matrices=False)
    return np.diag(u.T @ matrix @ vt.T)


def iterates() -> list[np.ndarray]:
    """X_0 = G / ||G||_F, X_1, ..., X_5 of the Newton-Schulz iteration on MUON_MATRIX (4, 3)."""
    matrix = torch.tensor(MUON_MATRIX, dtype=torch.float64)
    return [newton_schulz(matrix, steps=k).numpy() for k in range(NS_STEPS + 1)]


def muon() -> list[Step]:
    """One quintic Newton-Schulz orthogonalisation (the heart of a Muon step):
    X_k = a X_{k-1} + (b A + c A²) X_{k-1}, A = X_{k-1} X_{k-1}ᵀ, which maps each singular
    value σ to p(σ) = aσ + bσ³ + cσ⁵ and keeps the singular vectors."""
    a, b, c = NS_COEFFICIENTS
    g = np.array(MUON_MATRIX)
    u, s, vt = np.linalg.svd(g, full_matrices=False)
    xs = iterates()
    cols = ["col 1", "col 2", "col 3"]
    rows = [f"row {i + 1}" for i in range(len(MUON_MATRIX))]
    sigma_labels = [f"σ{i + 1}" for i in range(len(s))]
    steps = [
        Step(
            "G: the momentum to orthogonalise",
            "Assumed: a 4 x 3 matrix (d_out = 4, d_in = 3) standing for Muon's Nesterov "
            "momentum N = G + μ M. Muon will replace it by U Vᵀ, where G = U S Vᵀ.",
            g,
            SOURCE,
            rows=rows,
            columns=cols,
            key="g-the-momentum-to-orthogonalise",
        ),
        Step(
            "Singular values of G",
            f"By an SVD. The largest is {s[0] / s[-1]:.0f} times the smallest: a gradient "
            "step along G moves the weight little in the direction of σ3.",
            s,
            SOURCE,
            columns=sigma_labels,
            key="singular-values-of-g",
        ),
        Step(
            "X_0 = G / ||G||_F",
            "Divided by the Frobenius norm sqrt(Σ σ_i²) = "
            f"{np.sqrt((s**2).sum()):.4f}, every singular value is at most 1. (G has more "
            "rows than columns, so the iteration runs on Gᵀ and transposes back.)",
            xs[0],
            SOURCE,
            rows=rows,
            columns=cols,
            key="x-0-g-g-f",
        ),
        Step(
            "Singular values of X_0",
            "σ_i / ||G||_F.",
            singular_values(xs[0]),
            SOURCE,
            columns=sigma_labels,
            key="singular-values-of-x-0",
        ),
    ]
    for k in range(1, NS_STEPS + 1):
        steps.append(
            Step(
                f"X_{k} along G's singular directions",
                f"X_{k} = {a} X + ({b} A + {c} A²) X with A = X Xᵀ, X = X_{k - 1}: each σ "
                "becomes p(σ) = aσ + bσ³ + cσ⁵ (small ones grow about 3.4-fold per step, "
                "those near 1 stay in a band around 1). σi is the value along G's i-th "
                "singular direction (the diagonal of Uᵀ X V), so a column follows one "
                "direction; by size they can change places.",
                along_directions_of_g(xs[k]),
                SOURCE,
                columns=sigma_labels,
                key=f"singular-values-of-x-{k}",
            )
        )
    orthogonal = u @ vt
    steps += [
        Step(
            "X_5: Muon's update direction",
            "After five steps; Muon's step is W -= η s X_5, with s = sqrt(max(1, d_out/d_in)) "
            "(Keller Jordan's) or, under --muon-scale aspect (the default recipe's), "
            "sqrt(longer side / shorter side): here sqrt(4/3) either way.",
            xs[-1],
            SOURCE,
            rows=rows,
            columns=cols,
            key="x-5-muon-s-update-direction",
        ),
        Step(
            "U Vᵀ from the SVD of G",
            "The exact orthogonal factor: all singular values 1. X_5 has the same singular "
            "vectors; only its singular values differ from 1, by the quintic's band.",
            orthogonal,
            SOURCE,
            rows=rows,
            columns=cols,
            key="u-v-t-from-the-svd-of-g",
        ),
        Step(
            "Uᵀ X_5 V",
            "Diagonal (the singular vectors are kept), with X_5's singular values on it.",
            u.T @ xs[-1] @ vt.T,
            SOURCE,
            rows=sigma_labels,
            columns=sigma_labels,
            key="u-t-x-5-v",
        ),
    ]
    return steps


def singular_value_history() -> np.ndarray:
    """(NS_STEPS + 1, r): the singular values of X_0 ... X_5 along G's singular directions
    (:func:`along_directions_of_g`), one row per step, a column per direction."""
    return np.stack([along_directions_of_g(x) for x in iterates()])


def muon_figures(folder: Path) -> list[Path]:
    return [
        plots.newton_schulz_figure(
            folder / "muon_newton_schulz.png",
            singular_value_history(),
            NS_COEFFICIENTS,
            "Muon: Newton-Schulz orthogonalisation of a 4 x 3 matrix",
        )
    ]


# the worked examples of this module, in the order light-llm explain lists them
EXAMPLES = (
    Example(
        "muon",
        "Muon's Newton-Schulz orthogonalisation of a 4 x 3 matrix, its singular values "
        "step by step (Keller Jordan's Muon)",
        muon,
        muon_figures,
    ),
)
