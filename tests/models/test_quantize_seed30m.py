"""int8 against float32 at the seed-30m shape (6 layers, 384 wide, GPT-2's 50257-token
vocabulary; random N(0, 0.02) weights): the PyTorch int8 model against the NumPy engine on the
dequantised weights, decoding steps against the full forward, and the agreement with float32
(figures in docs/inference.md)."""

import copy

import numpy as np
import pytest
import torch

from light_llm.config import preset
from light_llm.generate import generate
from light_llm.models.gpt import GPT
from light_llm.models.quantize import quantize_gpt
from light_llm.reference.model import NumpyGPT
from light_llm.reference.quantize import dequantize_params, quantize_params


@pytest.fixture(scope="module")
def models():
    torch.manual_seed(0)
    model = GPT(preset("seed-30m", dropout=0.0)).eval()
    prompt = torch.tensor([[464, 3616, 286, 1204, 318]])  # "The meaning of life is"
    text = generate(model, prompt, 59, temperature=0.0)  # float32's own greedy text: (1, 64)
    return model, quantize_gpt(copy.deepcopy(model)), text


def test_int8_seed30m_equals_the_numpy_engine_on_the_dequantised_weights(models):
    model, int8_model, text = models
    params = {name: t.detach().numpy() for name, t in model.state_dict().items()}
    params.pop("lm_head.weight")  # tied
    twin = NumpyGPT(model.config, dtype=np.float32)
    twin.load_state_dict(dequantize_params(quantize_params(params, model.config), model.config))
    expected = twin.forward(text.numpy())[0]  # (1, 64, V)
    with torch.no_grad():
        logits = int8_model(text)[0].numpy()
    np.testing.assert_allclose(logits, expected, atol=1e-4 * np.abs(expected).max(), rtol=0)


def test_int8_seed30m_decoding_follows_its_full_forward_and_float32(models):
    model, int8_model, text = models
    with torch.no_grad():
        reference = model(text)[0][0]  # float32: (64, V)
        full = int8_model(text)[0][0]  # the dequantised product
        cache = int8_model.new_cache(1)
        int8_model(text[:, :1], kv_cache=cache)
        steps = torch.cat(
            [int8_model(text[:, t : t + 1], kv_cache=cache)[0][0] for t in range(1, 64)]
        )  # the int8 kernel, one token at a time: (63, V)
    scale = reference.abs().max()
    assert (steps - full[1:]).abs().max() <= 0.01 * scale  # bfloat16 activations
    assert (full - reference).abs().max() <= 0.05 * scale  # measured 0.02
    agreement = (steps.argmax(-1) == reference[1:].argmax(-1)).float().mean()
    assert agreement >= 0.9  # measured 99.6% over 256 tokens
    targets = text[0, 1:]
    loss = torch.nn.functional.cross_entropy(reference[:-1], targets)
    loss_int8 = torch.nn.functional.cross_entropy(full[:-1], targets)
    assert abs(float(loss_int8 - loss)) < 0.01
