"""The NumPy optimisers against torch.optim, step by step, and ten AdamW steps of the whole
model against ten steps of torch.optim.AdamW from the same start."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from light_llm.errors import ConfigError
from light_llm.models.gpt import GPT
from light_llm.reference.model import NumpyGPT
from light_llm.reference.optim import (
    SGD,
    Adam,
    AdamW,
    MuonAdamW,
    clip_grad_norm,
    newton_schulz,
)
from light_llm.schedule import learning_rate, muon_momentum
from light_llm.train.muon import configure_muon
from light_llm.train.muon import newton_schulz as torch_newton_schulz
from light_llm.train.optim import configure_adamw, set_learning_rate, set_muon_momentum
from tests.conftest import VARIANTS, tiny_config

TOLERANCE = {np.float64: 1e-10, np.float32: 1e-5}


def rel(a, b) -> float:
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    return float(np.abs(a - b).max() / max(np.abs(a).max() + np.abs(b).max(), 1e-300))


def random_problem(dtype, seed=0):
    """A matrix, an embedding-like table and a bias, with ten random gradients each."""
    rng = np.random.default_rng(seed)
    shapes = {"w": (5, 4), "table": (7, 3), "b": (4,)}
    params = {n: rng.standard_normal(s).astype(dtype) for n, s in shapes.items()}
    grads = [
        {n: rng.standard_normal(s).astype(dtype) for n, s in shapes.items()} for _ in range(10)
    ]
    return params, grads


def groups(decay, no_decay, weight_decay):
    """Decay on matrices only, as the NumPy optimisers do."""
    return [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]


def run_torch(optimizer_factory, params, grads, lrs):
    tensors = {n: torch.tensor(p.copy(), requires_grad=True) for n, p in params.items()}
    decay = [tensors["w"], tensors["table"]]
    optimizer = optimizer_factory(decay, [tensors["b"]])
    for g, lr in zip(grads, lrs, strict=True):
        for group in optimizer.param_groups:
            group["lr"] = lr
        for n, t in tensors.items():
            t.grad = torch.from_numpy(g[n].copy())
        optimizer.step()
    return {n: t.detach().numpy() for n, t in tensors.items()}


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("kind", ["adamw", "adam", "sgd"])
def test_ten_steps_equal_torch_optim(kind, dtype):
    params, grads = random_problem(dtype)
    lrs = [learning_rate(step, 1e-2, 1e-3, 3, 10) for step in range(10)]
    ours = {n: p.copy() for n, p in params.items()}
    if kind == "adamw":
        optimizer = AdamW(ours, 1e-2, (0.9, 0.95), eps=1e-8, weight_decay=0.1)

        def factory(decay, no_decay):
            return torch.optim.AdamW(
                groups(decay, no_decay, 0.1), lr=1e-2, betas=(0.9, 0.95), eps=1e-8
            )
    elif kind == "adam":
        optimizer = Adam(ours, 1e-2, (0.8, 0.99), weight_decay=0.05)

        def factory(decay, no_decay):
            return torch.optim.Adam(groups(decay, no_decay, 0.05), lr=1e-2, betas=(0.8, 0.99))
    else:
        optimizer = SGD(ours, 1e-2, momentum=0.9, dampening=0.0, weight_decay=0.01)

        def factory(decay, no_decay):
            return torch.optim.SGD(groups(decay, no_decay, 0.01), lr=1e-2, momentum=0.9)

    for g, lr in zip(grads, lrs, strict=True):
        optimizer.step(g, lr)
    theirs = run_torch(factory, params, grads, lrs)
    for name in params:
        assert ours[name].dtype == dtype
        assert rel(ours[name], theirs[name]) <= TOLERANCE[dtype], name
        assert not np.allclose(ours[name], params[name])  # it moved


def test_sgd_with_the_seeds_dampened_momentum_is_an_average_of_gradients():
    """seed 002 eqs. 5-6 with τ = β: v_t = (1-β) Σ_s β^(t-s) g_s, starting from v_0 = 0."""
    params, grads = random_problem(np.float64)
    ours = {n: p.copy() for n, p in params.items()}
    optimizer = SGD(ours, 0.1, momentum=0.9, dampening=0.9)
    for g in grads:
        optimizer.step(g)
    for name in params:
        velocities = [
            0.1 * sum(0.9 ** (t - s) * grads[s][name] for s in range(t + 1)) for t in range(10)
        ]
        expected = params[name] - 0.1 * sum(velocities)
        assert rel(ours[name], expected) < 1e-13


@pytest.mark.parametrize("embedding_lr", [None, 0.05])
@pytest.mark.parametrize("variant", ["seed", "recipe"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_ten_adamw_training_steps_of_the_gpt_equal_torch(dtype, variant, embedding_lr):
    """Same start, same batches, the warmup + cosine schedule, clipping at 1.0: after ten
    steps every parameter of the NumPy GPT equals the PyTorch GPT's (the seed's model, and
    the modern recipe's switches together)."""
    config = tiny_config(**VARIANTS[variant], dropout=0.0)
    torch.manual_seed(0)
    torch_model = GPT(config)
    if dtype == np.float64:
        torch_model = torch_model.double()
    numpy_model = NumpyGPT.from_torch_state_dict(torch_model.state_dict(), config)
    torch_optimizer = configure_adamw(
        torch_model, 0.1, 1e-2, (0.9, 0.95), "cpu", embedding_lr=embedding_lr
    )
    numpy_optimizer = AdamW(
        numpy_model.params, 1e-2, (0.9, 0.95), weight_decay=0.1, embedding_lr=embedding_lr
    )
    rng = np.random.default_rng(0)
    for step in range(10):
        tokens = rng.integers(0, config.vocab_size, (4, 17))
        x, y = tokens[:, :-1], np.ascontiguousarray(tokens[:, 1:])
        lr = learning_rate(step, 1e-2, 1e-3, 2, 10)
        logits, _ = torch_model(torch.from_numpy(x))
        loss = F.cross_entropy(logits.reshape(-1, config.vocab_size), torch.from_numpy(y).view(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(torch_model.parameters(), 1.0)
        set_learning_rate(torch_optimizer, lr)
        torch_optimizer.step()
        torch_optimizer.zero_grad()
        _, _, cache = numpy_model.forward(x, y)
        grads = numpy_model.backward(cache)
        clip_grad_norm(grads, 1.0)
        numpy_optimizer.step(grads, lr)
    d = config.n_embd
    for name, parameter in torch_model.named_parameters():
        ours, theirs = numpy_model.params[name], parameter.detach().numpy()
        if dtype == np.float32 and name.endswith("attn.c_attn.bias"):
            # The key bias has a gradient of exactly 0 (adding b to every key adds q·b to a
            # whole row of scores, which the softmax ignores); in float32 what is left is
            # rounding noise, which Adam's g / sqrt(v) scales up to steps of ±lr, different
            # in each engine. The query and value biases are compared.
            ours = np.concatenate((ours[:d], ours[2 * d :]))
            theirs = np.concatenate((theirs[:d], theirs[2 * d :]))
        assert rel(ours, theirs) <= TOLERANCE[dtype], name


@pytest.mark.parametrize("method", ["newton-schulz", "polar-express"])
def test_newton_schulz_equals_the_torch_one(method):
    rng = np.random.default_rng(2)
    for shape in ((6, 6), (9, 4), (4, 9)):
        matrix = rng.standard_normal(shape)
        expected = torch_newton_schulz(torch.from_numpy(matrix), method=method).numpy()
        assert rel(newton_schulz(matrix, method=method), expected) < 1e-13, shape


@pytest.mark.parametrize(
    ("activation", "embedding_lr", "switches", "momentum_warmup"),
    [
        ("gelu", None, {}, 0),
        ("swiglu", 0.3, {}, 0),
        ("swiglu", 0.3, {"orthogonaliser": "polar-express", "cautious": True}, 0),
        ("swiglu", 0.3, {"scale": "aspect"}, 0),
        ("gelu", None, {"scale": "aspect", "normuon": True}, 4),
        ("gelu", None, {}, 4),
        ("gelu", None, {"normuon": True}, 0),
        ("swiglu", 0.3, {"normuon": True, "orthogonaliser": "polar-express", "cautious": True}, 4),
    ],
)
def test_muon_steps_of_the_gpt_equal_torch_in_float64(
    activation, embedding_lr, switches, momentum_warmup
):
    """The same float64 GPT (untied head, so that every kind of parameter is there), the
    same random gradients, the warmup + cosine schedule: after six steps of each engine's
    MuonAdamW every parameter agrees to about 1e-12 and has moved (also with Polar Express
    and cautious weight decay, with the momentum set before each step by a 4-step momentum
    warmup, as the trainers set it, with NorMuon's per-neuron normalisation, and with the
    "aspect" shape scale, which raises the feed-forward layer's wide W_2)."""
    config = tiny_config(activation=activation, tie_embeddings=False)
    torch_model = GPT(config).double()
    numpy_model = NumpyGPT.from_torch_state_dict(torch_model.state_dict(), config)
    start = {n: p.copy() for n, p in numpy_model.params.items()}
    torch_optimizer = configure_muon(
        torch_model, 1e-3, 0.02, 0.95, (0.9, 0.95), 0.1, embedding_lr=embedding_lr, **switches
    )
    numpy_optimizer = MuonAdamW(
        numpy_model.params, 1e-3, 0.02, 0.95, (0.9, 0.95), 1e-8, 0.1, embedding_lr, **switches
    )
    assert len(numpy_optimizer.muon_params) == 4 * config.n_layer + (
        config.n_layer if activation == "swiglu" else 0
    )
    rng = np.random.default_rng(0)
    parameters = dict(torch_model.named_parameters())
    for step in range(6):
        grads = {n: rng.standard_normal(p.shape) for n, p in numpy_model.params.items()}
        lr = learning_rate(step, 1e-3, 1e-4, 2, 6)
        for name, parameter in parameters.items():
            parameter.grad = torch.from_numpy(grads[name].copy())
        set_learning_rate(torch_optimizer, lr)
        set_muon_momentum(torch_optimizer, muon_momentum(step, 0.95, momentum_warmup))
        numpy_optimizer.momentum = muon_momentum(step, 0.95, momentum_warmup)
        torch_optimizer.step()
        numpy_optimizer.step(grads, lr)
    for name, parameter in parameters.items():
        ours, theirs = numpy_model.params[name], parameter.detach().numpy()
        assert rel(ours, theirs) < 1e-12, name
        assert not np.allclose(ours, start[name]), name


def test_clip_grad_norm_equals_torch():
    rng = np.random.default_rng(1)
    grads = {n: rng.standard_normal(s) for n, s in (("a", (3, 4)), ("b", (5,)))}
    tensors = [torch.tensor(g.copy(), requires_grad=True) for g in grads.values()]
    for t, g in zip(tensors, grads.values(), strict=True):
        t.grad = torch.from_numpy(g.copy())
    expected_norm = torch.nn.utils.clip_grad_norm_(tensors, 0.5).item()
    norm = clip_grad_norm(grads, 0.5)
    assert math.isclose(norm, expected_norm, rel_tol=1e-12)
    for g, t in zip(grads.values(), tensors, strict=True):
        assert rel(g, t.grad.numpy()) < 1e-12
    total = math.sqrt(sum((g**2).sum() for g in grads.values()))
    assert math.isclose(total, 0.5, rel_tol=1e-5)  # clipped to c
    untouched = {"a": np.array([0.1, 0.2])}
    clip_grad_norm(untouched, 1.0)
    assert np.array_equal(untouched["a"], [0.1, 0.2])  # below c: unchanged


def test_schedule_is_the_trainers_nanogpt_style_warmup_then_cosine():
    assert learning_rate(0, 1.0, 0.1, 10, 100) == pytest.approx(1 / 11)
    assert learning_rate(10, 1.0, 0.1, 10, 100) == pytest.approx(1.0)
    assert learning_rate(55, 1.0, 0.1, 10, 100) == pytest.approx(0.1 + 0.5 * 0.9)
    assert learning_rate(100, 1.0, 0.1, 10, 100) == pytest.approx(0.1)
    assert learning_rate(500, 1.0, 0.1, 10, 100) == 0.1


def test_bad_options_are_one_sentence():
    params = {"w": np.zeros((2, 2))}
    with pytest.raises(ConfigError, match="betas must lie in"):
        AdamW(params, 1e-3, (0.9, 1.0))
    with pytest.raises(ConfigError, match="momentum must be in"):
        SGD(params, 1e-3, momentum=1.5)
    with pytest.raises(ConfigError, match="learning rate must be >= 0"):
        Adam(params, -1.0)
    with pytest.raises(ConfigError, match="clipping threshold must be positive"):
        clip_grad_norm({"w": np.ones(2)}, 0.0)
    with pytest.raises(ConfigError, match="Muon momentum must lie in"):
        MuonAdamW(params, 1e-3, 0.02, momentum=1.0)
    with pytest.raises(ConfigError, match="learning rates must be positive"):
        MuonAdamW(params, 1e-3, 0.0)
    with pytest.raises(ConfigError, match="unknown Muon scale 'wide'; known: keller, aspect"):
        MuonAdamW(params, 1e-3, 0.02, scale="wide")
