"""Softmax and log-softmax along the last axis, forward and backward
(seed 002 §2.3, eq. 1; §4.4, eq. 12; §7.3, eq. 25; Appendix B.1)."""

from __future__ import annotations

import numpy as np


def softmax_forward(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """softmax(z)_i = e^{z_i} / Σ_j e^{z_j} along the last axis (seed 002 §2.3, eq. 1).

    The row maximum is subtracted first (it cancels in the ratio) so that no exponential
    overflows; entries of -inf (masked) become exactly 0. Returns (s, cache = s)."""
    probs = x - x.max(axis=-1, keepdims=True)
    np.exp(probs, out=probs)  # e^{z_i - max}, in place
    probs /= probs.sum(axis=-1, keepdims=True)
    return probs, probs


def softmax_backward(dout: np.ndarray, cache: np.ndarray) -> np.ndarray:
    """Backward through the softmax Jacobian (seed 002 Appendix B.1; §7.3, eq. 25):

        ∂s_i/∂z_j = s_i (δ_ij - s_j),  i.e.  J = diag(s) - s s^T  (symmetric)

    so the gradient at z is J^T g = s ⊙ g - s (s·g) = s ⊙ (g - (g·s)), one dot product per row
    instead of a d x d matrix (seed 001 "Gradient of Softmax")."""
    probs = cache
    return probs * (dout - (dout * probs).sum(axis=-1, keepdims=True))


def log_softmax_forward(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """log softmax(z)_i = z_i - log Σ_j e^{z_j}, with the log-sum-exp trick
    log Σ_j e^{z_j} = c + log Σ_j e^{z_j - c}, c = max_j z_j (seed 002 §4.4, eq. 12).
    Returns (log-probabilities, cache = the probabilities)."""
    row_max = x.max(axis=-1, keepdims=True)  # c
    shifted = x - row_max
    log_sum_exp = np.log(np.exp(shifted).sum(axis=-1, keepdims=True))  # minus c
    log_probs = shifted - log_sum_exp
    return log_probs, np.exp(log_probs)


def log_softmax_backward(dout: np.ndarray, cache: np.ndarray) -> np.ndarray:
    """∂(z_i - LSE(z))/∂z_j = δ_ij - s_j, so the gradient at z is g - s Σ_i g_i."""
    probs = cache
    return dout - probs * dout.sum(axis=-1, keepdims=True)
