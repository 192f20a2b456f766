"""Models to look inside: every variant of tests/conftest.py's matrix, weights moved off their
initial values so that heads, MLPs and positions all matter."""

from __future__ import annotations

import numpy as np
import torch

from light_llm.inspect.text import text_windows
from light_llm.models.gpt import GPT
from light_llm.reference.model import NumpyGPT
from tests.conftest import VARIANTS, tiny_config

PRE_LN_VARIANTS = {name: v for name, v in VARIANTS.items() if v.get("block_order") != "post"}


def shaken_gpt(dtype=torch.float64, seed: int = 0, **overrides) -> GPT:
    """A tiny GPT (tests/conftest.py's tiny_config with ``overrides``) in ``dtype``, its
    weights moved by N(0, 0.3) so that no part is negligible."""
    torch.manual_seed(seed)
    model = GPT(tiny_config(**overrides)).to(dtype).eval()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.3 * torch.randn_like(parameter))
    return model


def numpy_twin(model: GPT) -> NumpyGPT:
    """The same weights in the NumPy engine, in the PyTorch model's dtype."""
    dtype = np.float64 if model.dtype == torch.float64 else np.float32
    return NumpyGPT.from_torch_state_dict(model.state_dict(), model.config, dtype=dtype)


def prompt(length: int = 11, seed: int = 1, vocab: int = 37) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, vocab, length)


def unit_values(model: GPT, layer: int, unit: int, ids: np.ndarray) -> np.ndarray:
    """Unit ``unit`` of layer ``layer``'s MLP at every position of the windows of ``ids``,
    read from the model's own forward (a hook on W_2's input): one value per prediction."""
    captured = []
    projection = model.transformer.h[layer].mlp.c_proj
    handle = projection.register_forward_pre_hook(lambda _, args: captured.append(args[0]))
    try:
        with torch.no_grad():
            for inputs, _, _ in text_windows(ids, model.config.block_size):
                model(torch.as_tensor(inputs))
    finally:
        handle.remove()
    return torch.cat([hidden[..., unit].reshape(-1) for hidden in captured]).numpy()
