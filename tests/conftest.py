"""Shared test fixtures: small configs covering every variant the ModelConfig allows."""

import pytest
import torch

from light_llm.config import ModelConfig
from light_llm.reference.gradcheck import RECIPE

VARIANTS = {
    "seed": {},
    "sinusoidal": {"positions": "sinusoidal"},
    "sinusoidal-base100": {"positions": "sinusoidal", "position_base": 100.0},
    "rotary": {"positions": "rotary"},
    "no-positions": {"positions": "none"},
    "rmsnorm-nobias": {"norm": "rmsnorm", "bias": False},
    "gelu-tanh": {"activation": "gelu_tanh"},
    "relu": {"activation": "relu"},
    "swiglu": {"activation": "swiglu"},
    "post-ln": {"block_order": "post"},
    "linear-attention": {"attention": "linear"},
    "untied": {"tie_embeddings": False},
    "no-bias": {"bias": False},
    "relu2": {"activation": "relu2"},
    "qk-norm": {"qk_norm": True},
    "qk-norm-linear-attention": {"qk_norm": True, "attention": "linear"},
    "softcap": {"logit_softcap": 2.0},
    "recipe": RECIPE,  # every switch of issue 10's modern recipe together
}


def tiny_config(**overrides) -> ModelConfig:
    base = dict(vocab_size=37, block_size=16, n_layer=2, n_head=2, n_embd=16, dropout=0.0)
    base.update(overrides)
    return ModelConfig(**base)


@pytest.fixture(autouse=True)
def _seed_everything():
    torch.manual_seed(0)


@pytest.fixture
def one_thread(request):
    """Tiny models run fastest on one thread (and the machine is shared); slow tests, which
    train real models, keep torch's thread count."""
    if request.node.get_closest_marker("slow"):
        yield
        return
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
