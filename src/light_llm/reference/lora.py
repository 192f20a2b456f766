"""LoRA, forward and backward by hand (Hu et al., 2021; the PyTorch layer is
:class:`light_llm.nn.lora.LoRALinear`):

    y = x W^T + b + s (dropout(x) A^T) B^T,     s = α / r,  A: (r, d_in),  B: (d_out, r)

i.e. the frozen weight W adapted to W' = W + s B A.
"""

from __future__ import annotations

import numpy as np

from light_llm.reference.dropout import dropout_backward, dropout_forward
from light_llm.reference.linear import linear_backward, linear_forward


def lora_forward(
    x: np.ndarray,
    weight: np.ndarray,
    bias: np.ndarray | None,
    lora_a: np.ndarray,
    lora_b: np.ndarray,
    scaling: float,
    dropout_p: float = 0.0,
    rng: np.random.Generator | None = None,
) -> tuple[np.ndarray, tuple]:
    """y = x W^T + b + s (dropout(x) A^T) B^T (Hu et al. 2021). x: (..., d_in), W: (d_out,
    d_in), A: (r, d_in), B: (d_out, r), s = α / r; dropout (seed 002 §12.1) on the input of
    the A path only."""
    base, base_cache = linear_forward(x, weight, bias)  # (..., d_out)
    dropped, mask = dropout_forward(x, dropout_p, rng)  # X_d: (..., d_in)
    rows = dropped.reshape(-1, x.shape[-1])  # (N, d_in)
    hidden = rows @ lora_a.T  # H = X_d A^T: (N, r)
    update = scaling * (hidden @ lora_b.T)  # s H B^T: (N, d_out)
    out = base + update.reshape(base.shape)
    return out, (base_cache, mask, rows, hidden, lora_a, lora_b, scaling)


def lora_backward(
    dout: np.ndarray, cache: tuple
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray, np.ndarray]:
    """Gradients of y = x W^T + b + s X_d A^T B^T, by seed 002 §2.2's rule for a product,
    Y = A X B  =>  ∂f/∂X = A^T (∂f/∂Y) B^T, applied to each factor of s X_d A^T B^T in turn
    (rows flattened, dY: (N, d_out), H = X_d A^T):

        dB   = s dY^T H                    (d_out, r):  Y = (s H) B^T, the factor B^T
        dA   = s (dY B)^T X_d              (r, d_in):   Y = (s X_d) A^T B^T, the factor A^T
        dX_d = s dY B A                    (N, d_in),   then through dropout's mask
        dx   = dY W + dX_d ⊙ m,   dW = dY^T x,   db = Σ_rows dY   (the base layer)

    Returns (dx, dweight, dbias, dA, dB); dbias is None when the layer has no bias."""
    base_cache, mask, rows, hidden, lora_a, lora_b, scaling = cache
    dout_rows = dout.reshape(-1, dout.shape[-1])  # dY: (N, d_out)
    dx, dweight, dbias = linear_backward(dout, base_cache)
    dhidden = scaling * (dout_rows @ lora_b)  # s dY B: (N, r)
    dlora_b = scaling * (dout_rows.T @ hidden)  # (d_out, r)
    dlora_a = dhidden.T @ rows  # (r, d_in)
    ddropped = (dhidden @ lora_a).reshape(dx.shape)  # (..., d_in)
    dx = dx + dropout_backward(ddropped, mask)
    return dx, dweight, dbias, dlora_a, dlora_b
