"""Gradient checking: every hand-written backward against central finite differences.

For an operation y = f(θ, ...) and a fixed random upstream gradient G, the scalar
L = Σ G ⊙ f(...) has ∂L/∂θ = backward(G). Its central difference, one entry at a time,

    ∂L/∂θ_i ≈ (L(θ + h e_i) - L(θ - h e_i)) / 2h        (error O(h²))

checks that number without using any derivative rule (seed 002 §2.2: the gradient has the
shape of θ, entry by entry). The two are compared by the relative error
max|a - n| / max(max|a| + max|n|, floor).

``light-llm gradcheck [OP]`` runs these checks and prints one line per parameter.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from light_llm.config import ModelConfig
from light_llm.errors import ConfigError
from light_llm.reference.activations import (
    gelu_backward,
    gelu_forward,
    gelu_tanh_backward,
    gelu_tanh_forward,
    relu_backward,
    relu_forward,
    swiglu_backward,
    swiglu_forward,
)
from light_llm.reference.attention import (
    attention_backward,
    attention_forward,
    attention_mask,
    merge_heads,
    split_heads,
)
from light_llm.reference.dropout import dropout_backward, dropout_forward
from light_llm.reference.embedding import embedding_backward, embedding_forward
from light_llm.reference.linear import linear_backward, linear_forward
from light_llm.reference.linear_attention import (
    causal_linear_attention_backward,
    causal_linear_attention_forward,
)
from light_llm.reference.loss import cross_entropy_backward, cross_entropy_forward
from light_llm.reference.model import NumpyGPT
from light_llm.reference.norms import (
    layernorm_backward,
    layernorm_forward,
    rmsnorm_backward,
    rmsnorm_forward,
)
from light_llm.reference.positions import rope_angles, rotary_backward, rotary_forward
from light_llm.reference.softmax import (
    log_softmax_backward,
    log_softmax_forward,
    softmax_backward,
    softmax_forward,
)

Arrays = dict[str, np.ndarray]
STEP = {np.float64: 1e-6, np.float32: 1e-2}  # h: rounding error ~ eps/h, truncation ~ h²
TOLERANCE = {np.float64: 1e-6, np.float32: 1e-2}


def relative_error(analytic: np.ndarray, numeric: np.ndarray, floor: float = 1e-30) -> float:
    """max|a - n| / max(max|a| + max|n|, floor): 0 when they agree, 1 when unrelated."""
    analytic = np.asarray(analytic, dtype=np.float64)
    numeric = np.asarray(numeric, dtype=np.float64)
    scale = np.abs(analytic).max(initial=0.0) + np.abs(numeric).max(initial=0.0)
    return float(np.abs(analytic - numeric).max(initial=0.0) / max(scale, floor))


def numerical_gradient(loss: Callable[[], float], x: np.ndarray, h: float) -> np.ndarray:
    """Central differences of the scalar ``loss()`` with respect to every entry of ``x``,
    which is perturbed in place (and restored)."""
    grad = np.zeros(x.shape, dtype=np.float64)
    flat, flat_grad = x.reshape(-1), grad.reshape(-1)
    for i in range(flat.size):
        original = flat[i]
        flat[i] = original + h
        plus = loss()
        flat[i] = original - h
        minus = loss()
        flat[i] = original
        flat_grad[i] = (plus - minus) / (2.0 * h)
    return grad


@dataclass
class OpCheck:
    """An operation to check: its inputs (the differentiable ones by name, plus constants
    bound in the closures), a forward returning (output, cache) and a backward returning the
    gradients by the same names."""

    description: str
    inputs: Callable[[np.random.Generator, type], Arrays]
    forward: Callable[[Arrays], tuple]
    backward: Callable[[np.ndarray, object], Arrays]
    floor_fraction: float = 0.0  # errors of gradients below this share of the largest one
    # are measured against it (a structurally zero gradient has no relative error)
    notes: list[str] = field(default_factory=list)


@dataclass
class GradcheckResult:
    op: str
    parameter: str
    shape: tuple[int, ...]
    max_abs_gradient: float
    relative_error: float
    tolerance: float

    @property
    def ok(self) -> bool:
        return self.relative_error <= self.tolerance


def run_check(name: str, check: OpCheck, dtype=np.float64, seed: int = 0) -> list[GradcheckResult]:
    """Compare ``check``'s backward with central differences, one result per input."""
    dtype = np.dtype(dtype).type
    if dtype not in STEP:
        raise ConfigError(f"gradcheck runs in float64 or float32, not {np.dtype(dtype).name}.")
    rng = np.random.default_rng(seed)
    inputs = check.inputs(rng, dtype)
    out, cache = check.forward(inputs)
    upstream = rng.standard_normal(np.shape(out)).astype(dtype) if np.ndim(out) else 1.0
    analytic = check.backward(np.asarray(upstream, dtype=dtype), cache)

    def loss() -> float:
        value, _ = check.forward(inputs)
        return float(np.sum(np.asarray(value, dtype=np.float64) * upstream))

    largest = max(float(np.abs(g).max(initial=0.0)) for g in analytic.values())
    results = []
    for param, value in inputs.items():
        numeric = numerical_gradient(loss, value, STEP[dtype])
        error = relative_error(analytic[param], numeric, floor=check.floor_fraction * largest)
        results.append(
            GradcheckResult(
                name,
                param,
                value.shape,
                float(np.abs(analytic[param]).max(initial=0.0)),
                error,
                TOLERANCE[dtype],
            )
        )
    return results


