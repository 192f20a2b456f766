"""Worked examples of the per-token layers: LayerNorm and RMSNorm of [1, 3, 2, 4] (seed 001),
the ReLU feed-forward network and SwiGLU (seed 001), computed by ``light_llm.nn.norms`` and
``light_llm.nn.feedforward``."""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F

from light_llm.config import ModelConfig
from light_llm.explain import plots
from light_llm.explain.steps import Example, Step, value_of
from light_llm.nn.feedforward import MLP, SwiGLU, activation_fn
from light_llm.nn.norms import LayerNorm, RMSNorm

SEED_001_NORM = "seed 001, Layer Normalization"
NORM_INPUT = [1.0, 3.0, 2.0, 4.0]


def norms() -> list[Step]:
    """LayerNorm and RMSNorm of x = [1, 3, 2, 4] with γ = 1, β = 0, ε = 1e-5 (seed 001, Layer
    Normalization and RMSNorm; seed 000 §5; seed 002 §5.3, eq. 19), by the modules the models
    use."""
    x = torch.tensor(NORM_INPUT, dtype=torch.float64)
    layer_norm = LayerNorm(4).double()
    rms_norm = RMSNorm(4).double()
    with torch.no_grad():
        normalized = layer_norm(x)
        rms_normalized = rms_norm(x)
    mean = x.mean()
    variance = x.var(unbiased=False)
    mean_square = (x * x).mean()
    return [
        Step(
            "x (one token, d_model = 4)",
            "The input vector.",
            x,
            SEED_001_NORM,
            key="x-one-token-d-model-4",
        ),
        Step(
            "μ = mean(x)",
            "(1 + 3 + 2 + 4) / 4.",
            mean,
            f"{SEED_001_NORM}, Step 1",
            seed_value=2.5,
            seed_decimals=1,
            key="mu-mean-x",
        ),
        Step(
            "σ² = mean((x - μ)²)",
            "The variance over the features (divided by d, not d - 1).",
            variance,
            f"{SEED_001_NORM}, Step 1",
            seed_value=1.25,
            key="sigma-2-mean-x-mu-2",
        ),
        Step(
            "σ = sqrt(σ²)",
            "The standard deviation; LayerNorm divides by sqrt(σ² + ε) with ε = 1e-5, which "
            "changes nothing in the 4th decimal here.",
            variance.sqrt(),
            f"{SEED_001_NORM}, Step 1",
            seed_value=1.118,
            seed_decimals=3,
            key="sigma-sqrt-sigma-2",
        ),
        Step(
            "LayerNorm(x) = γ (x - μ) / sqrt(σ² + ε) + β",
            "With γ = 1 and β = 0 (their initial values), by the models' LayerNorm layer "
            "(light_llm/nn/norms.py).",
            normalized,
            f"{SEED_001_NORM}, Steps 2-3",
            seed_value=[-1.34, 0.45, -0.45, 1.34],
            key="layernorm-x-gamma-x-mu-sqrt-sigma-2-eps-beta",
        ),
        Step(
            "mean and variance of LayerNorm(x)",
            "After normalising: mean 0 and variance 1 (a hair under 1 because of ε).",
            torch.stack([normalized.mean(), normalized.var(unbiased=False)]),
            f"{SEED_001_NORM}, Properties",
            columns=("mean", "variance"),
            key="mean-and-variance-of-layernorm-x",
        ),
        Step(
            "mean(x²)",
            "(1 + 9 + 4 + 16) / 4.",
            mean_square,
            "seed 001, RMSNorm",
            seed_value=7.5,
            seed_decimals=1,
            key="mean-x-2",
        ),
        Step(
            "RMS(x) = sqrt(mean(x²) + ε)",
            "The root mean square.",
            (mean_square + rms_norm.eps).sqrt(),
            "seed 001, RMSNorm",
            seed_value=2.74,
            key="rms-x-sqrt-mean-x-2-eps",
        ),
        Step(
            "RMSNorm(x) = γ x / RMS(x)",
            "No mean subtraction, γ = 1, by the models' RMSNorm layer. The seed divides by the "
            "rounded 2.74 (then rounds), so two entries differ: 1 / 2.7386 = 0.3651 and "
            "3 / 2.7386 = 1.0954.",
            rms_normalized,
            "seed 001, RMSNorm",
            seed_value=[0.36, 1.09, 0.73, 1.46],
            key="rmsnorm-x-gamma-x-rms-x",
        ),
    ]


