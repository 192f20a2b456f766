"""Weight-only int8: the formula in both engines, against each other and against its own
definition; the int8 GPT against the NumPy engine running the dequantised weights."""

import numpy as np
import pytest
import torch

from light_llm.errors import ConfigError
from light_llm.models.gpt import GPT
from light_llm.models.quantize import is_quantized, quantize_gpt
from light_llm.nn.int8 import KERNEL_MAX_ROWS, Int8Linear, int8_kernel_fits, int8_linear
from light_llm.nn.int8 import quantize_rows as quantize_rows_torch
from light_llm.reference.model import NumpyGPT
from light_llm.reference.quantize import (
    dequantize_params,
    dequantize_rows,
    int8_linear_forward,
    quantize_params,
    quantize_rows,
    quantized_names,
)
from tests.conftest import VARIANTS, shaken, tiny_config


def random_weight(rows=40, cols=24, seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    w = rng.normal(0, 0.02, (rows, cols)) * rng.uniform(0.1, 10, (rows, 1))  # rows of any size
    w[3] = 0.0  # a row of zeros
    return w.astype(np.float32)


def test_rounding_error_is_at_most_half_a_step_everywhere():
    w = random_weight()
    q, s = quantize_rows(w)
    assert q.dtype == np.int8 and s.dtype == np.float32 and s.shape == (40,)
    assert (s > 0).all() and np.abs(q.astype(int)).max() <= 127
    error = np.abs(q.astype(np.float64) * s.astype(np.float64)[:, None] - w.astype(np.float64))
    assert (error <= s.astype(np.float64)[:, None] / 2 * (1 + 1e-6)).all()
    # the largest weight of every non-zero row maps to ±127 exactly
    nonzero = np.abs(w).max(axis=1) > 0
    assert (np.abs(q[nonzero]).max(axis=1) == 127).all()
    assert (q[3] == 0).all()


def test_torch_and_numpy_round_to_the_same_integers_and_scales():
    w = random_weight(seed=1)
    q, s = quantize_rows(w)
    q_t, s_t = quantize_rows_torch(torch.from_numpy(w))
    assert q_t.dtype == torch.int8
    np.testing.assert_array_equal(q_t.numpy(), q)
    np.testing.assert_array_equal(s_t.numpy(), s)


def test_the_product_is_x_times_q_transposed_then_scaled():
    """(x q^T) s + b equals x (q s)^T + b, the dequantised matrix's product, in float64."""
    rng = np.random.default_rng(2)
    w, b = random_weight(seed=2).astype(np.float64), rng.normal(size=40)
    x = rng.normal(size=(3, 5, 24))
    q, s = quantize_rows(w)
    y = int8_linear_forward(x, q, s, b)
    expected = x @ dequantize_rows(q, s, np.float64).T + b
    np.testing.assert_allclose(y, expected, rtol=1e-12, atol=1e-12)
    # and the rounding's effect on the product is bounded by the rounding: |x| . s/2 per output
    bound = np.abs(x) @ np.ones((24, 40)) * s / 2
    assert (np.abs(y - (x @ w.T + b)) <= bound + 1e-12).all()


@pytest.mark.parametrize("n_in", [24, 32])
@pytest.mark.parametrize("rows", [1, 4, KERNEL_MAX_ROWS + 1, 64])
def test_torch_int8_linear_matches_the_numpy_formula(rows, n_in):
    """Many rows: the dequantised product, float32-exact; few rows on a CPU: PyTorch's int8
    kernel on bfloat16 activations, within bfloat16's rounding (8 significant bits). 24 inputs
    are not a multiple of 16, which the kernel gets wrong: the dequantised product then."""
    w = random_weight(cols=n_in, seed=3)
    q, s = quantize_rows(w)
    bias = np.linspace(-1, 1, 40).astype(np.float32)
    x = np.random.default_rng(4).normal(size=(rows, n_in)).astype(np.float32)
    expected = int8_linear_forward(x.astype(np.float64), q, s, bias)
    got = int8_linear(
        torch.from_numpy(x), torch.from_numpy(q), torch.from_numpy(s), torch.from_numpy(bias)
    ).numpy()
    if rows <= KERNEL_MAX_ROWS and int8_kernel_fits(torch.device("cpu"), n_in):
        tolerance = 2**-7 * np.abs(expected).max()  # bfloat16 inputs, scales and outputs
    else:
        tolerance = 1e-5 * np.abs(expected).max()
    np.testing.assert_allclose(got, expected, atol=tolerance, rtol=0)


def numpy_twin(model: GPT) -> NumpyGPT:
    """The NumPy engine holding the int8 weights of ``model`` (a float GPT), dequantised: the
    model quantised by the NumPy formula, independently of the PyTorch one."""
    config = model.config
    params = {name: t.detach().numpy() for name, t in model.state_dict().items()}
    if config.tie_embeddings:
        params.pop("lm_head.weight")
    twin = NumpyGPT(config, dtype=np.float64)
    twin.load_state_dict(dequantize_params(quantize_params(params, config), config, np.float64))
    return twin


@pytest.mark.parametrize("variant", ["seed", "untied", "swiglu", "rotary", "recipe", "smear"])
def test_int8_gpt_equals_the_numpy_engine_on_the_dequantised_weights(variant):
    torch.manual_seed(0)
    model = shaken(GPT(tiny_config(**VARIANTS[variant])).eval())
    twin = numpy_twin(model)
    quantized = quantize_gpt(model)
    assert is_quantized(quantized)
    idx = torch.randint(0, 37, (3, 16))  # 48 rows: the dequantised product
    with torch.no_grad():
        logits, _ = quantized(idx)
    expected = twin.forward(idx.numpy())[0]
    np.testing.assert_allclose(logits.double().numpy(), expected, atol=2e-4, rtol=1e-4)


def test_a_tied_head_is_the_token_table_quantised_once():
    model = quantize_gpt(GPT(tiny_config()).eval())
    assert model.lm_head.weight is model.transformer.wte.weight
    assert model.lm_head.weight_scale is model.transformer.wte.weight_scale
    int8 = {name for name, t in model.state_dict().items() if t.dtype == torch.int8}
    assert int8 - {"lm_head.weight"} == set(quantized_names(model.config))


def test_decoding_with_the_kernel_follows_the_full_forward():
    """The cached decoding step (few rows: the int8 kernel) against the full forward over the
    same tokens (many rows: the dequantised product): within bfloat16's rounding."""
    torch.manual_seed(0)
    model = quantize_gpt(GPT(tiny_config()).eval())
    idx = torch.randint(0, 37, (1, 12))
    with torch.no_grad():
        full, _ = model(idx)
        cache = model.new_cache(1)
        model(idx[:, :-1], kv_cache=cache)
        step, _ = model(idx[:, -1:], kv_cache=cache)
    scale = full[0, -1].abs().max()
    assert (step[0, -1] - full[0, -1]).abs().max() <= 0.02 * scale


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_weights_with_nan_or_inf_are_refused_naming_the_tensor(bad):
    model = GPT(tiny_config())
    with torch.no_grad():
        model.transformer.h[1].mlp.c_fc.weight[2, 3] = bad
    with pytest.raises(ConfigError, match=r"transformer\.h\.1\.mlp\.c_fc\.weight holds NaN"):
        quantize_gpt(model)
    params = {n: t.detach().numpy() for n, t in model.state_dict().items()}
    with pytest.raises(ConfigError, match=r"transformer\.h\.1\.mlp\.c_fc\.weight holds NaN"):
        quantize_params(params, model.config)


def test_the_kernels_bfloat16_scales_follow_a_scale_written_in_place():
    layer = Int8Linear.from_linear(torch.nn.Linear(32, 8, bias=False))
    x = torch.randn(1, 32)
    before = layer(x)
    with torch.no_grad():
        layer.weight_scale.mul_(2.0)  # as a checkpoint load writes into it
    torch.testing.assert_close(layer(x), 2.0 * before, rtol=2**-7, atol=0)