# --------------------------------------------------------------------------- the operations
def away_from_zero(rng: np.random.Generator, shape, dtype) -> np.ndarray:
    """Random values with |x| >= 0.05, so that a kink at 0 (ReLU) is never within h."""
    x = rng.standard_normal(shape)
    return (np.sign(x) * (np.abs(x) + 0.05)).astype(dtype)


def normal(rng: np.random.Generator, shape, dtype, scale: float = 1.0) -> np.ndarray:
    return (scale * rng.standard_normal(shape)).astype(dtype)


def linear_check() -> OpCheck:
    return OpCheck(
        "y = x W^T + b",
        lambda rng, dt: {
            "x": normal(rng, (3, 4, 5), dt),
            "weight": normal(rng, (6, 5), dt),
            "bias": normal(rng, (6,), dt),
        },
        lambda a: linear_forward(a["x"], a["weight"], a["bias"]),
        lambda d, c: dict(zip(("x", "weight", "bias"), linear_backward(d, c), strict=True)),
    )


def embedding_check() -> OpCheck:
    idx = np.array([[0, 3, 3, 6], [2, 0, 5, 3]])  # repeated rows add their gradients
    return OpCheck(
        "E[idx]",
        lambda rng, dt: {"weight": normal(rng, (7, 5), dt)},
        lambda a: embedding_forward(idx, a["weight"]),
        lambda d, c: {"weight": embedding_backward(d, c)},
    )


def layernorm_check() -> OpCheck:
    return OpCheck(
        "γ (x - μ) / sqrt(σ² + ε) + β",
        lambda rng, dt: {
            "x": normal(rng, (3, 4, 6), dt, 2.0),
            "weight": normal(rng, (6,), dt),
            "bias": normal(rng, (6,), dt),
        },
        lambda a: layernorm_forward(a["x"], a["weight"], a["bias"]),
        lambda d, c: dict(zip(("x", "weight", "bias"), layernorm_backward(d, c), strict=True)),
    )


def rmsnorm_check() -> OpCheck:
    return OpCheck(
        "γ x / sqrt(mean(x²) + ε)",
        lambda rng, dt: {"x": normal(rng, (3, 4, 6), dt, 2.0), "weight": normal(rng, (6,), dt)},
        lambda a: rmsnorm_forward(a["x"], a["weight"]),
        lambda d, c: dict(zip(("x", "weight"), rmsnorm_backward(d, c), strict=True)),
    )


