"""The linear layer y = x Wᵀ + b (seed 000 §3's Q, K, V and output projections, §4's
feed-forward layers, §7's output head), with its number format chosen by the product's size
under the CPU's bfloat16 autocast."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

# Under the CPU's bfloat16 autocast, a product of fewer multiply-adds than this (rows x d_in x
# d_out) runs in float32: casting its input and weight to bfloat16 and its gradients back costs
# more there than the faster product saves. Forward + backward, float32 against bfloat16
# autocast, 2 threads, a 2-core Xeon with AMX (benchmarks/bench_precision.py's linear pass):
# 768x128x65 (nanogpt-cpu's head) 0.78x, 768x96x96 0.77x, 768x128x128 (its W_O) 0.91x,
# 2048x96x96 (the default's W_O) 0.86-0.97x; 2048x128x128 1.11x, 2048x96x192 1.10x, 2048x96x288
# (its W_QKV) 1.37x, 2048x96x768 (its head) 2.01x.
SMALL_PRODUCT_MACS = 24 * 2**20


def runs_in_float32(rows: int, d_in: int, d_out: int) -> bool:
    """Whether a (rows, d_in) @ (d_in, d_out) product under the CPU's bfloat16 autocast is small
    enough to run in float32 (:data:`SMALL_PRODUCT_MACS`)."""
    return rows * d_in * d_out < SMALL_PRODUCT_MACS


def cpu_bfloat16_autocast(x: torch.Tensor) -> bool:
    """Whether ``x`` is on the CPU inside a bfloat16 autocast region."""
    return (
        x.device.type == "cpu"
        and torch.is_autocast_enabled("cpu")
        and torch.get_autocast_dtype("cpu") == torch.bfloat16
    )


class Linear(nn.Linear):
    """``nn.Linear`` (the same weights, names and initialisation), whose small products stay in
    float32 under the CPU's bfloat16 autocast (:data:`SMALL_PRODUCT_MACS`), so that bfloat16
    costs no product of a model more time than float32 would; everywhere else (float32, a GPU,
    larger products) it is ``nn.Linear`` exactly."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if cpu_bfloat16_autocast(x) and runs_in_float32(
            x.numel() // self.in_features, self.in_features, self.out_features
        ):
            with torch.autocast("cpu", enabled=False):
                bias = None if self.bias is None else self.bias.float()
                return F.linear(x.float(), self.weight.float(), bias)
        return super().forward(x)
