"""Activations of the feed-forward network, forward and backward: GELU (exact and tanh),
ReLU, ReLU² and SwiGLU (seed 000 §4; seed 001 "Feed-Forward Networks"; seed 002 §9.2, eq. 40).

NumPy has no error function: in float64 it comes from ``scipy.special.erf`` (exact to double
precision); in float32, where scipy's scalar loop (about 40 ns a value) would dominate a
training step, from the Abramowitz-Stegun rational approximation 7.1.26, whose error
(at most 1.5e-7) is the size of float32's own rounding. The sigmoid is ``scipy.special.expit``.
SciPy is imported on first use: the PyTorch engine's commands import this engine's modules to
read checkpoints, and need none of it (its import takes about 0.3 s of each command's start).
"""

from __future__ import annotations

import math

import numpy as np

from light_llm.errors import ConfigError

SQRT_2 = math.sqrt(2.0)
INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
GELU_TANH_CUBIC = 0.044715
# Abramowitz & Stegun, Handbook of Mathematical Functions, 7.1.26:
# erfc(z) = t (a1 + t (a2 + t (a3 + t (a4 + t a5)))) e^{-z²} + ε(z), t = 1 / (1 + p z), z >= 0
ERFC_P = 0.3275911
ERFC_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)


def sigmoid(z: np.ndarray) -> np.ndarray:
    """σ(z) = 1 / (1 + e^-z), the logistic function, without overflow for large |z|
    (``scipy.special.expit``)."""
    from scipy.special import expit

    return expit(z)


def normal_cdf(x: np.ndarray) -> np.ndarray:
    """Φ(x) = ½ (1 + erf(x / √2)) = ½ erfc(-x / √2), the standard normal CDF (seed 002 §9.2).

    float64: scipy's erf. float32: A&S 7.1.26 for erfc(|x| / √2), |ε| <= 1.5e-7, then
    Φ = 1 - ½ erfc for x >= 0 and ½ erfc for x < 0 (no cancellation in the lower tail)."""
    if x.dtype != np.float32:
        from scipy.special import erf

        return 0.5 * (1.0 + erf(x / SQRT_2))
    z = np.abs(x) * (1.0 / SQRT_2)
    t = z * ERFC_P
    t += 1.0
    np.reciprocal(t, out=t)
    poly = t * ERFC_A[4]  # Horner: t (a1 + t (a2 + ... + t a5))
    for coefficient in ERFC_A[3::-1]:
        poly += coefficient
        poly *= t
    np.square(z, out=z)
    np.negative(z, out=z)
    poly *= np.exp(z, out=z)  # erfc(|x| / √2)
    poly *= 0.5  # h = ½ erfc(|x| / √2) = Φ(-|x|)
    step = (x >= 0).astype(np.float32)  # H(x); arithmetic, as a branch per value is slower
    cdf = 1.0 - 2.0 * poly
    cdf *= step
    cdf += poly  # Φ(x) = h + H(x) (1 - 2h): 1 - h for x >= 0, h for x < 0
    return cdf


def gelu_forward(x: np.ndarray) -> tuple[np.ndarray, tuple]:
    """GELU(x) = x Φ(x), Φ the standard normal CDF (seed 002 §9.2, eq. 40; seed 000 §4)."""
    cdf = normal_cdf(x)  # Φ(x)
    return x * cdf, (x, cdf)


def gelu_backward(dout: np.ndarray, cache: tuple) -> np.ndarray:
    """d/dx [x Φ(x)] = Φ(x) + x φ(x), φ(x) = exp(-x²/2) / √(2π) the normal density."""
    x, cdf = cache
    pdf = INV_SQRT_2PI * np.exp(-0.5 * x * x)  # φ(x)
    return dout * (cdf + x * pdf)