def elementwise_check(description: str, forward, backward) -> OpCheck:
    return OpCheck(
        description,
        lambda rng, dt: {"x": away_from_zero(rng, (3, 4, 7), dt) * 2},
        lambda a: forward(a["x"]),
        lambda d, c: {"x": backward(d, c)},
    )


def swiglu_check() -> OpCheck:
    return OpCheck(
        "Swish(gate) ⊙ value",
        lambda rng, dt: {
            "gate": normal(rng, (3, 4, 6), dt, 2.0),
            "value": normal(rng, (3, 4, 6), dt),
        },
        lambda a: swiglu_forward(a["gate"], a["value"]),
        lambda d, c: dict(zip(("gate", "value"), swiglu_backward(d, c), strict=True)),
    )


def attention_check(causal: bool, padded: bool, dropout_p: float = 0.0) -> OpCheck:
    B, nh, T, hs = 2, 3, 5, 4
    key_padding = np.array([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]], dtype=bool) if padded else None
    allowed = attention_mask(T, T, 0, causal, key_padding)

    def forward(a: Arrays):
        rng = np.random.default_rng(1234)  # the same dropout mask at every call
        return attention_forward(a["q"], a["k"], a["v"], allowed, dropout_p, rng)

    parts = ["softmax(Q K^T / sqrt(d_k)) V"]
    parts += ["causal mask"] if causal else []
    parts += ["padding mask"] if padded else []
    parts += [f"attention dropout {dropout_p}"] if dropout_p else []
    return OpCheck(
        ", ".join(parts),
        lambda rng, dt: {k: normal(rng, (B, nh, T, hs), dt) for k in ("q", "k", "v")},
        forward,
        lambda d, c: dict(zip(("q", "k", "v"), attention_backward(d, c), strict=True)),
    )


def split_heads_check() -> OpCheck:
    return OpCheck(
        "(B, T, d) -> (B, nh, T, hs); backward = merge",
        lambda rng, dt: {"x": normal(rng, (2, 3, 6), dt)},
        lambda a: (split_heads(a["x"], 3), None),
        lambda d, c: {"x": merge_heads(d)},
    )


def rotary_check() -> OpCheck:
    cos64, sin64 = rope_angles(np.arange(3, 8), 6, 100.0)

    def forward(a: Arrays):
        dt = a["x"].dtype
        return rotary_forward(a["x"], cos64.astype(dt), sin64.astype(dt))

    return OpCheck(
        "rotate pairs (x_2i, x_2i+1) by m θ_i",
        lambda rng, dt: {"x": normal(rng, (2, 2, 5, 6), dt)},
        forward,
        lambda d, c: {"x": rotary_backward(d, c)},
    )


def dropout_check() -> OpCheck:
    return OpCheck(
        "x ⊙ mask / (1 - p), p = 0.3",
        lambda rng, dt: {"x": normal(rng, (4, 9), dt)},
        lambda a: dropout_forward(a["x"], 0.3, np.random.default_rng(7)),
        lambda d, c: {"x": dropout_backward(d, c)},
    )


def cross_entropy_check() -> OpCheck:
    targets = np.array([[1, 4, -1, 0, 6], [2, 2, 5, -1, 3]])  # -1 is ignored
    return OpCheck(
        "mean -log p[target], ignore -1, label smoothing 0.1",
        lambda rng, dt: {"logits": normal(rng, (2, 5, 7), dt, 2.0)},
        lambda a: cross_entropy_forward(a["logits"], targets, -1, 0.1),
        lambda d, c: {"logits": cross_entropy_backward(c, float(d))},
    )


