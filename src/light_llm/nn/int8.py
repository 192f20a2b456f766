"""Weight-only int8: a linear layer and a token table whose weights are 8-bit integers with one
float scale per output channel (row), the PyTorch engine's fast form. The NumPy engine's
readable twin is ``light_llm/reference/quantize.py``.

    s_i = max_j |W_ij| / 127                      one scale per output channel i (W: (out, in))
    q_ij = clip(round(W_ij / s_i), -127, 127)     int8; |q_ij s_i - W_ij| <= s_i / 2
    y = x (q s)^T + b = (x q^T) s + b             the scale leaves the sum: s_i multiplies
                                                  column i of x q^T

Only the weights are int8 (1 byte instead of 4 read per weight when decoding); activations,
norms, the KV cache stay in the model's dtype. Decoding (a few rows at a time) runs through
``torch._weight_int8pack_mm``, PyTorch's CPU kernel for int8 weights with bfloat16 activations
(measured on a 2-core AVX-512 EPYC: the 50257 x 384 head in 0.54 ms, 15x faster than the float32
nn.Linear and 5x faster than float32 in the faster (d, V) layout; a float16 activation takes a
slow path, 10 ms); its inputs and outputs are rounded to bfloat16 (8 significant bits), so
decoded logits differ from the float formula by ~0.3% of their largest value (up to ~1% on
a small model: docs/inference.md). Many rows at once
(a prompt, an evaluation batch) are multiplied by the dequantised matrix q s in the model's
dtype instead: that product is a matrix-matrix one where BLAS is fast, and exact to float32.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

QMAX = 127  # symmetric: -127..127, so that -q is always representable
KERNEL_MAX_ROWS = 16  # up to this many rows, the int8 kernel; more, the dequantised matrix


KERNEL_K_MULTIPLE = 16  # the kernel's inner dimension in blocks of 16 (see int8_kernel_fits)


def int8_kernel_fits(device: torch.device, n_in: int) -> bool:
    """Whether PyTorch's int8-weight matmul runs ``n_in`` inputs on ``device``: the CPU (PyTorch
    >= 2.3), and an input size that is a multiple of 16. Measured on PyTorch 2.13: other sizes
    (8, 12, 24, 40, 56 ...) give wrong products (errors of 20-90%) or crash the process."""
    return (
        device.type == "cpu"
        and hasattr(torch, "_weight_int8pack_mm")
        and n_in % KERNEL_K_MULTIPLE == 0
    )


@torch.no_grad()
def quantize_rows(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-output-channel symmetric int8: s_i = max_j |W_ij| / 127, q_ij = clip(round(W_ij /
    s_i), -127, 127). W: (out, in) float -> q: (out, in) int8, s: (out,) float32. A row of zeros
    gets s = 1/127 (any positive s gives q = 0 there), so that every scale is positive. Computed
    in float64, so that the float32 scales are the correctly rounded quotients."""
    w = weight.detach().to(torch.float64)  # (out, in)
    absmax = w.abs().amax(dim=1)  # (out,)
    scale = torch.where(absmax > 0, absmax, torch.ones_like(absmax)) / QMAX  # (out,)
    scale = scale.to(torch.float32)
    q = torch.round(w / scale.double()[:, None]).clamp_(-QMAX, QMAX).to(torch.int8)
    return q, scale


def dequantize_rows(q: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """W_hat = q s: (out, in) int8 and (out,) scales -> (out, in) in ``dtype``."""
    return q.to(dtype) * scale.to(dtype)[:, None]


def int8_linear(
    x: torch.Tensor,
    q: torch.Tensor,
    scale: torch.Tensor,
    bias: torch.Tensor | None,
    scale_bf16: torch.Tensor | None = None,
) -> torch.Tensor:
    """y = (x q^T) s + b. x: (..., in), q: (out, in) int8, s: (out,), b: (out,) or None ->
    (..., out) in x's dtype. Few rows: PyTorch's int8 kernel on bfloat16 activations (the
    scales applied inside it, in bfloat16: ``scale_bf16`` when the caller keeps that copy);
    many rows, or an input size the kernel cannot take: x (q s)^T with the dequantised
    matrix."""
    rows = x.reshape(-1, x.size(-1))  # (N, in)
    if rows.size(0) <= KERNEL_MAX_ROWS and int8_kernel_fits(x.device, q.size(1)):
        if scale_bf16 is None:
            scale_bf16 = scale.to(torch.bfloat16)
        y = torch._weight_int8pack_mm(rows.to(torch.bfloat16).contiguous(), q, scale_bf16).to(
            x.dtype
        )  # (N, out)
        if bias is not None:
            y = y + bias
    else:
        y = F.linear(rows, dequantize_rows(q, scale, x.dtype), bias)  # (N, out)
    return y.reshape(*x.shape[:-1], q.size(0))


class Int8Linear(nn.Module):
    """y = (x q^T) s + b (:func:`int8_linear`): ``weight`` the int8 q (out, in), ``weight_scale``
    s (out,), ``bias`` b (out,) in the model's dtype. Not trainable: training needs the float
    weights."""

    def __init__(self, in_features: int, out_features: int, bias: bool) -> None:
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.register_buffer("weight", torch.zeros(out_features, in_features, dtype=torch.int8))
        self.register_buffer("weight_scale", torch.ones(out_features) / QMAX)
        self.register_buffer("bias", torch.zeros(out_features) if bias else None)

    @classmethod
    def from_linear(cls, linear: nn.Linear, rounded: bool = True) -> Int8Linear:
        """The int8 form of ``linear`` (:func:`quantize_rows`), on its device; with
        ``rounded=False`` only its shape (zeros, for a checkpoint to fill)."""
        layer = cls(linear.in_features, linear.out_features, linear.bias is not None)
        if rounded:
            layer.weight, layer.weight_scale = quantize_rows(linear.weight)
        if linear.bias is not None:
            layer.bias = linear.bias.detach().clone()
        return layer.to(linear.weight.device)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (..., in) -> (..., out)
        return int8_linear(x, self.weight, self.weight_scale, self.bias, self.kernel_scale())

    def kernel_scale(self) -> torch.Tensor:
        """s in bfloat16 for the kernel, converted once and kept until s changes (a load
        writes into it in place: its version counter moves)."""
        scale = self.weight_scale
        key = (scale.data_ptr(), scale._version, scale.device, scale.dtype)
        if getattr(self, "_kernel_scale_key", None) != key:
            self._kernel_scale = scale.to(torch.bfloat16)
            self._kernel_scale_key = key
        return self._kernel_scale

    def extra_repr(self) -> str:
        return f"in={self.in_features}, out={self.out_features}, int8 per-row scales"


class Int8Embedding(nn.Module):
    """The token table E stored as int8 rows: E[t] = q[t] s_t. With a tied head it is the same
    q and s as the head's (one matrix, quantised once, used both ways)."""

    def __init__(self, num_embeddings: int, embedding_dim: int) -> None:
        super().__init__()
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.register_buffer("weight", torch.zeros(num_embeddings, embedding_dim, dtype=torch.int8))
        self.register_buffer("weight_scale", torch.ones(num_embeddings) / QMAX)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:  # (B, T) -> (B, T, d)
        scale = self.weight_scale[idx, None]  # (B, T, 1)
        return F.embedding(idx, self.weight).to(scale.dtype) * scale
