"""The schedule, clipping and AdamW groups against values computed by hand in the test."""

import math

import pytest
import torch

from light_llm.errors import ConfigError
from light_llm.models.gpt import GPT
from light_llm.schedule import learning_rate, muon_momentum
from light_llm.train.optim import clip_grad_norm, configure_adamw, decay_groups
from tests.conftest import tiny_config

MAX_LR, MIN_LR, WARMUP, DECAY = 1e-3, 1e-4, 100, 2000


def lr(step):
    return learning_rate(step, MAX_LR, MIN_LR, WARMUP, DECAY)


def test_warmup_is_linear_from_the_first_step():
    assert lr(0) == pytest.approx(1e-3 / 101, rel=1e-12)
    assert lr(49) == pytest.approx(1e-3 * 50 / 101, rel=1e-12)
    assert lr(99) == pytest.approx(1e-3 * 100 / 101, rel=1e-12)


def test_peak_at_the_end_of_warmup_and_floor_at_the_end_of_decay():
    assert lr(WARMUP) == pytest.approx(MAX_LR, rel=1e-12)
    assert lr(DECAY) == pytest.approx(MIN_LR, rel=1e-12)
    assert lr(DECAY + 1) == MIN_LR
    assert lr(10 * DECAY) == MIN_LR


def test_cosine_halfway_and_at_a_quarter():
    halfway = (WARMUP + DECAY) // 2  # 1050: ratio exactly 0.5, cos(pi/2) = 0
    assert lr(halfway) == pytest.approx((MAX_LR + MIN_LR) / 2, rel=1e-12)
    quarter = WARMUP + (DECAY - WARMUP) // 4  # ratio 0.25: 0.5 (1 + sqrt(2)/2)
    expected = MIN_LR + 0.5 * (1 + math.sqrt(0.5)) * (MAX_LR - MIN_LR)
    assert lr(quarter) == pytest.approx(expected, rel=1e-12)


def test_schedule_decreases_monotonically_after_warmup():
    values = [lr(step) for step in range(WARMUP, DECAY + 1)]
    assert all(a >= b for a, b in zip(values, values[1:], strict=False))


def test_schedule_rejects_decay_before_warmup():
    with pytest.raises(ConfigError):
        learning_rate(0, MAX_LR, MIN_LR, warmup_iters=10, lr_decay_iters=5)


def wsd(step, fraction):
    return learning_rate(step, MAX_LR, MIN_LR, WARMUP, DECAY, cooldown_fraction=fraction)


def test_wsd_holds_the_peak_then_cools_down_linearly_to_the_floor():
    # fraction 0.25 of the 1900 steps after warmup: the cooldown starts at step 1525
    start = DECAY - 0.25 * (DECAY - WARMUP)
    assert start == 1525
    assert wsd(WARMUP - 1, 0.25) == lr(WARMUP - 1)  # the warmup is the cosine's
    for step in (WARMUP, 800, 1525):
        assert wsd(step, 0.25) == MAX_LR
    for step in (1526, 1700, 1999, 2000):  # a straight line from (1525, peak) to (2000, floor)
        expected = MAX_LR + (step - start) * (MIN_LR - MAX_LR) / (DECAY - start)
        assert wsd(step, 0.25) == pytest.approx(expected, rel=1e-12)
    assert wsd(DECAY + 1, 0.25) == MIN_LR


def test_wsd_with_the_whole_run_cooling_down_is_a_linear_decay_from_warmup():
    for step in range(WARMUP, DECAY + 1, 100):
        expected = MAX_LR + (step - WARMUP) / (DECAY - WARMUP) * (MIN_LR - MAX_LR)
        assert wsd(step, 1.0) == pytest.approx(expected, rel=1e-12)


def test_wsd_with_a_sqrt_cooldown_falls_as_one_minus_the_root_of_its_progress():
    """Hägele et al. 2024's cooldown: at progress p through it the rate has fallen by
    sqrt(p) of the way from peak to floor, so a quarter in it is half way down, and the
    rate lies under the straight line everywhere inside the cooldown."""
    start = DECAY - 0.25 * (DECAY - WARMUP)  # 1525, as above

    def sqrt_wsd(step):
        return learning_rate(step, MAX_LR, MIN_LR, WARMUP, DECAY, 0.25, cooldown_shape="sqrt")

    for step in (WARMUP, 800, 1525):
        assert sqrt_wsd(step) == MAX_LR
    quarter = start + (DECAY - start) / 4  # 1643.75: take the steps around it
    for step in (1526, 1643, 1644, 1700, 1999):
        fallen = (MAX_LR - sqrt_wsd(step)) / (MAX_LR - MIN_LR)
        assert fallen**2 == pytest.approx((step - start) / (DECAY - start), rel=1e-12)
        assert sqrt_wsd(step) < wsd(step, 0.25)
    assert sqrt_wsd(1643) > (MAX_LR + MIN_LR) / 2 > sqrt_wsd(1644)
    assert quarter == 1643.75
    assert sqrt_wsd(DECAY) == MIN_LR and sqrt_wsd(DECAY + 1) == MIN_LR
    assert learning_rate(1700, MAX_LR, MIN_LR, WARMUP, DECAY, 0.25, "linear") == wsd(1700, 0.25)