SEED_001_FFN = "seed 001, Feed-Forward Networks"
FFN_INPUT = [0.5, 0.3, -0.2, 0.8]
FFN_W1 = [  # (in, out), the seed's "simplified to 4x4"
    [0.2, 0.1, 0.3, 0.4],
    [0.5, 0.2, 0.1, 0.3],
    [0.1, 0.4, 0.2, 0.5],
    [0.3, 0.1, 0.5, 0.2],
]
FFN_W2 = [
    [0.1, 0.2, 0.3, 0.1],
    [0.4, 0.1, 0.2, 0.3],
    [0.2, 0.3, 0.1, 0.4],
    [0.3, 0.4, 0.2, 0.1],
]
SEED_FFN_HIDDEN = [0.45, 0.23, 0.67, 0.58]
SEED_FFN_OUTPUT = [0.62, 0.51, 0.43, 0.54]


def small_ffn_config(activation: str) -> ModelConfig:
    """d_model = d_ff = 4 without biases: the seed's simplified 4x4 matrices."""
    return ModelConfig(
        vocab_size=1,
        block_size=1,
        n_layer=1,
        n_head=1,
        n_embd=4,
        n_inner=4,
        activation=activation,
        bias=False,
    )


def load_linear(layer: torch.nn.Linear, weight_in_out) -> None:
    """Load a seed matrix W (in, out), for y = x W, into an nn.Linear (which holds W^T)."""
    with torch.no_grad():
        layer.weight.copy_(torch.tensor(weight_in_out, dtype=torch.float64).T)


def feedforward() -> list[Step]:
    """FFN(x) = max(0, x W_1 + b_1) W_2 + b_2 with the seed's 4x4 W_1 and W_2 (seed 001,
    Feed-Forward Networks; seed 000 §4), by nn.feedforward.MLP with activation 'relu'."""
    mlp = MLP(small_ffn_config("relu")).double()
    load_linear(mlp.c_fc, FFN_W1)
    load_linear(mlp.c_proj, FFN_W2)
    x = torch.tensor(FFN_INPUT, dtype=torch.float64)
    with torch.no_grad():
        hidden = mlp.c_fc(x)
        activated = activation_fn("relu", hidden)
        output = mlp.c_proj(activated)
        module_output = mlp(x)
        seed_hidden = torch.tensor(SEED_FFN_HIDDEN, dtype=torch.float64)
        implied_b1 = seed_hidden - hidden
        seed_hidden_through_w2 = mlp.c_proj(seed_hidden)
    return [
        Step(
            "x",
            "Assumed: the seed's W_1 and W_2 as printed (4x4, 'simplified' from 4x16 and "
            "16x4, so d_ff = 4) and no biases, b_1 = b_2 = 0, since the seed gives none.",
            x,
            SEED_001_FFN,
            key="x",
        ),
        Step(
            "W_1 (in x out)",
            "The seed's simplified first layer.",
            FFN_W1,
            SEED_001_FFN,
            key="w-1-in-x-out",
        ),
        Step(
            "h = x W_1 + b_1",
            "The first linear layer of the feed-forward block. The seed's h is 'after bias' with "
            "a bias it never gives; that h "
            "would need the b_1 of the next step.",
            hidden,
            f"{SEED_001_FFN}, Step 1",
            seed_value=SEED_FFN_HIDDEN,
            key="h-x-w-1-b-1",
        ),
        Step(
            "b_1 the seed's h implies (seed h - x W_1)",
            "Not used below: just what bias the seed's numbers would need.",
            implied_b1,
            f"{SEED_001_FFN}, Step 1",
            key="b-1-the-seed-s-h-implies-seed-h-x-w-1",
        ),
        Step(
            "ReLU(h) = max(0, h)",
            "All entries are positive, so nothing changes.",
            activated,
            f"{SEED_001_FFN}, Step 2",
            seed_value=SEED_FFN_HIDDEN,
            key="relu-h-max-0-h",
        ),
        Step(
            "W_2 (in x out)",
            "The seed's simplified second layer.",
            FFN_W2,
            SEED_001_FFN,
            key="w-2-in-x-out",
        ),
        Step(
            "output = ReLU(h) W_2 + b_2",
            "The second linear layer, with b_2 = 0.",
            output,
            f"{SEED_001_FFN}, Step 3",
            seed_value=SEED_FFN_OUTPUT,
            key="output-relu-h-w-2-b-2",
        ),
        Step(
            "The seed's h times W_2",
            "Even from its own h the seed's output does not follow without a b_2 it never gives.",
            seed_hidden_through_w2,
            f"{SEED_001_FFN}, Step 3",
            seed_value=SEED_FFN_OUTPUT,
            key="the-seed-s-h-times-w-2",
        ),
        Step(
            "The feed-forward layer in one call",
            "The models' feed-forward layer (light_llm/nn/feedforward.py) run on x in one "
            "call: the same as the steps above.",
            module_output,
            SEED_001_FFN,
            key="the-feed-forward-layer-in-one-call",
        ),
    ]


