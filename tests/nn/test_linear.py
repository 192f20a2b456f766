"""light_llm.nn.linear.Linear: nn.Linear, whose small products stay in float32 under the CPU's
bfloat16 autocast."""

import torch
import torch.nn.functional as F
from torch import nn

from light_llm.nn.linear import SMALL_PRODUCT_MACS, Linear, runs_in_float32


def bfloat16_autocast():
    return torch.autocast("cpu", dtype=torch.bfloat16)


def test_a_small_product_under_bfloat16_autocast_is_float32_linear_exactly():
    """The default's W_O at its batch (2048 x 96 x 96 multiply-adds, under the threshold):
    output and gradients are float32 F.linear's to the bit, not bfloat16's."""
    torch.manual_seed(0)
    layer = Linear(96, 96, bias=True)
    x = torch.randn(32, 64, 96, requires_grad=True)
    grad = torch.randn(32, 64, 96)
    assert runs_in_float32(32 * 64, 96, 96)
    with bfloat16_autocast():
        y = layer(x)
    y.backward(grad)
    assert y.dtype == torch.float32

    x_ref = x.detach().clone().requires_grad_()
    w_ref = layer.weight.detach().clone().requires_grad_()
    b_ref = layer.bias.detach().clone().requires_grad_()
    y_ref = F.linear(x_ref, w_ref, b_ref)
    y_ref.backward(grad)
    assert torch.equal(y, y_ref)
    assert torch.equal(x.grad, x_ref.grad)
    assert torch.equal(layer.weight.grad, w_ref.grad)
    assert torch.equal(layer.bias.grad, b_ref.grad)

    with bfloat16_autocast():  # bfloat16 itself would differ: the test can tell them apart
        y_bf16 = F.linear(x, layer.weight, layer.bias)
    assert y_bf16.dtype == torch.bfloat16
    assert not torch.equal(y_bf16.float(), y)


def test_a_large_product_under_bfloat16_autocast_is_autocasts():
    """The default's W_QKV (2048 x 96 x 288): bfloat16, as nn.Linear under autocast."""
    torch.manual_seed(1)
    layer = Linear(96, 288, bias=False)
    plain = nn.Linear(96, 288, bias=False)
    plain.weight = layer.weight
    x = torch.randn(32, 64, 96)
    assert not runs_in_float32(32 * 64, 96, 288)
    with bfloat16_autocast():
        y, y_plain = layer(x), plain(x)
    assert y.dtype == torch.bfloat16
    assert torch.equal(y, y_plain)


def test_the_threshold_counts_every_row_of_a_batch():
    """rows = every leading dimension together; the boundary is strict."""
    d_in, d_out = 64, 64
    rows = SMALL_PRODUCT_MACS // (d_in * d_out)
    assert rows * d_in * d_out == SMALL_PRODUCT_MACS
    assert not runs_in_float32(rows, d_in, d_out)
    assert runs_in_float32(rows - 1, d_in, d_out)
    layer = Linear(d_in, d_out, bias=False)
    with bfloat16_autocast():
        assert layer(torch.randn(rows - 1, d_in)).dtype == torch.float32
        assert layer(torch.randn(2, (rows - 1) // 2, d_in)).dtype == torch.float32
        assert layer(torch.randn(rows, d_in)).dtype == torch.bfloat16


def test_outside_bfloat16_autocast_it_is_nn_linear():
    """float32, float64, and a bfloat16 model without autocast: nn.Linear's numbers."""
    torch.manual_seed(2)
    layer = Linear(8, 5)
    plain = nn.Linear(8, 5)
    plain.load_state_dict(layer.state_dict())
    assert set(layer.state_dict()) == {"weight", "bias"}
    x = torch.randn(3, 8)
    assert torch.equal(layer(x), plain(x))
    assert torch.equal(layer.double()(x.double()), plain.double()(x.double()))
    assert layer.bfloat16()(x.bfloat16()).dtype == torch.bfloat16
