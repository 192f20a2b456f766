"""The linear (fully connected) layer, forward and backward (seed 002 §2.2, §5.1-5.2).

Weights use PyTorch's ``nn.Linear`` layout (out, in), so a checkpoint's matrices are used as
they are stored:  y = x W^T + b.
"""

from __future__ import annotations

import numpy as np

from light_llm.errors import ConfigError


def linear_forward(
    x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None = None
) -> tuple[np.ndarray, tuple]:
    """y = x W^T + b (seed 002 §5.1, eqs. 13 and 15). x: (..., in), W: (out, in), b: (out,).

    The leading dimensions are flattened so that the product is one matrix multiply."""
    if x.shape[-1] != weight.shape[1]:
        raise ConfigError(
            f"a linear layer of input size {weight.shape[1]} got inputs of size {x.shape[-1]}."
        )
    out = x.reshape(-1, x.shape[-1]) @ weight.T  # (N, out)
    if bias is not None:
        out += bias
    return out.reshape(*x.shape[:-1], weight.shape[0]), (x, weight, bias is not None)


def linear_backward(
    dout: np.ndarray, cache: tuple
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Gradients of y = x W^T + b (seed 002 §2.2: backward through a product flips it with
    transposes; §5.2, eqs. 17-18), summed over every row of the batch:

        dx = dout W        dW = dout^T x        db = Σ_rows dout

    Returns (dx, dweight, dbias); dbias is None when the layer has no bias."""
    x, weight, has_bias = cache
    dout_rows = dout.reshape(-1, dout.shape[-1])  # (N, out)
    x_rows = x.reshape(-1, x.shape[-1])  # (N, in)
    dx = (dout_rows @ weight).reshape(x.shape)  # (..., in)
    dweight = dout_rows.T @ x_rows  # (out, in)
    dbias = dout_rows.sum(axis=0) if has_bias else None  # (out,)
    return dx, dweight, dbias
