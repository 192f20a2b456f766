"""The NumPy engine's LoRA against PyTorch's LoRALinear and autograd (float64): the same
output, and dx, dW, db, dA, dB (finite differences: test_gradcheck.py, ops lora*)."""

import numpy as np
import pytest
import torch

from light_llm.nn.lora import LoRALinear
from light_llm.reference.lora import lora_backward, lora_forward


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("bias", [True, False])
def test_forward_and_gradients_equal_autograd(seed, bias):
    torch.manual_seed(seed)
    d_in, d_out, rank, alpha = 6, 5, 3, 4.0
    layer = LoRALinear(d_in, d_out, rank, alpha, bias=bias).double()
    with torch.no_grad():
        layer.lora_B.normal_()  # B = 0 would leave dA = 0
    x = torch.randn(2, 4, d_in, dtype=torch.float64, requires_grad=True)
    out = layer(x)
    upstream = torch.randn_like(out)
    out.backward(upstream)

    def arr(t):
        return t.detach().numpy().copy()

    ours, cache = lora_forward(
        arr(x),
        arr(layer.weight),
        arr(layer.bias) if bias else None,
        arr(layer.lora_A),
        arr(layer.lora_B),
        alpha / rank,
    )
    np.testing.assert_allclose(ours, arr(out), rtol=0, atol=1e-12)
    dx, dweight, dbias, dlora_a, dlora_b = lora_backward(arr(upstream), cache)
    np.testing.assert_allclose(dx, arr(x.grad), atol=1e-12)
    np.testing.assert_allclose(dweight, arr(layer.weight.grad), atol=1e-12)
    np.testing.assert_allclose(dlora_a, arr(layer.lora_A.grad), atol=1e-12)
    np.testing.assert_allclose(dlora_b, arr(layer.lora_B.grad), atol=1e-12)
    if bias:
        np.testing.assert_allclose(dbias, arr(layer.bias.grad), atol=1e-12)
    else:
        assert dbias is None


def test_dropout_masks_only_the_adapter_path():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 4))
    weight, lora_a = rng.standard_normal((5, 4)), rng.standard_normal((2, 4))
    lora_b = rng.standard_normal((5, 2))
    out, cache = lora_forward(x, weight, None, lora_a, lora_b, 0.5, 0.5, np.random.default_rng(1))
    mask = cache[1]  # the scaled mask m: out = x W^T + s (x ⊙ m) A^T B^T
    assert set(np.unique(mask)) == {0.0, 2.0}
    np.testing.assert_allclose(out, x @ weight.T + 0.5 * (x * mask) @ lora_a.T @ lora_b.T)