def test_the_cooldown_shape_is_linear_or_sqrt():
    with pytest.raises(ConfigError, match="the cooldown's shape is linear or sqrt, got 'cos'"):
        learning_rate(1700, MAX_LR, MIN_LR, WARMUP, DECAY, 0.25, cooldown_shape="cos")


@pytest.mark.parametrize("fraction", [0.0, -0.5, 1.5, math.nan])
def test_wsd_rejects_a_cooldown_that_is_no_share_of_the_run(fraction):
    with pytest.raises(ConfigError, match="fraction of the steps after warmup"):
        wsd(500, fraction)


def test_muon_momentum_warmup_rises_linearly_from_0_85_then_holds():
    """300 warmup steps to μ = 0.95: 0.85 at step 0, a third of the way (0.01 / 30 steps)
    at step 100, the midpoint at 150, μ from step 300 on; 0 steps: μ from the start."""
    assert muon_momentum(0, 0.95, 300) == 0.85
    assert muon_momentum(100, 0.95, 300) == pytest.approx(0.85 + 0.1 / 3, rel=1e-12)
    assert muon_momentum(150, 0.95, 300) == pytest.approx(0.90, rel=1e-12)
    assert muon_momentum(299, 0.95, 300) == pytest.approx(0.95 - 0.1 / 300, rel=1e-12)
    for step in (300, 301, 10_000):
        assert muon_momentum(step, 0.95, 300) == 0.95
    assert muon_momentum(0, 0.95, 0) == muon_momentum(7, 0.95, 0) == 0.95


def test_muon_momentum_warmup_to_a_lower_momentum_falls_the_same_way():
    assert muon_momentum(0, 0.5, 10) == 0.85
    assert muon_momentum(5, 0.5, 10) == pytest.approx(0.675, rel=1e-12)
    assert muon_momentum(10, 0.5, 10) == 0.5


def test_muon_momentum_warmup_rejects_a_negative_length():
    with pytest.raises(ConfigError, match="momentum warmup must be >= 0 steps, got -1"):
        muon_momentum(0, 0.95, -1)


def make_gradients(scale):
    generator = torch.Generator().manual_seed(0)
    parameters = [torch.nn.Parameter(torch.zeros(shape)) for shape in [(3, 4), (5,), (2, 2, 2)]]
    for parameter in parameters:
        parameter.grad = scale * torch.randn(parameter.shape, generator=generator)
    return parameters


def global_norm(parameters):
    return math.sqrt(sum(float((p.grad.double() ** 2).sum()) for p in parameters))


def test_clipping_bounds_the_global_norm_and_keeps_the_direction():
    parameters = make_gradients(scale=10.0)
    before = [p.grad.clone() for p in parameters]
    norm_by_hand = global_norm(parameters)
    assert norm_by_hand > 1.0
    returned = clip_grad_norm(parameters, max_norm=1.0)
    assert float(returned) == pytest.approx(norm_by_hand, rel=1e-6)
    assert global_norm(parameters) == pytest.approx(1.0, rel=1e-5)
    for old, parameter in zip(before, parameters, strict=True):  # every gradient scaled alike
        torch.testing.assert_close(parameter.grad, old / norm_by_hand, rtol=1e-5, atol=1e-7)


def test_clipping_leaves_small_gradients_alone():
    parameters = make_gradients(scale=0.01)
    before = [p.grad.clone() for p in parameters]
    returned = clip_grad_norm(parameters, max_norm=1.0)
    assert float(returned) == pytest.approx(global_norm(parameters), rel=1e-6)
    for old, parameter in zip(before, parameters, strict=True):
        assert torch.equal(parameter.grad, old)


