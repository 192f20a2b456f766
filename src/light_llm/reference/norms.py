"""LayerNorm and RMSNorm over the feature dimension, forward and backward
(seed 000 §5; seed 001 "Layer Normalization", "RMSNorm"; seed 002 §5.3, eq. 19)."""

from __future__ import annotations

import numpy as np

from light_llm.errors import ConfigError


def check_feature_size(x: np.ndarray, weight: np.ndarray, name: str) -> None:
    if x.shape[-1] != weight.shape[0]:
        raise ConfigError(f"{name} of size {weight.shape[0]} got features of size {x.shape[-1]}.")


def layernorm_forward(
    x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None, eps: float = 1e-5
) -> tuple[np.ndarray, tuple]:
    """LayerNorm(x) = γ ⊙ (x - μ) / sqrt(σ² + ε) + β, μ and σ² over the last dimension
    (seed 002 §5.3, eq. 19; seed 001). β is left out when ``bias`` is None."""
    check_feature_size(x, weight, "a LayerNorm")
    mean = x.mean(axis=-1, keepdims=True)  # μ: (..., 1)
    centered = x - mean
    variance = (centered * centered).mean(axis=-1, keepdims=True)  # σ² (biased, 1/d)
    rstd = 1.0 / np.sqrt(variance + eps)  # 1 / sqrt(σ² + ε)
    xhat = centered * rstd  # zero mean, unit variance
    out = xhat * weight
    if bias is not None:
        out += bias
    return out, (xhat, rstd, weight, bias is not None)


def layernorm_backward(
    dout: np.ndarray, cache: tuple
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Gradients of LayerNorm. With x̂ = (x - μ) / σ_ε and g = dout ⊙ γ (the gradient at x̂),
    differentiating μ and σ² as functions of x gives, per row of d features,

        dx = (1/σ_ε) (g - mean(g) - x̂ ⊙ mean(g ⊙ x̂))
        dγ = Σ_rows dout ⊙ x̂        dβ = Σ_rows dout

    Returns (dx, dweight, dbias); dbias is None without β."""
    xhat, rstd, weight, has_bias = cache
    dxhat = dout * weight  # g: (..., d)
    dx = dxhat - dxhat.mean(axis=-1, keepdims=True)
    dx -= xhat * (dxhat * xhat).mean(axis=-1, keepdims=True)
    dx *= rstd
    rows = dout.reshape(-1, dout.shape[-1])
    dweight = (rows * xhat.reshape(rows.shape)).sum(axis=0)
    dbias = rows.sum(axis=0) if has_bias else None
    return dx, dweight, dbias


def rms_normalize_forward(x: np.ndarray, eps: float = 1e-5) -> tuple[np.ndarray, tuple]:
    """x̂ = x / RMS(x), RMS(x) = sqrt(mean(x²) + ε) over the last dimension: RMSNorm without
    its gain (seed 001 "RMSNorm"). QK-norm applies it to each head's q and k."""
    rrms = 1.0 / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps)  # 1 / RMS(x): (..., 1)
    xhat = x * rrms
    return xhat, (xhat, rrms)


def rms_normalize_backward(dxhat: np.ndarray, cache: tuple) -> np.ndarray:
    """Gradient of x̂ = x / RMS(x). ∂RMS/∂x_j = x_j / (d RMS), so for g = dL/dx̂, per row:

        dx = (1/RMS) (g - x̂ ⊙ mean(g ⊙ x̂))

    (LayerNorm's rule without the mean(g) term, as there is no mean to subtract)."""
    xhat, rrms = cache
    dx = dxhat - xhat * (dxhat * xhat).mean(axis=-1, keepdims=True)
    dx *= rrms
    return dx


def rmsnorm_forward(
    x: np.ndarray, weight: np.ndarray, eps: float = 1e-5
) -> tuple[np.ndarray, tuple]:
    """RMSNorm(x) = γ ⊙ x / RMS(x), RMS(x) = sqrt(mean(x²) + ε) (seed 001 "RMSNorm"): no
    mean subtraction, no β."""
    check_feature_size(x, weight, "an RMSNorm")
    xhat, normalize_cache = rms_normalize_forward(x, eps)
    return xhat * weight, (normalize_cache, weight)


def rmsnorm_backward(dout: np.ndarray, cache: tuple) -> tuple[np.ndarray, np.ndarray]:
    """Gradients of RMSNorm (seed 001 "RMSNorm"): with g = dout ⊙ γ, dx is
    :func:`rms_normalize_backward` of g, and dγ = Σ_rows dout ⊙ x̂. Returns (dx, dweight)."""
    normalize_cache, weight = cache
    xhat = normalize_cache[0]
    dx = rms_normalize_backward(dout * weight, normalize_cache)
    rows = dout.reshape(-1, dout.shape[-1])
    dweight = (rows * xhat.reshape(rows.shape)).sum(axis=0)
    return dx, dweight
