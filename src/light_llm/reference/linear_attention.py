"""Causal linear attention, forward and backward (seed 002 §11.3, eq. 48), the same formula as
:func:`light_llm.nn.attention.causal_linear_attention`.

With a positive feature map φ(x) = elu(x) + 1 standing in for exp(q·k), position i reads

    y_i = φ(q_i)^T S_i / φ(q_i)^T z_i,   S_i = Σ_{j<=i} φ(k_j) v_j^T,   z_i = Σ_{j<=i} φ(k_j)

Over a chunk of T positions the sums are the masked product (φ(Q) φ(K)^T ⊙ M) V; the running
state (S, z) of earlier chunks, d_k x d_v per head, is linear attention's whole "KV cache".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

DENOMINATOR_FLOOR = 1e-6  # as the PyTorch engine: y = numerator / max(denominator, 1e-6)


@dataclass
class LinearAttentionState:
    """Running sums of one layer: S = Σ φ(k) v^T (B, nh, hs, hs) and z = Σ φ(k) (B, nh, hs)."""

    kv: np.ndarray | None = None
    k_sum: np.ndarray | None = None


def feature_map_forward(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """φ(x) = elu(x) + 1 = x + 1 for x > 0, e^x for x <= 0: positive, so φ(q)·φ(k) > 0 can
    stand in for exp(q·k) (seed 002 §11.3). Returns (φ(x), cache = φ'(x))."""
    exp_part = np.exp(np.minimum(x, 0.0))
    phi = np.where(x > 0, x + 1.0, exp_part)
    dphi = np.where(x > 0, 1.0, exp_part).astype(x.dtype)  # φ'(x) = 1, or e^x
    return phi, dphi


def causal_linear_attention_forward(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    key_padding: np.ndarray | None = None,
    state: LinearAttentionState | None = None,
) -> tuple[np.ndarray, tuple]:
    """Causal linear attention over a chunk (seed 002 §11.3, eq. 48). q, k, v: (B, nh, T, hs);
    ``key_padding`` (B, >= T) marks real tokens (its last T columns are this chunk's keys);
    ``state`` carries (S, z) across chunks and is updated in place (generation only: the
    backward assumes no earlier state). Returns (y, cache)."""
    n = q.shape[2]
    phi_q, dphi_q = feature_map_forward(q)  # (B, nh, T, hs)
    phi_k, dphi_k = feature_map_forward(k)
    key_mask = None
    if key_padding is not None:
        key_mask = np.asarray(key_padding)[:, None, -n:, None].astype(q.dtype)  # (B, 1, T, 1)
        phi_k = phi_k * key_mask
    causal = np.tril(np.ones((n, n), dtype=bool))
    kernel = np.where(causal, phi_q @ phi_k.swapaxes(-1, -2), 0.0).astype(q.dtype)  # (B,nh,T,T)
    numerator = kernel @ v  # (B, nh, T, hs)
    denominator = kernel.sum(axis=-1)  # (B, nh, T)
    if state is not None:
        if state.kv is not None:
            numerator = numerator + phi_q @ state.kv
            denominator = denominator + (phi_q @ state.k_sum[..., None])[..., 0]
        kv_chunk = phi_k.swapaxes(-1, -2) @ v  # (B, nh, hs, hs)
        k_chunk = phi_k.sum(axis=2)  # (B, nh, hs)
        state.kv = kv_chunk if state.kv is None else state.kv + kv_chunk
        state.k_sum = k_chunk if state.k_sum is None else state.k_sum + k_chunk
    floored = denominator < DENOMINATOR_FLOOR
    denominator = np.maximum(denominator, DENOMINATOR_FLOOR)
    out = numerator / denominator[..., None]
    cache = (phi_q, dphi_q, phi_k, dphi_k, key_mask, v, kernel, causal, out, denominator, floored)
    return out, cache


def causal_linear_attention_backward(
    dout: np.ndarray, cache: tuple
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gradients of y = N / D with N = K~ V, D = K~ 1, K~ = (φ(Q) φ(K)^T) ⊙ M (M causal):

        dN = dy / D                    dD = -Σ_c dy ⊙ y / D   (0 where D was floored)
        dK~ = (dN V^T + dD 1^T) ⊙ M     dV = K~^T dN
        dφ(Q) = dK~ φ(K)               dφ(K) = dK~^T φ(Q)    (⊙ the padding mask)
        dQ = dφ(Q) ⊙ φ'(Q)             dK = dφ(K) ⊙ φ'(K)

    Returns (dq, dk, dv)."""
    phi_q, dphi_q, phi_k, dphi_k, key_mask, v, kernel, causal, out, denominator, floored = cache
    dnumerator = dout / denominator[..., None]  # (B, nh, T, hs)
    ddenominator = -(dnumerator * out).sum(axis=-1)  # (B, nh, T)
    ddenominator[floored] = 0.0
    dkernel = dnumerator @ v.swapaxes(-1, -2) + ddenominator[..., None]  # (B, nh, T, T)
    dkernel = np.where(causal, dkernel, 0.0).astype(dout.dtype)
    dv = kernel.swapaxes(-1, -2) @ dnumerator
    dphi_q_total = dkernel @ phi_k
    dphi_k_total = dkernel.swapaxes(-1, -2) @ phi_q
    if key_mask is not None:
        dphi_k_total *= key_mask
    return dphi_q_total * dphi_q, dphi_k_total * dphi_k, dv
