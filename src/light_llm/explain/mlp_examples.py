"""The worked example of seed 002 §5: a two-layer MLP, its forward pass (eqs. 13-15) and its
backward pass (eqs. 16-18), computed by the NumPy engine's own layers
(``light_llm.reference.linear`` and ``light_llm.reference.activations``), whose hand-written
backward passes the GPT of the NumPy engine trains with.

The engine stores a weight as PyTorch does, (out, in), and computes y = x W^T + b; the seed
writes y = x W with W (in, out). The steps show the seed's layout: W = the engine's W^T.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from light_llm.explain import plots
from light_llm.explain.steps import Example, Step
from light_llm.reference.activations import activation_backward, activation_forward
from light_llm.reference.linear import linear_backward, linear_forward

SEED_002_MLP = "seed 002 §5"
MLP_X = [[1.0, -0.5, 2.0]]  # (1, d_in = 3)
MLP_W1 = [[0.2, -0.4, 0.1, 0.5], [0.3, 0.1, -0.2, 0.4], [-0.1, 0.3, 0.2, -0.3]]  # (in, hidden)
MLP_B1 = [0.1, 0.0, -0.1, 0.05]
MLP_W2 = [[0.5, -0.2], [-0.3, 0.4], [0.2, 0.1], [0.1, -0.5]]  # (hidden, out)
MLP_B2 = [0.0, 0.1]
MLP_TARGET = [[1.0, 0.0]]  # y
ACTIVATION = "gelu"


def mlp_backprop() -> list[Step]:
    """Forward z1 = x W1 + b1, h1 = GELU(z1), z2 = h1 W2 + b2 (seed 002 §5.1, eqs. 13-15;
    GELU as §9.2, eq. 40), loss L = ½ ||z2 - y||², and backward ∂L/∂z2 = z2 - y (eq. 16),
    ∂L/∂W2 = h1^T ∂L/∂z2 (eq. 17), ∂L/∂W1 = x^T (∂L/∂z2 W2^T ⊙ σ'(z1)) (eq. 18), by the NumPy
    engine's linear and activation layers."""
    x = np.array(MLP_X)
    w1, b1 = np.array(MLP_W1), np.array(MLP_B1)
    w2, b2 = np.array(MLP_W2), np.array(MLP_B2)
    target = np.array(MLP_TARGET)
    z1, cache1 = linear_forward(x, w1.T, b1)  # the engine takes W as (out, in)
    h1, activation_cache = activation_forward(ACTIVATION, z1)
    z2, cache2 = linear_forward(h1, w2.T, b2)
    loss = 0.5 * float(((z2 - target) ** 2).sum())
    grad_z2 = z2 - target  # ∂L/∂ŷ for L = ½ ||ŷ - y||², ŷ = z2
    grad_h1, grad_w2_engine, grad_b2 = linear_backward(grad_z2, cache2)
    slope = activation_backward(ACTIVATION, np.ones_like(z1), activation_cache)  # σ'(z1)
    grad_z1 = activation_backward(ACTIVATION, grad_h1, activation_cache)
    grad_x, grad_w1_engine, grad_b1 = linear_backward(grad_z1, cache1)
    hidden = tuple(f"h{j}" for j in range(w1.shape[1]))
    outputs = ("out 0", "out 1")
    inputs = tuple(f"x{i}" for i in range(w1.shape[0]))
    return [
        Step(
            "x, W1, b1, W2, b2 and the target y",
            "Assumed (the seed gives shapes only): d_in = 3, d_hidden = 4, d_out = 2; x is one "
            "row; W1 is below; W2 = "
            f"{MLP_W2}, b1 = {MLP_B1}, b2 = {MLP_B2}; target y = {MLP_TARGET[0]}. The loss is "
            "L = ½ ||ŷ - y||² with ŷ = z2.",
            x[0],
            SEED_002_MLP,
            columns=inputs,
            key="x-w1-b1-w2-b2-and-the-target-y",
        ),
        Step(
            "W1 (in x hidden)",
            "The first layer's weights.",
            w1,
            SEED_002_MLP,
            rows=inputs,
            key="w1-in-x-hidden",
        ),
        Step(
            "z1 = x W1 + b1",
            "Eq. 13: each hidden unit's weighted sum of the inputs plus its bias, by the NumPy "
            "engine's linear layer.",
            z1[0],
            f"{SEED_002_MLP}.1, eq. 13",
            columns=hidden,
            key="z1-x-w1-b1",
        ),
        Step(
            "h1 = σ(z1), σ = GELU",
            "Eq. 14 with σ = GELU(z) = z Φ(z) (§9.2, eq. 40): large positive z pass almost "
            "unchanged, negative ones are squashed towards 0.",
            h1[0],
            f"{SEED_002_MLP}.1, eq. 14",
            columns=hidden,
            key="h1-sigma-z1-sigma-gelu",
        ),
        Step(
            "z2 = h1 W2 + b2",
            "Eq. 15: the output ŷ.",
            z2[0],
            f"{SEED_002_MLP}.1, eq. 15",
            columns=outputs,
            key="z2-h1-w2-b2",
        ),
        Step(
            "Loss L = ½ ||ŷ - y||²",
            "Squared error against the target.",
            loss,
            SEED_002_MLP,
            key="loss-l-y-hat-y-2",
        ),
        Step(
            "∂L/∂z2 = ∂L/∂ŷ = ŷ - y",
            "Eq. 16: the output layer has no non-linearity, so the gradient at z2 is the "
            "gradient at the prediction, here ŷ - y.",
            grad_z2[0],
            f"{SEED_002_MLP}.2, eq. 16",
            columns=outputs,
            key="d-l-d-z2-d-l-d-y-hat-y-hat-y",
        ),
        Step(
            "∂L/∂W2 = h1^T ∂L/∂z2",
            "Eq. 17: an outer product, hidden activation times output error. From the engine's "
            "linear backward (which returns it in its (out, in) layout, transposed here).",
            grad_w2_engine.T,
            f"{SEED_002_MLP}.2, eq. 17",
            rows=hidden,
            columns=outputs,
            key="d-l-d-w2-h1-t-d-l-d-z2",
        ),
        Step(
            "∂L/∂b2 = ∂L/∂z2",
            "A bias gets the gradient of the sum it is added to.",
            grad_b2,
            f"{SEED_002_MLP}.2",
            columns=outputs,
            key="d-l-d-b2-d-l-d-z2",
        ),
        Step(
            "∂L/∂h1 = ∂L/∂z2 W2^T",
            "The error sent back to the hidden layer: through the transpose of W2 (§2.2).",
            grad_h1[0],
            f"{SEED_002_MLP}.2, eq. 18",
            columns=hidden,
            key="d-l-d-h1-d-l-d-z2-w2-t",
        ),
        Step(
            "σ'(z1): the slope of GELU at z1",
            "GELU'(z) = Φ(z) + z φ(z), from the engine's GELU backward.",
            slope[0],
            f"{SEED_002_MLP}.2, eq. 18",
            columns=hidden,
            key="sigma-z1-the-slope-of-gelu-at-z1",
        ),
        Step(
            "∂L/∂z1 = ∂L/∂h1 ⊙ σ'(z1)",
            "Element by element: a unit whose GELU is flat passes little gradient.",
            grad_z1[0],
            f"{SEED_002_MLP}.2, eq. 18",
            columns=hidden,
            key="d-l-d-z1-d-l-d-h1-sigma-z1",
        ),
        Step(
            "∂L/∂W1 = x^T (∂L/∂z2 W2^T ⊙ σ'(z1))",
            "Eq. 18: input times the hidden error, again an outer product.",
            grad_w1_engine.T,
            f"{SEED_002_MLP}.2, eq. 18",
            rows=inputs,
            columns=hidden,
            key="d-l-d-w1-x-t-d-l-d-z2-w2-t-sigma-z1",
        ),
        Step(
            "∂L/∂b1 = ∂L/∂z1",
            "The first bias's gradient.",
            grad_b1,
            f"{SEED_002_MLP}.2",
            columns=hidden,
            key="d-l-d-b1-d-l-d-z1",
        ),
        Step(
            "∂L/∂x = ∂L/∂z1 W1^T",
            "The gradient at the input, which a layer below would receive.",
            grad_x[0],
            f"{SEED_002_MLP}.2",
            columns=inputs,
            key="d-l-d-x-d-l-d-z1-w1-t",
        ),
    ]


def mlp_figures(folder: Path) -> list[Path]:
    steps = {step.key: np.asarray(step.value) for step in mlp_backprop()}
    labels = [f"hidden unit {j}" for j in range(4)]
    series = [
        ("z1 (before σ)", steps["z1-x-w1-b1"]),
        ("h1 = GELU(z1)", steps["h1-sigma-z1-sigma-gelu"]),
        ("σ'(z1)", steps["sigma-z1-the-slope-of-gelu-at-z1"]),
        ("∂L/∂z1", steps["d-l-d-z1-d-l-d-h1-sigma-z1"]),
    ]
    title = "Two-layer MLP (seed 002 §5): the hidden layer forward, and the gradient through it"
    return [plots.grouped_bars(folder / "mlp_hidden_layer.png", series, labels, title, "value")]


# the worked examples of this module, in the order light-llm explain lists them
EXAMPLES = (
    Example(
        "mlp-backprop",
        "a two-layer MLP forward (eqs. 13-15) and backward (eqs. 16-18) by the NumPy "
        "engine's layers (seed 002 §5)",
        mlp_backprop,
        mlp_figures,
    ),
)
