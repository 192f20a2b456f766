"""The smear, forward and backward: a one-token look-back on the embedding (issue 25; the
PyTorch engine's light_llm/nn/smear.py).

    g_t = λ σ(z_t),  z_t = w · X_0[t, :k],  k = min(12, d_model)
    Y[t] = X_0[t] + g_t P[t],  P[t] = X_0[t-1] mask[t-1]  (P[0] = 0)

mask[t-1] is 1 without padding; with left padding a real token does not look back at a pad.
Backward, with dY the gradient at Y:

    dX_0[t] += dY[t];    dX_0[t-1] += g_t mask[t-1] dY[t]
    dg_t = dY[t] · P[t];    dλ = Σ_t dg_t σ(z_t)
    dz_t = dg_t λ σ(z_t)(1 - σ(z_t));    dw = Σ_t dz_t X_0[t, :k];    dX_0[t, :k] += dz_t w
"""

from __future__ import annotations

import numpy as np

from light_llm.reference.activations import sigmoid


def look_back(
    x: np.ndarray,
    offset: int = 0,
    previous: np.ndarray | None = None,
    attention_mask: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(P, mask[t-1]): X_0[t-1] mask[t-1] for every t (B, T, d), and the mask (B, T, 1); 0
    where t-1 is before the sequence or a pad. ``previous`` (B, d): X_0[offset - 1]."""
    B, T, _ = x.shape
    first = previous[:, None] if offset > 0 and previous is not None else np.zeros_like(x[:, :1])
    shifted = np.concatenate([first, x[:, :-1]], axis=1)
    if attention_mask is None:
        real = np.ones((B, offset + T), dtype=x.dtype)
    else:
        real = np.asarray(attention_mask, dtype=x.dtype)
    before = np.concatenate([np.zeros((B, 1), x.dtype), real], axis=1)[:, offset : offset + T]
    return shifted * before[..., None], before[..., None]


def smear_forward(
    x: np.ndarray,
    weight: np.ndarray,
    gain: np.ndarray,
    offset: int = 0,
    previous: np.ndarray | None = None,
    attention_mask: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, tuple]:
    """Y = X_0 + g P (module docstring). x: X_0 (B, T, d); weight: w (k,); gain: λ (1,).
    Returns (Y, the smear's term g P, cache)."""
    k = weight.shape[-1]
    shifted, before = look_back(x, offset, previous, attention_mask)
    s = sigmoid(x[..., :k] @ weight)[..., None].astype(x.dtype)  # σ(z): (B, T, 1)
    term = (gain * s) * shifted
    return x + term, term, (x, shifted, before, s, weight, gain)


def smear_backward(dy: np.ndarray, cache: tuple) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(dX_0, dw (k,), dλ (1,)) from dY (B, T, d) (module docstring)."""
    x, shifted, before, s, weight, gain = cache
    k = weight.shape[-1]
    g = gain * s  # (B, T, 1)
    dx = dy.copy()
    dx[:, :-1] += (g * before * dy)[:, 1:]  # X_0[t-1] is read by token t
    dg = (dy * shifted).sum(-1, keepdims=True)  # (B, T, 1)
    dgain = np.array([(dg * s).sum()], dtype=dy.dtype)
    dz = dg * gain * s * (1.0 - s)  # (B, T, 1)
    dweight = (dz * x[..., :k]).sum(axis=(0, 1)).astype(dy.dtype)  # (k,)
    dx[..., :k] += dz * weight
    return dx, dweight, dgain
