"""Muon (light_llm.train.muon): the Newton-Schulz iteration against an SVD, the optimizer's
AdamW half against torch.optim.AdamW, its param groups, its state through a checkpoint."""

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from light_llm.errors import ConfigError
from light_llm.models.bert import ENCODER_PRESETS, BertEncoder
from light_llm.models.gpt import GPT
from light_llm.muon_spec import (
    NS_COEFFICIENTS,
    NS_STEPS,
    POLAR_EXPRESS_COEFFICIENTS,
    POLAR_EXPRESS_MARGIN,
    is_muon_matrix,
)
from light_llm.train.muon import MuonAdamW, configure_muon, muon_param_groups, newton_schulz
from light_llm.train.optim import set_learning_rate, set_muon_momentum
from light_llm.train.optimizer_state import load_optimizer_state, optimizer_files
from tests.conftest import tiny_config

SHAPES = [(24, 24), (40, 12), (12, 40)]  # square, tall (transposed inside), wide


def random_matrix(shape, seed=0):
    return torch.from_numpy(np.random.default_rng(seed).standard_normal(shape))  # float64


def with_singular_values(shape, singular_values, seed=0):
    """U diag(s) Vᵀ with random orthonormal U (rows, r) and V (cols, r), r = min(shape)."""
    rng = np.random.default_rng(seed)
    rows, cols = shape
    u, _ = np.linalg.qr(rng.standard_normal((rows, len(singular_values))))
    v, _ = np.linalg.qr(rng.standard_normal((cols, len(singular_values))))
    return torch.from_numpy(u * singular_values @ v.T), torch.from_numpy(u), torch.from_numpy(v)