def gelu_tanh_forward(x: np.ndarray) -> tuple[np.ndarray, tuple]:
    """GELU(x) ≈ ½ x (1 + tanh(u)), u = √(2/π) (x + 0.044715 x³): GPT-2's approximation
    (seed 000 §4)."""
    tanh_u = np.tanh(SQRT_2_OVER_PI * (x + GELU_TANH_CUBIC * x * x * x))
    return 0.5 * x * (1.0 + tanh_u), (x, tanh_u)


def gelu_tanh_backward(dout: np.ndarray, cache: tuple) -> np.ndarray:
    """d/dx ½ x (1 + tanh u) = ½ (1 + tanh u) + ½ x (1 - tanh² u) du/dx,
    du/dx = √(2/π) (1 + 3 · 0.044715 x²)."""
    x, tanh_u = cache
    du_dx = SQRT_2_OVER_PI * (1.0 + 3.0 * GELU_TANH_CUBIC * x * x)
    return dout * (0.5 * (1.0 + tanh_u) + 0.5 * x * (1.0 - tanh_u * tanh_u) * du_dx)


def relu_forward(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """ReLU(x) = max(0, x) (seed 001 "Feed-Forward Networks"; seed 000 §4)."""
    positive = x > 0
    return x * positive, positive


def relu_backward(dout: np.ndarray, cache: np.ndarray) -> np.ndarray:
    """d/dx max(0, x) = 1 where x > 0, else 0 (0 at x = 0, as PyTorch)."""
    return dout * cache


def relu2_forward(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """ReLU²(x) = max(0, x)², ReLU (seed 001 "Feed-Forward Networks") squared."""
    positive = x * (x > 0)  # max(0, x)
    return positive * positive, positive


def relu2_backward(dout: np.ndarray, cache: np.ndarray) -> np.ndarray:
    """d/dx max(0, x)² = 2 max(0, x): continuous, 0 for x <= 0."""
    return dout * (2.0 * cache)


def swiglu_forward(gate: np.ndarray, value: np.ndarray) -> tuple[np.ndarray, tuple]:
    """SwiGLU's product Swish(x W_1) ⊙ (x V), Swish(z) = z σ(z) (β = 1) (seed 001 "SwiGLU"),
    given the two projections gate = x W_1 and value = x V."""
    if gate.shape != value.shape:
        raise ConfigError(
            f"SwiGLU needs a gate and a value of the same shape, got {gate.shape} and "
            f"{value.shape}."
        )
    gate_sigmoid = sigmoid(gate)
    swish = gate * gate_sigmoid
    return swish * value, (gate, value, gate_sigmoid, swish)


def swiglu_backward(dout: np.ndarray, cache: tuple) -> tuple[np.ndarray, np.ndarray]:
    """Product rule, with Swish'(z) = σ(z) + z σ(z) (1 - σ(z)):

        dgate = dout ⊙ value ⊙ Swish'(gate)        dvalue = dout ⊙ Swish(gate)

    Returns (dgate, dvalue)."""
    gate, value, gate_sigmoid, swish = cache
    dswish_dgate = gate_sigmoid + swish * (1.0 - gate_sigmoid)
    return dout * value * dswish_dgate, dout * swish


ELEMENTWISE = {
    "gelu": (gelu_forward, gelu_backward),
    "gelu_tanh": (gelu_tanh_forward, gelu_tanh_backward),
    "relu": (relu_forward, relu_backward),
    "relu2": (relu2_forward, relu2_backward),
}


def activation_forward(name: str, x: np.ndarray) -> tuple[np.ndarray, object]:
    """The element-wise non-linearity σ of an MLP by its config name (gelu, gelu_tanh, relu,
    relu2)."""
    if name not in ELEMENTWISE:
        raise ConfigError(f"unknown activation {name!r}; known: {', '.join(ELEMENTWISE)}.")
    return ELEMENTWISE[name][0](x)


def activation_backward(name: str, dout: np.ndarray, cache: object) -> np.ndarray:
    """The backward of :func:`activation_forward`."""
    return ELEMENTWISE[name][1](dout, cache)