SEED_001_SWIGLU = "seed 001, SwiGLU"
SEED_SWIGLU_GATE = [0.42, 0.19, 0.53, 0.45]
SEED_SWIGLU_VALUE = [0.68, 0.34, 0.22, 0.71]


def swiglu() -> list[Step]:
    """SwiGLU(x) = Swish(x W_1) ⊙ (x V), Swish(z) = z σ(z) (seed 001, SwiGLU, β = 1), by
    nn.feedforward.SwiGLU with its output projection W_2 set to the identity."""
    module = SwiGLU(small_ffn_config("swiglu")).double()
    load_linear(module.c_fc, FFN_W1)
    load_linear(module.c_v, FFN_W2)
    load_linear(module.c_proj, torch.eye(4).tolist())
    x = torch.tensor(FFN_INPUT, dtype=torch.float64)
    with torch.no_grad():
        gate_input = module.c_fc(x)
        gate = F.silu(gate_input)  # Swish with β = 1, as SwiGLU.forward
        value = module.c_v(x)
        module_output = module(x)
    seed_product = torch.tensor(SEED_SWIGLU_GATE) * torch.tensor(SEED_SWIGLU_VALUE)
    return [
        Step(
            "x",
            "Assumed: the seed gives no W_1 or V for SwiGLU, so W_1 and V are the FFN "
            "example's W_1 and W_2, with no biases and β = 1. The seed's gate "
            f"{SEED_SWIGLU_GATE} and value {SEED_SWIGLU_VALUE} come from weights it does not "
            "print, so they are not compared; their product is checked at the end.",
            x,
            SEED_001_SWIGLU,
            key="x",
        ),
        Step("x W_1", "The gate's linear projection.", gate_input, SEED_001_SWIGLU, key="x-w-1"),
        Step(
            "Gate: Swish(x W_1) = z σ(z)",
            "Swish (SiLU) lets small negative values through, scaled down.",
            gate,
            SEED_001_SWIGLU,
            key="gate-swish-x-w-1-z-sigma-z",
        ),
        Step(
            "Value: x V",
            "A second linear projection, not gated.",
            value,
            SEED_001_SWIGLU,
            key="value-x-v",
        ),
        Step(
            "SwiGLU(x) = Swish(x W_1) ⊙ (x V)",
            "The models' SwiGLU layer (light_llm/nn/feedforward.py) with W_2 = I, so its "
            "output is the gated product itself.",
            module_output,
            SEED_001_SWIGLU,
            key="swiglu-x-swish-x-w-1-x-v",
        ),
        Step(
            "The seed's gate ⊙ the seed's value",
            "The seed's own product checks out to its 2 decimals.",
            seed_product,
            SEED_001_SWIGLU,
            seed_value=[0.29, 0.06, 0.12, 0.32],
            key="the-seed-s-gate-the-seed-s-value",
        ),
    ]


def norms_figures(folder: Path) -> list[Path]:
    steps = norms()
    series = [
        ("x", value_of(steps, "x-one-token-d-model-4")),
        ("LayerNorm(x)", value_of(steps, "layernorm-x-gamma-x-mu-sqrt-sigma-2-eps-beta")),
        ("RMSNorm(x)", value_of(steps, "rmsnorm-x-gamma-x-rms-x")),
    ]
    labels = [f"feature {i}" for i in range(len(NORM_INPUT))]
    title = "LayerNorm centres and scales x = [1, 3, 2, 4]; RMSNorm only scales it (seed 001)"
    return [plots.grouped_bars(folder / "norms.png", series, labels, title, "value", annotate=True)]


def activation_figures(folder: Path) -> list[Path]:
    return [plots.activations_figure(folder / "activations.png")]


# the worked examples of this module, in the order light-llm explain lists them
EXAMPLES = (
    Example(
        "norms",
        "LayerNorm and RMSNorm of [1, 3, 2, 4] (seed 001)",
        norms,
        norms_figures,
    ),
    Example(
        "ffn",
        "the ReLU feed-forward network with the seed's 4x4 W_1, W_2 (seed 001)",
        feedforward,
        activation_figures,
    ),
    Example(
        "swiglu",
        "SwiGLU: Swish(x W_1) ⊙ (x V) (seed 001)",
        swiglu,
        activation_figures,
    ),
)
