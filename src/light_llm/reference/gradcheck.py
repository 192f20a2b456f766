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
from dataclasses import dataclass

import numpy as np

from light_llm.config import PRESETS, ModelConfig
from light_llm.errors import ConfigError
from light_llm.limits import check_seed
from light_llm.reference.activations import (
    gelu_backward,
    gelu_forward,
    gelu_tanh_backward,
    gelu_tanh_forward,
    relu2_backward,
    relu2_forward,
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
from light_llm.reference.lora import lora_backward, lora_forward
from light_llm.reference.loss import cross_entropy_backward, cross_entropy_forward
from light_llm.reference.model import NumpyGPT
from light_llm.reference.norms import (
    layernorm_backward,
    layernorm_forward,
    rms_normalize_backward,
    rms_normalize_forward,
    rmsnorm_backward,
    rmsnorm_forward,
)
from light_llm.reference.positions import rope_angles, rotary_backward, rotary_forward
from light_llm.reference.softcap import softcap_backward, softcap_forward
from light_llm.reference.softmax import (
    log_softmax_backward,
    log_softmax_forward,
    softmax_backward,
    softmax_forward,
)

Arrays = dict[str, np.ndarray]
STEP = {np.float64: 1e-6, np.float32: 1e-2}  # h: rounding error ~ eps/h, truncation ~ h²
# A whole model in float32 takes a smaller step. ReLU²'s derivative 2 max(0, x) has a kink at
# 0: a pre-activation within h of it puts an O(h) error in its central difference ((x + h)²/(2h),
# h/2 at x = 0, against 0), which at 1e-2 took a whole float32 model over the tolerance (2e-2);
# and the default's model (RMSNorm, QK-norm, SwiGLU) or linear attention, through the
# embedding, missed by up to 4e-2 at 1e-2 from truncation (h²) alone. At 3e-3 every model
# check stays under 3.5e-3 over ten seeds while rounding (eps/h) stays far below the tolerance;
# except the smear's gate, whose gradient (about 3e-3) rounding then swamps: it keeps 1e-2.
MODEL_FLOAT32_STEP = 3e-3
TOLERANCE = {np.float64: 1e-6, np.float32: 1e-2}


def relative_error(analytic: np.ndarray, numeric: np.ndarray, floor: float = 0.0) -> float:
    """max|a - n| / max(max|a| + max|n|, floor, tiny): 0 when they agree, 1 when unrelated
    (and 0 when both are exactly zero)."""
    analytic = np.asarray(analytic, dtype=np.float64)
    numeric = np.asarray(numeric, dtype=np.float64)
    scale = np.abs(analytic).max(initial=0.0) + np.abs(numeric).max(initial=0.0)
    tiny = np.finfo(np.float64).tiny
    return float(np.abs(analytic - numeric).max(initial=0.0) / max(scale, floor, tiny))


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
    """An operation to check. ``make(rng, dtype)`` draws random sizes and values and returns
    (inputs, constants): the differentiable arrays by name, and what else the op needs
    (indices, masks, targets). ``forward(inputs, constants)`` returns (output, cache);
    ``backward(dout, cache, constants)`` returns the gradients by the inputs' names."""

    description: str
    make: Callable[[np.random.Generator, type], tuple[Arrays, dict]]
    forward: Callable[[Arrays, dict], tuple]
    backward: Callable[[np.ndarray, object, dict], Arrays]
    # errors of gradients smaller than this share of the largest one are measured against it
    # (a gradient that is zero by structure has no relative error)
    floor_fraction: float = 0.0
    # the central differences' step in float32, where one is chosen for this check (else STEP)
    float32_step: float | None = None


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
    rng = np.random.default_rng(check_seed(seed))
    inputs, constants = check.make(rng, dtype)
    out, cache = check.forward(inputs, constants)
    # a random upstream gradient, a scalar output's too (a magnitude of 0.5 to 2, either sign):
    # with 1 a backward that ignored its upstream gradient (dloss) would pass
    if np.ndim(out):
        upstream = rng.standard_normal(np.shape(out)).astype(dtype)
    else:
        upstream = float(rng.uniform(0.5, 2.0) * rng.choice([-1.0, 1.0]))
    analytic = check.backward(np.asarray(upstream, dtype=dtype), cache, constants)

    def loss() -> float:
        value, _ = check.forward(inputs, constants)
        return float(np.sum(np.asarray(value, dtype=np.float64) * upstream))

    largest = max(float(np.abs(g).max(initial=0.0)) for g in analytic.values())
    results = []
    step = check.float32_step if dtype is np.float32 and check.float32_step else STEP[dtype]
    for param, value in inputs.items():
        numeric = numerical_gradient(loss, value, step)
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
def sizes(rng: np.random.Generator, *ranges: tuple[int, int]) -> list[int]:
    """One random size from each inclusive range."""
    return [int(rng.integers(low, high + 1)) for low, high in ranges]


def normal(rng: np.random.Generator, shape, dtype, scale: float = 1.0) -> np.ndarray:
    return (scale * rng.standard_normal(shape)).astype(dtype)


def away_from_zero(rng: np.random.Generator, shape, dtype) -> np.ndarray:
    """Random values with |x| >= 0.1, so that a kink at 0 (ReLU) is never within h."""
    x = 2.0 * rng.standard_normal(shape)
    return (np.sign(x) * (np.abs(x) + 0.1)).astype(dtype)


def named(names: tuple[str, ...], grads: tuple) -> Arrays:
    return dict(zip(names, grads, strict=True))


def linear_check() -> OpCheck:
    def make(rng, dt):
        B, T, n_in, n_out = sizes(rng, (1, 3), (1, 4), (1, 6), (1, 6))
        inputs = {
            "x": normal(rng, (B, T, n_in), dt),
            "weight": normal(rng, (n_out, n_in), dt),
            "bias": normal(rng, (n_out,), dt),
        }
        return inputs, {}

    return OpCheck(
        "y = x W^T + b",
        make,
        lambda a, c: linear_forward(a["x"], a["weight"], a["bias"]),
        lambda d, cache, c: named(("x", "weight", "bias"), linear_backward(d, cache)),
    )


def lora_check(dropout_p: float = 0.0) -> OpCheck:
    def make(rng, dt):
        B, T, n_in, n_out, rank = sizes(rng, (1, 3), (1, 4), (3, 6), (3, 6), (2, 3))
        inputs = {
            "x": normal(rng, (B, T, n_in), dt),
            "weight": normal(rng, (n_out, n_in), dt),
            "bias": normal(rng, (n_out,), dt),
            "lora_A": normal(rng, (rank, n_in), dt),
            "lora_B": normal(rng, (n_out, rank), dt),  # not 0, where dA = s (dY B)^T X_d is 0
        }
        return inputs, {"scaling": 2.0 / rank}

    def forward(a: Arrays, c: dict):
        rng = np.random.default_rng(11)  # the same dropout mask at every call
        return lora_forward(
            a["x"], a["weight"], a["bias"], a["lora_A"], a["lora_B"], c["scaling"], dropout_p, rng
        )

    names = ("x", "weight", "bias", "lora_A", "lora_B")
    return OpCheck(
        "x W^T + b + (α/r) (dropout(x) A^T) B^T" + (f", dropout {dropout_p}" if dropout_p else ""),
        make,
        forward,
        lambda d, cache, c: named(names, lora_backward(d, cache)),
    )


def embedding_check() -> OpCheck:
    def make(rng, dt):
        V, d, B, T = sizes(rng, (2, 8), (1, 5), (1, 3), (2, 6))
        idx = rng.integers(0, V, (B, T))  # repeated ids add their gradients
        return {"weight": normal(rng, (V, d), dt)}, {"idx": idx}

    return OpCheck(
        "E[idx]",
        make,
        lambda a, c: embedding_forward(c["idx"], a["weight"]),
        lambda d, cache, c: {"weight": embedding_backward(d, cache)},
    )


def norm_check(kind: str) -> OpCheck:
    def make(rng, dt):
        B, T, d = sizes(rng, (1, 3), (1, 4), (3, 8))  # with d = 2, x̂ = ±1 whatever x is
        inputs = {"x": normal(rng, (B, T, d), dt, 2.0) + 0.5, "weight": normal(rng, (d,), dt)}
        if kind == "layernorm":
            inputs["bias"] = normal(rng, (d,), dt)
        return inputs, {}

    if kind == "layernorm":
        return OpCheck(
            "γ (x - μ) / sqrt(σ² + ε) + β",
            make,
            lambda a, c: layernorm_forward(a["x"], a["weight"], a["bias"]),
            lambda d, cache, c: named(("x", "weight", "bias"), layernorm_backward(d, cache)),
        )
    return OpCheck(
        "γ x / sqrt(mean(x²) + ε)",
        make,
        lambda a, c: rmsnorm_forward(a["x"], a["weight"]),
        lambda d, cache, c: named(("x", "weight"), rmsnorm_backward(d, cache)),
    )


def qk_norm_check() -> OpCheck:
    def make(rng, dt):
        # head size 2 at least: with one feature x / RMS(x) is ±1 whatever x is
        B, nh, T, hs = sizes(rng, (1, 2), (1, 3), (1, 4), (2, 6))
        return {"x": normal(rng, (B, nh, T, hs), dt, 2.0)}, {}

    return OpCheck(
        "x / sqrt(mean(x²) + ε) per head (QK-norm)",
        make,
        lambda a, c: rms_normalize_forward(a["x"]),
        lambda d, cache, c: {"x": rms_normalize_backward(d, cache)},
    )


def elementwise_check(description: str, forward, backward) -> OpCheck:
    def make(rng, dt):
        # two features at least: a softmax over one value is the constant 1
        return {"x": away_from_zero(rng, sizes(rng, (1, 3), (1, 4), (2, 7)), dt)}, {}

    return OpCheck(
        description,
        make,
        lambda a, c: forward(a["x"]),
        lambda d, cache, c: {"x": backward(d, cache)},
    )


def swiglu_check() -> OpCheck:
    def make(rng, dt):
        shape = sizes(rng, (1, 3), (1, 4), (1, 7))
        return {"gate": normal(rng, shape, dt, 2.0), "value": normal(rng, shape, dt)}, {}

    return OpCheck(
        "Swish(gate) ⊙ value",
        make,
        lambda a, c: swiglu_forward(a["gate"], a["value"]),
        lambda d, cache, c: named(("gate", "value"), swiglu_backward(d, cache)),
    )


def attention_check(causal: bool, padded: bool, dropout_p: float = 0.0) -> OpCheck:
    def make(rng, dt):
        B, nh, T, hs = sizes(rng, (1, 3), (1, 3), (2, 6), (1, 5))
        key_padding = None
        if padded:  # left padding: each row starts after 0..T-2 pads
            starts = rng.integers(0, T - 1, size=B)
            key_padding = np.arange(T)[None, :] >= starts[:, None]
        constants = {"allowed": attention_mask(T, T, 0, causal, key_padding)}
        return {k: normal(rng, (B, nh, T, hs), dt) for k in ("q", "k", "v")}, constants

    def forward(a: Arrays, c: dict):
        rng = np.random.default_rng(1234)  # the same dropout mask at every call
        return attention_forward(a["q"], a["k"], a["v"], c["allowed"], dropout_p, rng)

    parts = ["softmax(Q K^T / sqrt(d_k)) V"]
    parts += ["causal mask"] if causal else []
    parts += ["padding mask"] if padded else []
    parts += [f"attention dropout {dropout_p}"] if dropout_p else []
    return OpCheck(
        ", ".join(parts),
        make,
        forward,
        lambda d, cache, c: named(("q", "k", "v"), attention_backward(d, cache)),
    )


def split_heads_check() -> OpCheck:
    def make(rng, dt):
        B, T, nh, hs = sizes(rng, (1, 3), (1, 4), (1, 3), (1, 3))
        return {"x": normal(rng, (B, T, nh * hs), dt)}, {"n_head": nh}

    return OpCheck(
        "(B, T, d) -> (B, nh, T, hs); backward = merge",
        make,
        lambda a, c: (split_heads(a["x"], c["n_head"]), None),
        lambda d, cache, c: {"x": merge_heads(d)},
    )


def rotary_check() -> OpCheck:
    def make(rng, dt):
        B, nh, T, pairs, offset = sizes(rng, (1, 2), (1, 3), (1, 6), (1, 4), (0, 9))
        cos, sin = rope_angles(np.arange(offset, offset + T), 2 * pairs, 100.0, dt)
        return {"x": normal(rng, (B, nh, T, 2 * pairs), dt)}, {"cos": cos, "sin": sin}

    return OpCheck(
        "rotate pairs (x_2i, x_2i+1) by m θ_i",
        make,
        lambda a, c: rotary_forward(a["x"], c["cos"], c["sin"]),
        lambda d, cache, c: {"x": rotary_backward(d, cache)},
    )


def dropout_check() -> OpCheck:
    def make(rng, dt):
        return {"x": normal(rng, sizes(rng, (1, 5), (2, 9)), dt)}, {}

    return OpCheck(
        "x ⊙ mask / (1 - p), p = 0.3",
        make,
        lambda a, c: dropout_forward(a["x"], 0.3, np.random.default_rng(7)),
        lambda d, cache, c: {"x": dropout_backward(d, cache)},
    )


def cross_entropy_check() -> OpCheck:
    def make(rng, dt):
        B, T, V = sizes(rng, (1, 3), (2, 6), (2, 9))
        targets = rng.integers(0, V, (B, T))
        targets[0, 0] = -1  # ignored
        return {"logits": normal(rng, (B, T, V), dt, 2.0)}, {"targets": targets}

    return OpCheck(
        "mean -log p[target], ignore -1, label smoothing 0.1",
        make,
        lambda a, c: cross_entropy_forward(a["logits"], c["targets"], -1, 0.1),
        lambda d, cache, c: {"logits": cross_entropy_backward(cache, float(d))},
    )


def linear_attention_check() -> OpCheck:
    def make(rng, dt):
        # two real keys at least, and d_k >= 2: with one key, or one feature, φ(q) cancels
        # in the ratio and dQ is zero whatever the derivation
        B, nh, T, hs = sizes(rng, (1, 3), (1, 2), (2, 6), (2, 4))
        starts = rng.integers(0, T - 1, size=B)
        constants = {"key_padding": np.arange(T)[None, :] >= starts[:, None]}
        return {k: normal(rng, (B, nh, T, hs), dt) for k in ("q", "k", "v")}, constants

    return OpCheck(
        "causal φ(Q) (φ(K)^T V) / φ(Q) (φ(K)^T 1), padding mask",
        make,
        lambda a, c: causal_linear_attention_forward(a["q"], a["k"], a["v"], c["key_padding"]),
        lambda d, cache, c: named(("q", "k", "v"), causal_linear_attention_backward(d, cache)),
    )


TINY_GPT = dict(vocab_size=11, block_size=8, n_layer=2, n_head=2, n_embd=8, dropout=0.1)
# the switches of issue 10's modern recipe, together: rotary, RMSNorm, ReLU², QK-norm, an
# untied head, no biases, soft-capped logits
RECIPE = dict(
    positions="rotary",
    norm="rmsnorm",
    activation="relu2",
    qk_norm=True,
    tie_embeddings=False,
    bias=False,
    logit_softcap=3.0,
)
# the switches of light-llm's default model, the qwen3-cpu preset (which exports as Qwen3):
# rotary, RMSNorm, SwiGLU, QK-norm, an untied head, no biases
DEFAULT_SWITCHES = {
    name: getattr(PRESETS["qwen3-cpu"], name)
    for name in ("positions", "norm", "activation", "qk_norm", "tie_embeddings", "bias")
}
# the original Transformer's block order and positions (Vaswani et al. 2017): post-LN,
# sinusoidal (its ReLU is checked alone: a float32 difference across its kink misses by O(1))
ORIGINAL = dict(block_order="post", positions="sinusoidal")


def gpt_check(
    config: ModelConfig | None = None,
    batch: int = 2,
    length: int = 6,
    description: str | None = None,
) -> OpCheck:
    """The whole NumpyGPT: every parameter, through the loss with label smoothing, in training
    mode (the same dropout masks at every forward), the first row left-padded."""
    config = config or ModelConfig(**TINY_GPT)

    def make(rng, dt):
        model = NumpyGPT(config, dtype=dt)
        for name, value in model.params.items():  # move off the init's 0 / 1 values
            value += normal(rng, value.shape, dt, 0.1 if name.endswith("bias") else 0.3)
        idx = rng.integers(0, config.vocab_size, (batch, length))
        targets = rng.integers(0, config.vocab_size, (batch, length))
        targets[0, 0] = -1
        mask = np.ones((batch, length), dtype=np.int64)
        mask[0, :2] = 0
        return model.params, {"model": model, "idx": idx, "targets": targets, "mask": mask}

    def forward(params: Arrays, c: dict):
        model = c["model"]
        model.training = True
        model.rng = np.random.default_rng(5)
        _, loss, cache = model.forward(
            c["idx"], c["targets"], attention_mask=c["mask"], label_smoothing=0.1
        )
        return loss, cache

    return OpCheck(
        description or "NumpyGPT loss, every parameter",
        make,
        forward,
        # backward(cache) is the loss's own gradient: times the upstream d by the chain rule
        lambda d, cache, c: {name: d * g for name, g in c["model"].backward(cache).items()},
        floor_fraction=1e-3,
        float32_step=None if config.smear else MODEL_FLOAT32_STEP,
    )


OPS: dict[str, Callable[[], OpCheck]] = {
    "linear": linear_check,
    "lora": lora_check,
    "lora_dropout": lambda: lora_check(dropout_p=0.3),
    "embedding": embedding_check,
    "layernorm": lambda: norm_check("layernorm"),
    "rmsnorm": lambda: norm_check("rmsnorm"),
    "gelu": lambda: elementwise_check("x Φ(x)", gelu_forward, gelu_backward),
    "gelu_tanh": lambda: elementwise_check(
        "½ x (1 + tanh(√(2/π)(x + 0.044715 x³)))", gelu_tanh_forward, gelu_tanh_backward
    ),
    "relu": lambda: elementwise_check("max(0, x)", relu_forward, relu_backward),
    "relu2": lambda: elementwise_check("max(0, x)²", relu2_forward, relu2_backward),
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
    "qk_norm": qk_norm_check,
    "dropout": dropout_check,
    "cross_entropy": cross_entropy_check,
    "softcap": lambda: elementwise_check(
        "c tanh(z / c), c = 2", lambda z: softcap_forward(z, 2.0), softcap_backward
    ),
    "linear_attention": linear_attention_check,
    "gpt": gpt_check,
    "recipe": lambda: gpt_check(
        ModelConfig(**TINY_GPT, **RECIPE),
        description="NumpyGPT loss: rotary, RMSNorm, ReLU², QK-norm, untied, no bias, cap 3",
    ),
    "default": lambda: gpt_check(
        ModelConfig(**TINY_GPT, **DEFAULT_SWITCHES),
        description="NumpyGPT loss: the default's rotary, RMSNorm, SwiGLU, QK-norm, untied",
    ),
    "original": lambda: gpt_check(
        ModelConfig(**TINY_GPT, **ORIGINAL),
        description="NumpyGPT loss: post-LN, sinusoidal positions (the 2017 Transformer's)",
    ),
    "linear_gpt": lambda: gpt_check(
        ModelConfig(**TINY_GPT, attention="linear", activation="gelu_tanh"),
        description="NumpyGPT loss: causal linear attention, GELU (tanh form) in every block",
    ),
    "multi_token": lambda: gpt_check(
        ModelConfig(**TINY_GPT, **RECIPE, mtp_weight=0.5),
        description="NumpyGPT loss + 0.5 x the loss on the token after next (W_mtp)",
    ),
    "value_embeddings": lambda: gpt_check(
        ModelConfig(**TINY_GPT, **RECIPE, value_embeddings=True),
        description="NumpyGPT loss, value embeddings: V_l = a_l X W_V + b_l E_v[tokens]",
    ),
    "embedding_skip": lambda: gpt_check(
        ModelConfig(**TINY_GPT, embedding_skip=True),
        description="NumpyGPT loss, embedding skip: block l reads λ_l X_{l-1} + μ_l X_0",
    ),
    "smear": lambda: gpt_check(
        ModelConfig(**TINY_GPT, smear=True),
        description="NumpyGPT loss, smear: X_0[t] += λ σ(w · X_0[t, :k]) X_0[t-1], left-padded",
    ),
    "multi_token_tied": lambda: gpt_check(
        ModelConfig(**TINY_GPT, mtp_weight=0.5),
        description="NumpyGPT, tied head: loss + 0.5 x the loss on the token after next",
    ),
}


def check_op(name: str, dtype=np.float64, seed: int = 0) -> list[GradcheckResult]:
    """Run the gradient check of the operation ``name`` (one of :data:`OPS`)."""
    if name not in OPS:
        raise ConfigError(f"unknown operation {name!r}; known operations: {', '.join(OPS)}.")
    return run_check(name, OPS[name](), dtype, seed)