def linear_attention_check() -> OpCheck:
    key_padding = np.array([[0, 1, 1, 1, 1], [1, 1, 1, 1, 1]], dtype=bool)
    return OpCheck(
        "causal φ(Q) (φ(K)^T V) / φ(Q) (φ(K)^T 1), padding mask",
        lambda rng, dt: {k: normal(rng, (2, 2, 5, 3), dt) for k in ("q", "k", "v")},
        lambda a: causal_linear_attention_forward(a["q"], a["k"], a["v"], key_padding),
        lambda d, c: dict(
            zip(("q", "k", "v"), causal_linear_attention_backward(d, c), strict=True)
        ),
    )


TINY_GPT = dict(vocab_size=11, block_size=8, n_layer=2, n_head=2, n_embd=8, dropout=0.1)


def gpt_check(config: ModelConfig | None = None, batch: int = 2, length: int = 6) -> OpCheck:
    """The whole NumpyGPT: every parameter, through the loss, in training mode (the same
    dropout masks at every forward). Padding the first row exercises the padding mask."""
    config = config or ModelConfig(**TINY_GPT)
    data = np.random.default_rng(99)
    idx = data.integers(0, config.vocab_size, (batch, length))
    targets = data.integers(0, config.vocab_size, (batch, length))
    targets[0, 0] = -1
    mask = np.ones((batch, length), dtype=np.int64)
    mask[0, :2] = 0
    built: dict[str, NumpyGPT] = {}  # the model whose parameters are the inputs

    def inputs(rng: np.random.Generator, dtype) -> Arrays:
        model = built["model"] = NumpyGPT(config, dtype=dtype)
        for name, value in model.params.items():  # move off the init's 0 / 1 values
            value += normal(rng, value.shape, dtype, 0.1 if name.endswith("bias") else 0.3)
        return model.params

    def forward(params: Arrays):
        model = built["model"]
        model.training = True
        model.rng = np.random.default_rng(5)
        _, loss, cache = model.forward(idx, targets, attention_mask=mask, label_smoothing=0.1)
        return loss, cache

    return OpCheck(
        "NumpyGPT loss, every parameter",
        inputs,
        forward,
        lambda d, c: built["model"].backward(c),
        floor_fraction=1e-3,
    )


OPS: dict[str, Callable[[], OpCheck]] = {
    "linear": linear_check,
    "embedding": embedding_check,
    "layernorm": layernorm_check,
    "rmsnorm": rmsnorm_check,
    "gelu": lambda: elementwise_check("x Φ(x)", gelu_forward, gelu_backward),
    "gelu_tanh": lambda: elementwise_check(
        "½ x (1 + tanh(√(2/π)(x + 0.044715 x³)))", gelu_tanh_forward, gelu_tanh_backward
    ),
    "relu": lambda: elementwise_check("max(0, x)", relu_forward, relu_backward),
    "swiglu": swiglu_check,
    "softmax": lambda: elementwise_check("e^z / Σ e^z", softmax_forward, softmax_backward),
    "log_softmax": lambda: elementwise_check(
        "z - log Σ e^z", log_softmax_forward, log_softmax_backward
    ),
    "attention": lambda: attention_check(causal=False, padded=False),
    "causal_attention": lambda: attention_check(causal=True, padded=False),
    "padded_attention": lambda: attention_check(causal=True, padded=True),
    "attention_dropout": lambda: attention_check(causal=True, padded=False, dropout_p=0.25),
    "split_heads": split_heads_check,
    "rotary": rotary_check,
    "dropout": dropout_check,
    "cross_entropy": cross_entropy_check,
    "linear_attention": linear_attention_check,
    "gpt": gpt_check,
}


def check_op(name: str, dtype=np.float64, seed: int = 0) -> list[GradcheckResult]:
    """Run the gradient check of the operation ``name`` (one of :data:`OPS`)."""
    if name not in OPS:
        raise ConfigError(f"unknown operation {name!r}; known operations: {', '.join(OPS)}.")
    return run_check(name, OPS[name](), dtype, seed)