METHODS = {
    "newton-schulz": (1.0, [NS_COEFFICIENTS] * NS_STEPS),
    "polar-express": (POLAR_EXPRESS_MARGIN, list(POLAR_EXPRESS_COEFFICIENTS)),
}


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("shape", SHAPES)
def test_newton_schulz_keeps_the_singular_vectors_and_maps_each_singular_value(shape, method):
    """O = NS(G) for G = U S Vᵀ: Uᵀ O V is diagonal (same singular vectors), and its diagonal
    is the scalar quintic p_k(σ) = a_k σ + b_k σ³ + c_k σ⁵ applied step by step to
    σ / (m ||G||_F): Keller Jordan's one quintic five times, or Polar Express's five."""
    g = random_matrix(shape)
    u, s, vt = torch.linalg.svd(g, full_matrices=False)
    o = newton_schulz(g, method=method)
    assert o.shape == g.shape and o.dtype == torch.float64
    core = u.T @ o @ vt.T  # (r, r)
    off_diagonal = core - torch.diag(torch.diagonal(core))
    assert off_diagonal.abs().max() < 1e-12
    margin, steps = METHODS[method]
    sigma = s / (margin * torch.linalg.norm(g) + 1e-7)
    for a, b, c in steps:
        sigma = a * sigma + b * sigma**3 + c * sigma**5
    torch.testing.assert_close(torch.diagonal(core), sigma, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("shape", SHAPES)
def test_polar_express_lands_nearer_the_polar_factor_than_newton_schulz(shape):
    """Singular values spread over two decades: Polar Express's five steps leave every one
    within 0.16 of 1, and O nearer U Vᵀ (the polar factor, from the SVD) than Keller
    Jordan's quintic does, which leaves some 0.3 away."""
    r = min(shape)
    g, u, v = with_singular_values(shape, 3.0 * np.geomspace(1.0, 1e-2, r))
    polar = u @ v.T
    express, jordan = newton_schulz(g, method="polar-express"), newton_schulz(g)
    after = torch.linalg.svdvals(express)
    assert (after - 1).abs().max() < 0.16, after
    assert (torch.linalg.svdvals(jordan) - 1).abs().max() > 0.25
    distance = {
        name: torch.linalg.matrix_norm(o - polar, ord=2).item()
        for name, o in (("express", express), ("jordan", jordan))
    }
    assert distance["express"] < 0.16 < distance["jordan"], distance


@pytest.mark.parametrize("shape", SHAPES)
def test_newton_schulz_brings_singular_values_into_the_quintic_band(shape):
    """Singular values spread over two decades (relative to the largest) all end in about
    [0.7, 1.2], so O is close to U Vᵀ. (A direction below about 1e-3 of ||G||_F would not:
    five steps multiply a small σ by at most a⁵ ≈ 490.)"""
    r = min(shape)
    g, u, v = with_singular_values(shape, 5.0 * np.geomspace(1.0, 0.01, r))
    o = newton_schulz(g)
    after = torch.linalg.svdvals(o)
    assert after.min() > 0.65 and after.max() < 1.2, after
    assert torch.linalg.matrix_norm(o - u @ v.T, ord=2) < 0.35  # max |σ' - 1|


def test_newton_schulz_in_bfloat16_is_close_to_float64():
    g = random_matrix((40, 12), seed=1)
    exact = newton_schulz(g)
    fast = newton_schulz(g.float(), dtype=torch.bfloat16)
    assert fast.dtype == torch.bfloat16
    assert (fast.double() - exact).abs().max() < 0.05


@pytest.mark.parametrize("shape", [(3, 12, 5), (4, 5, 12)])
def test_a_stack_is_orthogonalised_matrix_by_matrix(shape):
    """The optimizer orthogonalises same-shape matrices as one stack: each equals its own."""
    stack = torch.randn(*shape, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    together = newton_schulz(stack)
    for matrix, result in zip(stack, together, strict=True):
        torch.testing.assert_close(result, newton_schulz(matrix), rtol=0, atol=1e-13)


def test_a_zero_gradient_gives_a_zero_update():
    assert torch.equal(newton_schulz(torch.zeros(3, 5)), torch.zeros(3, 5))


def test_param_groups_muon_for_block_matrices_adamw_for_the_rest():
    model = GPT(tiny_config(activation="swiglu", tie_embeddings=False))
    groups = muon_param_groups(model, lr=1e-3, muon_lr=0.02, weight_decay=0.1)
    names = {id(p): n for n, p in model.named_parameters()}
    kinds = {names[id(p)]: (g["kind"], g["weight_decay"]) for g in groups for p in g["params"]}
    assert sorted(kinds) == sorted(names.values())  # every parameter, once
    for name, parameter in model.named_parameters():
        kind, decay = kinds[name]
        in_block = name.startswith("transformer.h.")
        if parameter.dim() == 2 and in_block:
            assert kind == "muon" and decay == pytest.approx(0.1 * 1e-3 / 0.02), name
        elif parameter.dim() == 2:  # wte, wpe, lm_head
            assert kind == "adamw" and decay == 0.1, name
        else:  # biases and gains
            assert kind == "adamw" and decay == 0.0, name
    assert kinds["transformer.h.1.mlp.c_v.weight"][0] == "muon"
    assert kinds["lm_head.weight"][0] == "adamw"
    (muon,) = [g for g in groups if g["kind"] == "muon"]
    assert muon["lr_ratio"] == pytest.approx(20.0)


def test_param_groups_of_the_encoder_and_of_a_tied_gpt():
    encoder = BertEncoder(ENCODER_PRESETS["bert-shakespeare"].replace(vocab_size=50, n_layer=1))
    muon_names = [n for n, p in encoder.named_parameters() if is_muon_matrix(n, p.dim())]
    assert sorted(muon_names) == [
        "h.0.attn.c_attn.weight",
        "h.0.attn.c_proj.weight",
        "h.0.mlp.c_fc.weight",
        "h.0.mlp.c_proj.weight",
    ]
    tied = GPT(tiny_config())
    groups = muon_param_groups(tied, 1e-3, 0.02, 0.1)
    listed = [p for g in groups for p in g["params"]]
    assert len(listed) == len(list(tied.parameters()))  # wte = lm_head listed once


def test_the_adamw_half_equals_torch_optim_adamw():
    model = GPT(tiny_config()).double()
    reference = GPT(tiny_config()).double()
    reference.load_state_dict(model.state_dict())
    ours = MuonAdamW(
        [{"params": list(model.parameters()), "kind": "adamw", "weight_decay": 0.1}],
        lr=1e-2,
        betas=(0.9, 0.95),
    )
    theirs = torch.optim.AdamW(
        reference.parameters(), lr=1e-2, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1
    )
    x = torch.randint(0, 37, (3, 16))
    for lr in (1e-2, 5e-3, 2e-3):
        for m, optimizer in ((model, ours), (reference, theirs)):
            set_learning_rate(optimizer, lr)
            m(x, x)[1].backward()
            optimizer.step()
            optimizer.zero_grad()
    for (name, a), b in zip(model.named_parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-14, msg=name)


def test_two_muon_steps_follow_the_nesterov_equations():
    """M1 = G1, N1 = G1 + μ M1; M2 = μ M1 + G2, N2 = G2 + μ M2; each step
    W = W (1 - η λ_μ) - η sqrt(max(1, 16/4)) NS(N) for the (16, 4) matrix."""
    mu, lr, decay = 0.9, 0.1, 0.5
    weight = torch.nn.Parameter(random_matrix((16, 4), seed=2))
    optimizer = MuonAdamW(
        [{"params": [weight], "kind": "muon", "weight_decay": decay}], lr=lr, momentum=mu
    )
    expected, momentum = weight.detach().clone(), torch.zeros(16, 4, dtype=torch.float64)
    for seed in (3, 4):
        grad = random_matrix((16, 4), seed=seed)
        momentum = mu * momentum + grad
        expected = expected * (1 - lr * decay) - lr * 2.0 * newton_schulz(grad + mu * momentum)
        weight.grad = grad.clone()
        optimizer.step()
        torch.testing.assert_close(weight.detach(), expected, rtol=1e-13, atol=1e-13)


# the shape scale of a (d_out, d_in) matrix under each rule, written out again
SCALES = {
    "keller": lambda rows, cols: max(1.0, rows / cols) ** 0.5,
    "aspect": lambda rows, cols: (max(rows, cols) / min(rows, cols)) ** 0.5,
}


@pytest.mark.parametrize("rule", SCALES)
def test_matrices_of_one_shape_either_way_up_step_as_each_would_alone(rule):
    """A (16, 4) and a (4, 16) matrix share one batched orthogonalisation (the tall one as
    its transpose); each still takes W = W - η s NS(N) of its own, with s = sqrt(max(1,
    d_out/d_in)) (keller) or sqrt(max(d_out, d_in) / min(d_out, d_in)) (aspect)."""
    lr = 0.1
    shapes = [(16, 4), (4, 16), (16, 4), (6, 6)]
    weights = [torch.nn.Parameter(random_matrix(shape, seed=i)) for i, shape in enumerate(shapes)]
    optimizer = MuonAdamW([{"params": weights, "kind": "muon"}], lr=lr, momentum=0.0, scale=rule)
    expected = []
    for i, (weight, shape) in enumerate(zip(weights, shapes, strict=True)):
        weight.grad = random_matrix(shape, seed=10 + i)
        expected.append(weight.detach() - lr * SCALES[rule](*shape) * newton_schulz(weight.grad))
    optimizer.step()
    for weight, want in zip(weights, expected, strict=True):
        torch.testing.assert_close(weight.detach(), want, rtol=0, atol=1e-13)


@pytest.mark.parametrize("shape", [(24, 8), (8, 24), (12, 12)])
def test_the_aspect_scale_gives_every_step_the_rms_of_its_shorter_side(shape):
    """Under "aspect" a matrix whose shorter side is r steps with RMS p/sqrt(r) at lr 1,
    wide, tall or square, where p is the value the orthogonaliser gives a singular value:
    for a gradient U (0.8 I) Vᵀ, NS(G) = p U Vᵀ, whose entries have RMS p/sqrt(max side)."""
    r = min(shape)
    gradient, u, v = with_singular_values(shape, [0.8] * r, seed=5)
    polar = u @ v.T  # (d_out, d_in), r unit singular values
    p = float((newton_schulz(gradient) * polar).sum() / r)
    torch.testing.assert_close(newton_schulz(gradient), p * polar, rtol=0, atol=1e-12)
    weight = torch.nn.Parameter(torch.zeros(shape, dtype=torch.float64))
    weight.grad = gradient
    MuonAdamW([{"params": [weight], "kind": "muon"}], lr=1.0, momentum=0.0, scale="aspect").step()
    step = -weight.detach()
    assert float(step.pow(2).mean().sqrt()) == pytest.approx(p / r**0.5, rel=1e-12)


def test_the_momentum_set_before_each_step_is_the_one_it_takes():
    """set_muon_momentum μ1 = 0.85, then μ2 = 0.9 (a warmup's first two values, here by
    hand): M1 = G1, N1 = G1 + μ1 M1; M2 = μ2 M1 + G2, N2 = G2 + μ2 M2. The AdamW group keeps
    its betas."""
    lr = 0.1
    weight = torch.nn.Parameter(random_matrix((16, 4), seed=2))
    table = torch.nn.Parameter(random_matrix((5, 3), seed=5))
    optimizer = MuonAdamW(
        [{"params": [weight], "kind": "muon"}, {"params": [table], "kind": "adamw"}],
        lr=lr,
        momentum=0.95,
    )
    expected, momentum = weight.detach().clone(), torch.zeros(16, 4, dtype=torch.float64)
    for mu, seed in ((0.85, 3), (0.9, 4)):
        grad = random_matrix((16, 4), seed=seed)
        momentum = mu * momentum + grad
        expected = expected - lr * 2.0 * newton_schulz(grad + mu * momentum)
        set_muon_momentum(optimizer, mu)
        weight.grad, table.grad = grad.clone(), torch.zeros(5, 3, dtype=torch.float64)
        optimizer.step()
        torch.testing.assert_close(weight.detach(), expected, rtol=1e-13, atol=1e-13)
    kinds = {g["kind"]: g for g in optimizer.param_groups}
    assert kinds["muon"]["momentum"] == 0.9 and kinds["adamw"]["momentum"] == 0.95


def normuon_by_hand(o, v, beta2=0.95, eps=1e-10):
    """NorMuon's formula, entry by entry in plain Python: v_i = β2 v_i + (1-β2) Σ_j O_ij² /
    d_in per row i, Ô_ij = O_ij / (sqrt(v_i) + ε), then Ô scaled to O's Frobenius norm."""
    rows, cols = o.shape
    v = [
        beta2 * v[i] + (1 - beta2) * sum(o[i, j] ** 2 for j in range(cols)) / cols
        for i in range(rows)
    ]
    hat = np.array([[o[i, j] / (v[i] ** 0.5 + eps) for j in range(cols)] for i in range(rows)])
    norm = sum(o[i, j] ** 2 for i in range(rows) for j in range(cols)) ** 0.5
    hat_norm = sum(hat[i, j] ** 2 for i in range(rows) for j in range(cols)) ** 0.5
    return hat * norm / (hat_norm + eps), v


@pytest.mark.parametrize("shape", [(16, 4), (4, 16)])
def test_normuon_normalises_each_output_neuron_then_keeps_the_update_norm(shape):
    """Three steps of --normuon against the formula computed by hand from O = NS(N): each
    row (output neuron, also of a tall matrix that Newton-Schulz transposes inside) divided
    by the root of its running mean square, the whole scaled back to ||O||_F. At the first
    step v = (1-β2) mean_j O_ij², so every row of the update has the same norm."""
    mu, lr = 0.9, 0.1
    weight = torch.nn.Parameter(random_matrix(shape, seed=2))
    optimizer = MuonAdamW([{"params": [weight], "kind": "muon"}], lr=lr, momentum=mu, normuon=True)
    scale = max(1.0, shape[0] / shape[1]) ** 0.5
    expected, momentum = weight.detach().numpy().copy(), np.zeros(shape)
    v = [0.0] * shape[0]
    for step, seed in enumerate((3, 4, 5)):
        grad = random_matrix(shape, seed=seed).numpy()
        momentum = mu * momentum + grad
        o = newton_schulz(torch.from_numpy(grad + mu * momentum)).numpy()
        update, v = normuon_by_hand(o, v)
        assert np.linalg.norm(update) == pytest.approx(np.linalg.norm(o), rel=1e-10)  # ε
        if step == 0:
            row_norms = np.linalg.norm(update, axis=1)
            assert row_norms == pytest.approx(np.full(shape[0], row_norms[0]), rel=1e-7)  # ε
            assert np.ptp(np.linalg.norm(o, axis=1)) > 0.01  # O's rows were not equal
        expected = expected - lr * scale * update
        weight.grad = torch.from_numpy(grad.copy())
        optimizer.step()
        np.testing.assert_allclose(weight.detach().numpy(), expected, rtol=1e-12, atol=1e-13)
    stored = optimizer.state[weight]["second_moment"]
    assert stored.shape == (shape[0], 1)
    np.testing.assert_allclose(stored.numpy()[:, 0], v, rtol=1e-12)


def test_cautious_weight_decay_shrinks_only_where_the_update_agrees_in_sign():
    """W = W - η λ_μ 1[O ⊙ W >= 0] ⊙ W - η sqrt(max(1, 16/4)) O with O = NS(N): the entries
    whose update points the other way keep their size before the step, the rest shrink as
    under plain decay; and an AdamW parameter likewise with its update m̂ / (sqrt(v̂) + ε)."""
    mu, lr, decay = 0.9, 0.1, 0.5
    weight = torch.nn.Parameter(random_matrix((16, 4), seed=2))
    table = torch.nn.Parameter(random_matrix((5, 3), seed=5))
    optimizer = MuonAdamW(
        [
            {"params": [weight], "kind": "muon", "weight_decay": decay},
            {"params": [table], "kind": "adamw", "weight_decay": decay},
        ],
        lr=lr,
        momentum=mu,
        betas=(0.0, 0.0),  # one step: m̂ = g, v̂ = g², so the update is g / (|g| + ε)
        cautious=True,
    )
    grad, table_grad = random_matrix((16, 4), seed=3), random_matrix((5, 3), seed=6)
    before, table_before = weight.detach().clone(), table.detach().clone()
    weight.grad, table.grad = grad.clone(), table_grad.clone()
    optimizer.step()
    update = newton_schulz(grad + mu * grad)  # N1 = G1 + μ M1, M1 = G1
    agree = (update * before >= 0).double()
    assert 0 < agree.mean() < 1  # both kinds of entry are there
    expected = before - lr * decay * agree * before - lr * 2.0 * update
    torch.testing.assert_close(weight.detach(), expected, rtol=1e-13, atol=1e-13)
    adam_update = table_grad / (table_grad.abs() + 1e-8)
    agree = (adam_update * table_before >= 0).double()
    expected = table_before - lr * decay * agree * table_before - lr * adam_update
    torch.testing.assert_close(table.detach(), expected, rtol=1e-12, atol=1e-12)


def test_set_learning_rate_scales_the_muon_group_by_its_ratio():
    optimizer = configure_muon(GPT(tiny_config()), 1e-3, 0.04, 0.95, (0.9, 0.95), 0.1)
    set_learning_rate(optimizer, 5e-4)
    rates = {g["kind"]: g["lr"] for g in optimizer.param_groups}
    assert rates["muon"] == pytest.approx(0.02) and rates["adamw"] == pytest.approx(5e-4)


def train_steps(model, optimizer, steps, seed):
    generator = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        x = torch.randint(0, 37, (2, 16), generator=generator)
        model(x, x)[1].backward()
        optimizer.step()
        optimizer.zero_grad()


@pytest.mark.parametrize("normuon", [False, True])
def test_state_round_trips_through_the_checkpoint_files(tmp_path, normuon):
    """The optimizer files written after three steps, read into a fresh optimizer: the next
    two steps equal the original's bit for bit (with NorMuon's second moments too)."""
    model = GPT(tiny_config())
    optimizer = configure_muon(model, 1e-3, 0.02, 0.95, (0.9, 0.95), 0.1, normuon=normuon)
    train_steps(model, optimizer, 3, seed=0)
    for name, content in optimizer_files(optimizer.state_dict()["state"]).items():
        (tmp_path / name).write_bytes(content)
    copy = GPT(tiny_config())
    copy.load_state_dict(model.state_dict())
    restored = configure_muon(copy, 1e-3, 0.02, 0.95, (0.9, 0.95), 0.1, normuon=normuon)
    load_optimizer_state(restored, tmp_path)
    kinds = {tuple(sorted(restored.state[p])) for g in restored.param_groups for p in g["params"]}
    muon_state = ("momentum_buffer", "second_moment") if normuon else ("momentum_buffer",)
    assert kinds == {muon_state, ("exp_avg", "exp_avg_sq", "step")}
    train_steps(model, optimizer, 2, seed=1)
    train_steps(copy, restored, 2, seed=1)
    for a, b in zip(model.parameters(), copy.parameters(), strict=True):
        assert torch.equal(a, b)


def test_the_optimizer_never_loads_the_compiler():
    """A fresh process that builds the default's optimizer, steps, zeroes its gradients and
    saves and restores its state never imports torch._dynamo (1.8 s on a 2-core CPU): torch's
    wrappers around those methods would, and MuonAdamW takes them unwrapped."""
    script = textwrap.dedent(
        """
        import sys
        import torch
        from light_llm.models.gpt import GPT
        from light_llm.train.muon import configure_muon
        from tests.conftest import tiny_config
        model = GPT(tiny_config())
        optimizer = configure_muon(model, 1e-3, 0.02, 0.95, (0.9, 0.95), 0.1)
        x = torch.randint(0, 37, (2, 16))
        model(x, x)[1].backward()
        optimizer.step()
        optimizer.zero_grad()
        optimizer.load_state_dict(optimizer.state_dict())
        print("torch._dynamo" in sys.modules)
        """
    )
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=root, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "False"


def test_bad_options_are_one_sentence():
    model = GPT(tiny_config())
    with pytest.raises(ConfigError, match="Muon momentum must lie in"):
        configure_muon(model, 1e-3, 0.02, 1.0, (0.9, 0.95), 0.1)
    with pytest.raises(ConfigError, match="learning rates must be positive"):
        configure_muon(model, 1e-3, 0.0, 0.95, (0.9, 0.95), 0.1)
    with pytest.raises(ConfigError, match="weight decay must be >= 0"):
        configure_muon(model, 1e-3, 0.02, 0.95, (0.9, 0.95), -0.1)
    with pytest.raises(ConfigError, match="a tensor that is not 2-D"):
        MuonAdamW([{"params": [model.transformer.ln_f.weight], "kind": "muon"}], lr=0.02)
    with pytest.raises(ConfigError, match="kind must be muon or adamw"):
        MuonAdamW([{"params": list(model.parameters()), "kind": "sgd"}], lr=0.02)
    with pytest.raises(ConfigError, match="unknown Muon scale 'square'; known: keller, aspect"):
        configure_muon(model, 1e-3, 0.02, 0.95, (0.9, 0.95), 0.1, scale="square")