@pytest.mark.parametrize(
    "overrides", [{}, {"bias": False, "norm": "rmsnorm"}, {"tie_embeddings": False}]
)
def test_decay_goes_to_matrices_and_embeddings_only(overrides):
    model = GPT(tiny_config(**overrides))
    decay, no_decay = decay_groups(model)
    names = {id(p): name for name, p in model.named_parameters()}  # a tied matrix once
    decay_names = {names[id(p)] for p in decay}
    no_decay_names = {names[id(p)] for p in no_decay}
    expected_decay = {
        "transformer.wte.weight",
        "transformer.wpe.weight",
        *(f"transformer.h.{i}.attn.{m}.weight" for i in range(2) for m in ("c_attn", "c_proj")),
        *(f"transformer.h.{i}.mlp.{m}.weight" for i in range(2) for m in ("c_fc", "c_proj")),
    }
    if not model.config.tie_embeddings:
        expected_decay.add("lm_head.weight")
    assert decay_names == expected_decay
    assert no_decay_names == set(names.values()) - expected_decay
    assert all(name.endswith(".bias") or "ln_" in name for name in no_decay_names)
    assert len(decay) + len(no_decay) == len(list(model.parameters()))


def test_configure_adamw_groups_and_hyperparameters():
    model = GPT(tiny_config())
    optimizer = configure_adamw(model, 0.1, 3e-4, (0.9, 0.95), "cpu")
    assert isinstance(optimizer, torch.optim.AdamW)
    decay_group, no_decay_group = optimizer.param_groups
    assert decay_group["weight_decay"] == 0.1 and no_decay_group["weight_decay"] == 0.0
    assert decay_group["betas"] == (0.9, 0.95) and decay_group["lr"] == 3e-4
    assert all(p.dim() >= 2 for p in decay_group["params"])
    assert all(p.dim() < 2 for p in no_decay_group["params"])
    assert decay_group["fused"]  # PyTorch's fused kernel, on the CPU too


def test_adamw_step_matches_the_seed_formula():
    """One step of configure_adamw's optimizer against seed 000 §7 written out by hand."""
    model = torch.nn.Linear(3, 2)
    with torch.no_grad():
        model.weight.copy_(torch.tensor([[0.5, -1.0, 2.0], [0.1, 0.2, -0.3]]))
    theta0 = model.weight.detach().clone()
    grad = torch.tensor([[0.3, -0.2, 0.1], [1.0, 0.0, -0.5]])
    model.weight.grad = grad.clone()
    model.bias.grad = torch.zeros(2)
    lr_, wd, (b1, b2), eps = 0.01, 0.1, (0.9, 0.95), 1e-8
    configure_adamw(model, wd, lr_, (b1, b2), "cpu").step()
    m_hat = (1 - b1) * grad / (1 - b1)
    v_hat = (1 - b2) * grad**2 / (1 - b2)
    expected = theta0 - lr_ * (m_hat / (v_hat.sqrt() + eps) + wd * theta0)
    torch.testing.assert_close(model.weight.detach(), expected, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("optimizer", ["adamw", "muon"])
def test_embedding_tables_step_at_their_own_rate(optimizer):
    """With --embedding-lr E the token and position tables make Adam's first step at rate
    E·s (s the schedule's factor) while the head and gains keep lr·s; the decay per step
    stays lr·s·λ. Adam's first step is (m̂ / (sqrt(v̂) + ε)) = g / (|g| + ε) = sign(g)."""
    from light_llm.train.muon import configure_muon
    from light_llm.train.optim import set_learning_rate

    config = tiny_config(positions="learned", tie_embeddings=False)
    model = GPT(config).double()
    lr, embedding_lr, decay, scale = 1e-3, 0.05, 0.1, 0.5
    if optimizer == "adamw":
        opt = configure_adamw(model, decay, lr, (0.9, 0.95), "cpu", embedding_lr=embedding_lr)
    else:
        opt = configure_muon(model, lr, 0.02, 0.95, (0.9, 0.95), decay, embedding_lr)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    generator = torch.Generator().manual_seed(0)
    for parameter in model.parameters():
        parameter.grad = torch.randn(parameter.shape, generator=generator, dtype=torch.float64)
    set_learning_rate(opt, lr * scale)
    opt.step()
    for name in ("transformer.wte.weight", "transformer.wpe.weight", "lm_head.weight"):
        rate = (embedding_lr if "wte" in name or "wpe" in name else lr) * scale
        parameter = dict(model.named_parameters())[name]
        g = parameter.grad
        expected = before[name] * (1 - lr * scale * decay) - rate * g / (g.abs() + 1e-8)
        torch.testing.assert_close(parameter.detach(), expected, rtol=0, atol=1e-15)
