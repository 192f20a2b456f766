"""Shared test fixtures: small configs covering every variant the ModelConfig allows."""

from pathlib import Path

import pytest
import torch

from light_llm.cache import CACHE_ENV
from light_llm.checkpoints import save
from light_llm.config import ModelConfig
from light_llm.models.gpt import GPT
from light_llm.nn.attention import fused_attention_dtype
from light_llm.reference.gradcheck import RECIPE
from light_llm.tokenizers import CharTokenizer

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
    "multi-token": {"mtp_weight": 0.5},  # a training loss on the token after next too
    "value-embeddings": {"value_embeddings": True},
    "embedding-skip": {"embedding_skip": True},
    "smear": {"smear": True},  # a one-token look-back on the embedding
    "recipe": RECIPE,  # every switch of issue 10's modern recipe together
}


def tiny_config(**overrides) -> ModelConfig:
    base = dict(vocab_size=37, block_size=16, n_layer=2, n_head=2, n_embd=16, dropout=0.0)
    base.update(overrides)
    return ModelConfig(**base)


CHAR_CORPUS = "to be or not to be, that is the question"


def shaken(model: torch.nn.Module) -> torch.nn.Module:
    """``model`` with its weights moved off their initial values by N(0, 0.3²) each (so that
    its outputs are not near-uniform and greedy decoding is not a near tie)."""
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.3 * torch.randn_like(parameter))
    return model


def save_char_checkpoint(folder: Path, **shape) -> tuple[Path, GPT, CharTokenizer]:
    """A small character-level GPT over CHAR_CORPUS's characters, its weights moved off their
    initial values (:func:`shaken`), saved to ``folder``."""
    tokenizer = CharTokenizer.from_text(CHAR_CORPUS)
    model = shaken(GPT(ModelConfig(vocab_size=tokenizer.vocab_size, n_head=2, **shape)).eval())
    save(model, folder, tokenizer)
    return folder, model, tokenizer


@pytest.fixture(autouse=True)
def _seed_everything():
    torch.manual_seed(0)


@pytest.fixture(autouse=True)
def _machine_cache_in_tmp(tmp_path_factory, monkeypatch):
    """What light-llm measures about the machine (bandwidth, decoding threads) is cached in a
    folder of the test's own, never in the user's ~/.cache; the bandwidth copy is small (the
    figure is not what tests check)."""
    from light_llm import decode_stats

    monkeypatch.setattr(decode_stats, "COPY_BYTES", 8 * 2**20)  # a light bandwidth copy


@pytest.fixture(scope="session", autouse=True)
def _session_user_cache(tmp_path_factory):
    """The user cache (light_llm.cache) of the session's shared fixtures: never the real one
    under ~/.cache."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(CACHE_ENV, str(tmp_path_factory.mktemp("user-cache")))
        yield


@pytest.fixture(autouse=True)
def _user_cache(tmp_path_factory, monkeypatch):
    """Each test its own empty user cache, so that no test sees what another cached."""
    monkeypatch.setenv(CACHE_ENV, str(tmp_path_factory.mktemp("user-cache")))


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


@pytest.fixture(scope="session")
def shakespeare() -> str:
    """The default corpus, all of Shakespeare as plain text."""
    from light_llm.shakespeare import shakespeare_text

    return shakespeare_text()


def gradients_without_and_with_checkpointing(model, ids) -> list[dict[str, torch.Tensor]]:
    """The gradients by name of the loss of ``model(ids, ids)``, plain then with gradient
    checkpointing, under bfloat16 autocast with the fused attention in float32 (the trainer's
    CPU mixed precision)."""
    grads = []
    for checkpointing in (False, True):
        model.zero_grad()
        model.gradient_checkpointing = checkpointing
        with torch.autocast("cpu", dtype=torch.bfloat16), fused_attention_dtype(torch.float32):
            _, loss = model(ids, ids)
        loss.backward()
        grads.append({name: p.grad.clone() for name, p in model.named_parameters()})
    return grads
