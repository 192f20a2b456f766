"""Every worked example's numbers against an independent computation in plain NumPy (written
here from the seeds' formulas, not with light-llm's functions), and the seed figures that the
examples flag as different checked against the seeds' printed numbers."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import transformers

from light_llm import explain
from light_llm.tokenizers.bert import packaged_bert_folder

TOL = dict(rtol=1e-5, atol=1e-6)  # attention weights come out of a float32 softmax


def values(name: str) -> dict[str, np.ndarray]:
    return {step.title: np.asarray(step.value, dtype=np.float64) for step in explain.run(name)}


def softmax(x: np.ndarray) -> np.ndarray:
    shifted = np.exp(x - x.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)


def causal(scores: np.ndarray) -> np.ndarray:
    n = scores.shape[-1]
    return np.where(np.tril(np.ones((n, n), dtype=bool)), scores, -np.inf)


# ------------------------------------------------------------------- attention (seed 001)
CAT_Q = np.array([[1.0, 0.2, 0.1], [0.3, 1.5, 0.4], [0.2, 0.5, 1.8]])
CAT_V = np.array([[0.5, 0.2, 0.1, 0.3], [0.8, 0.9, 0.4, 0.2], [0.3, 0.5, 1.2, 0.7]])


def test_cat_sat_matches_numpy():
    got = values("cat-sat")
    scores = CAT_Q @ CAT_Q.T
    scaled = scores / math.sqrt(3)
    gpt = softmax(causal(scaled))
    bert = softmax(scaled)
    np.testing.assert_allclose(got["Scores = Q·K^T"], scores, **TOL)
    np.testing.assert_allclose(got["Scaled scores = Q·K^T / sqrt(d_k)"], scaled, **TOL)
    np.testing.assert_array_equal(
        np.isinf(got["Causal mask (GPT): future positions set to -inf"]),
        np.triu(np.ones((3, 3), dtype=bool), 1),
    )
    np.testing.assert_allclose(got["Attention weights, GPT (causal softmax)"], gpt, **TOL)
    np.testing.assert_allclose(got["Attention weights, BERT (no mask)"], bert, **TOL)
    np.testing.assert_allclose(got["Output = A·V, GPT (every token)"], gpt @ CAT_V, **TOL)
    np.testing.assert_allclose(got["BERT output = A·V (every token)"], bert @ CAT_V, **TOL)
    np.testing.assert_allclose(got['Output for "sat" (GPT)'], (gpt @ CAT_V)[2], **TOL)
    np.testing.assert_allclose(
        got['The seed\'s weights (0.11, 0.29, 0.60) times V, for "sat"'],
        np.array([0.11, 0.29, 0.60]) @ CAT_V,
        **TOL,
    )


def test_multi_head_matches_numpy():
    got = values("multi-head")
    w_o = np.array([[0.5, 0, 0.5, 0], [0, 0.5, 0, 0.5], [0.5, 0, -0.5, 0], [0, 0.5, 0, -0.5]])
    x = CAT_V  # with W^Q = W^K = W^V = I, Q = K = V = X
    heads = []
    for h in range(2):
        part = x[:, 2 * h : 2 * h + 2]
        weights = softmax(causal(part @ part.T / math.sqrt(2)))
        np.testing.assert_allclose(
            got[f"Attention weights of head {h + 1} (causal)"], weights, **TOL
        )
        heads.append(weights @ part)
    concat = np.concatenate(heads, axis=1)
    np.testing.assert_allclose(got["Concat(head_1, head_2)"], concat, **TOL)
    np.testing.assert_allclose(got["Concat · W^O"], concat @ w_o, **TOL)
    np.testing.assert_allclose(got["The attention layer in one call"], concat @ w_o, **TOL)


def test_tiny_attention_forward_and_backward_match_the_hand_derivation():
    got = values("tiny-attention")
    q = np.array([[1.0, 0, 1], [0, 1, 1]])
    k = np.array([[1.0, 1, 0], [1, 0, 1]])
    v = np.array([[2.0, 0, 1], [1, 1, 0]])
    grad_out = np.array([[1.0, 0, 1], [0, 1, 0]])
    a = softmax(q @ k.T / math.sqrt(3))
    np.testing.assert_allclose(got["A = softmax(S)"], a, **TOL)
    np.testing.assert_allclose(got["O = A·V"], a @ v, **TOL)
    np.testing.assert_allclose(got["dL/dV = A^T · dL/dO"], a.T @ grad_out, **TOL)
    grad_a = grad_out @ v.T
    np.testing.assert_allclose(got["dL/dA = dL/dO · V^T"], grad_a, **TOL)
    # the softmax Jacobian diag(a) - a a^T of each row, as a matrix, times that row of dL/dA
    grad_s = np.stack(
        [(np.diag(row) - np.outer(row, row)) @ g for row, g in zip(a, grad_a, strict=True)]
    )
    np.testing.assert_allclose(got["dL/dS = A ⊙ (dL/dA - rowsum(dL/dA ⊙ A))"], grad_s, **TOL)
    np.testing.assert_allclose(grad_s.sum(axis=1), 0.0, atol=1e-12)
    np.testing.assert_allclose(
        got["dL/dQ = dL/dS · K / sqrt(d_k)"], grad_s @ k / math.sqrt(3), **TOL
    )
    np.testing.assert_allclose(
        got["dL/dK = dL/dS^T · Q / sqrt(d_k)"], grad_s.T @ q / math.sqrt(3), **TOL
    )


def test_river_matches_numpy():
    got = values("river")
    emb = np.array(
        [
            [1.0, 0.2, 0.1],
            [0.2, 0.8, 0.1],
            [0.2, 0.1, 0.9],
            [0.9, 1.0, 0.2],
            [0.2, 0.8, 0.1],
            [0.0, 0.9, 0.9],
            [0.3, 0.8, 0.9],
            [0.1, 0.9, 0.8],
            [0.0, 0.3, 0.1],
        ]
    )
    w_q = np.diag([0.0, 15.33, -13.11])
    w_k = np.arange(1, 10).reshape(3, 3) / 10
    w_v = np.arange(7, 16).reshape(3, 3) / 10
    keys, values_ = emb @ w_k, emb @ w_v
    q = emb[5] @ w_q
    raw = keys @ q
    np.testing.assert_allclose(got["Keys K = x W_K"], keys, **TOL)
    np.testing.assert_allclose(got["Values V = x W_V"], values_, **TOL)
    np.testing.assert_allclose(got["Raw scores q_river · k_j"], raw, **TOL)
    unscaled = softmax(raw)
    scaled = softmax(raw / math.sqrt(3))
    np.testing.assert_allclose(
        got["Attention weights without scaling: softmax(q·k)"], unscaled, **TOL
    )
    np.testing.assert_allclose(
        got["Attention weights with scaling: softmax(q·k / sqrt(3))"], scaled, **TOL
    )
    np.testing.assert_allclose(
        got['Output for "river" without scaling: Σ a_j v_j'], unscaled @ values_, **TOL
    )
    np.testing.assert_allclose(got['Output for "river" with scaling'], scaled @ values_, **TOL)
    np.testing.assert_allclose(
        got['The attention layer in one call, row "river"'], scaled @ values_, **TOL
    )
    rounded = softmax(keys @ np.array([0.0, 13.8, -11.8]))
    np.testing.assert_allclose(
        got["Attention weights without scaling, from the seed's rounded query"], rounded, **TOL
    )
    np.testing.assert_allclose(
        got['Output for "river" without scaling, from the seed\'s rounded query'],
        rounded @ values_,
        **TOL,
    )


# ------------------------------------------------------------------- positions
def numpy_sinusoidal(n_positions: int, dim: int, base: float) -> np.ndarray:
    table = np.zeros((n_positions, dim))
    for pos in range(n_positions):
        for i in range(dim // 2):
            table[pos, 2 * i] = math.sin(pos / base ** (2 * i / dim))
            table[pos, 2 * i + 1] = math.cos(pos / base ** (2 * i / dim))
    return table


def test_sinusoidal_robot_and_combined_embeddings():
    got = values("sinusoidal")
    pe = numpy_sinusoidal(4, 4, 100.0)
    emb = np.array(
        [[1.0, 0.5, 0.3, 0.0], [0.9, 0.8, 0.2, 1.0], [0.7, 0.1, 0.4, 0.0], [1.1, 0.4, 0.3, 1.0]]
    )
    np.testing.assert_allclose(got["Positional encodings P (d = 4, n = 100)"], pe, atol=1e-6)
    np.testing.assert_allclose(got["Combined embeddings C = E + P"], emb + pe, atol=1e-6)


def test_sinusoidal_base_10000():
    got = values("sinusoidal-10000")
    pe = numpy_sinusoidal(2, 512, 10000.0)[:, :8]
    np.testing.assert_allclose(
        got["PE for positions 0 and 1, dimensions 0-7 (d = 512, base 10000)"], pe, atol=1e-6
    )


def test_rope_scores_depend_only_on_the_offset():
    got = values("rope")
    q = np.array([1.0, 0.5, -0.5, 2.0])
    k = np.array([0.5, 1.0, 1.5, -1.0])

    def rotate(x, m):  # block-diagonal rotation matrix R_{Θ,m} (seed 002 §8.2)
        out = np.empty(4)
        for i in range(2):
            angle = m * 10000.0 ** (-2 * i / 4)
            rotation = np.array(
                [[math.cos(angle), -math.sin(angle)], [math.sin(angle), math.cos(angle)]]
            )
            out[2 * i : 2 * i + 2] = rotation @ x[2 * i : 2 * i + 2]
        return out

    expected = np.array([[rotate(q, m) @ rotate(k, n) for n in range(6)] for m in range(6)])
    np.testing.assert_allclose(got["Scores q_m · k_n"], expected, atol=1e-5)
    np.testing.assert_allclose(
        got["q rotated to each position m"], [rotate(q, m) for m in range(6)], atol=1e-6
    )
    np.testing.assert_allclose(
        got["|q_m| at each position"], np.full(6, np.linalg.norm(q)), atol=1e-6
    )
    for offset in range(-5, 6):  # every diagonal is one number
        diagonal = np.diagonal(got["Scores q_m · k_n"], offset=offset)
        assert np.ptp(diagonal) < 1e-5


# ------------------------------------------------------------------- layers
def test_layernorm_and_rmsnorm():
    got = values("norms")
    x = np.array([1.0, 3.0, 2.0, 4.0])
    layer_norm = (x - x.mean()) / np.sqrt(((x - x.mean()) ** 2).mean() + 1e-5)
    rms_norm = x / np.sqrt((x**2).mean() + 1e-5)
    np.testing.assert_allclose(
        got["LayerNorm(x) = γ (x - μ) / sqrt(σ² + ε) + β"], layer_norm, rtol=1e-12
    )
    np.testing.assert_allclose(got["RMSNorm(x) = γ x / RMS(x)"], rms_norm, rtol=1e-12)
    assert got["σ = sqrt(σ²)"] == pytest.approx(math.sqrt(1.25))


W1 = np.array(
    [[0.2, 0.1, 0.3, 0.4], [0.5, 0.2, 0.1, 0.3], [0.1, 0.4, 0.2, 0.5], [0.3, 0.1, 0.5, 0.2]]
)
W2 = np.array(
    [[0.1, 0.2, 0.3, 0.1], [0.4, 0.1, 0.2, 0.3], [0.2, 0.3, 0.1, 0.4], [0.3, 0.4, 0.2, 0.1]]
)
X_FFN = np.array([0.5, 0.3, -0.2, 0.8])


def test_relu_ffn():
    got = values("ffn")
    hidden = X_FFN @ W1
    output = np.maximum(hidden, 0) @ W2
    np.testing.assert_allclose(got["h = x W_1 + b_1"], hidden, rtol=1e-12)
    np.testing.assert_allclose(got["output = ReLU(h) W_2 + b_2"], output, rtol=1e-12)
    np.testing.assert_allclose(got["The feed-forward layer in one call"], output, rtol=1e-12)


def test_swiglu():
    got = values("swiglu")
    z = X_FFN @ W1
    gate = z / (1 + np.exp(-z))
    product = gate * (X_FFN @ W2)
    np.testing.assert_allclose(got["Gate: Swish(x W_1) = z σ(z)"], gate, rtol=1e-12)
    np.testing.assert_allclose(got["SwiGLU(x) = Swish(x W_1) ⊙ (x V)"], product, rtol=1e-12)


# ------------------------------------------------------------------- softmax and sampling
def test_softmax_jacobian_logsumexp_temperature():
    got = values("softmax")
    z = np.array([2.0, 1.0, 0.1])
    p = softmax(z)
    np.testing.assert_allclose(got["p = softmax(z)"], p, rtol=1e-12)
    np.testing.assert_allclose(got["Jacobian ∂p_i/∂z_j"], np.diag(p) - np.outer(p, p), atol=1e-12)
    stable = 1002.0 + math.log(math.exp(-2) + math.exp(-1) + 1.0)
    assert got["log Σ e^{z_i} = c + log Σ e^{z_i - c}, c = max z"] == pytest.approx(stable)
    assert got["PyTorch's logsumexp(z)"] == pytest.approx(stable)
    assert math.isinf(got["log Σ e^{z_i} computed naively, z = [1000, 1001, 1002]"])
    np.testing.assert_allclose(
        got["softmax(z / τ) for τ = 0.5, 1, 2"], [softmax(z / t) for t in (0.5, 1.0, 2.0)], **TOL
    )


def numpy_filtered(logits, temperature=1.0, top_k=None, top_p=None) -> np.ndarray:
    """Temperature, then top-k, then top-p (seed 000 §8), renormalised."""
    p = softmax(np.asarray(logits) / temperature)
    keep = np.ones(len(p), dtype=bool)
    if top_k is not None:
        keep &= p >= np.sort(p)[::-1][top_k - 1]
    if top_p is not None:
        q = np.where(keep, p, 0.0)
        q /= q.sum()
        order = np.argsort(-q)
        cumulative = np.cumsum(q[order])
        n_kept = int(np.searchsorted(cumulative, top_p)) + 1  # smallest prefix reaching top_p
        nucleus = np.zeros(len(p), dtype=bool)
        nucleus[order[:n_kept]] = True
        keep &= nucleus
    kept = np.where(keep, p, 0.0)
    return kept / kept.sum()


def test_sampling_filters():
    got = values("sampling")
    logits = [3.0, 2.2, 1.8, 1.0, 0.2, -1.0]
    np.testing.assert_allclose(got["P = softmax(logits), τ = 1"], numpy_filtered(logits), **TOL)
    np.testing.assert_allclose(got["τ = 0.5"], numpy_filtered(logits, 0.5), **TOL)
    np.testing.assert_allclose(got["τ = 2"], numpy_filtered(logits, 2.0), **TOL)
    np.testing.assert_allclose(got["top-k, k = 3"], numpy_filtered(logits, top_k=3), **TOL)
    top_p = numpy_filtered(logits, top_p=0.9)
    np.testing.assert_allclose(got["top-p, p = 0.9"], top_p, **TOL)
    assert (top_p > 0).sum() == 4  # mat, rug and sofa hold 0.89 < 0.9: floor joins
    np.testing.assert_allclose(
        got["τ = 0.7, top-k = 4, top-p = 0.9 together"], numpy_filtered(logits, 0.7, 4, 0.9), **TOL
    )


# ------------------------------------------------------------------- training
def test_adamw_step():
    got = values("adamw")
    theta = np.array([[0.5, -0.3, 0.8], [-0.2, 0.4, 0.1]])
    g = np.array([[0.1, -0.2, 0.3], [0.05, 0.0, -0.4]])
    bias, bias_g = np.array([0.1, -0.1]), np.array([0.2, -0.05])
    lr, beta1, beta2, eps, decay = 0.01, 0.9, 0.95, 1e-8, 0.1

    def adam(param, grad, weight_decay):
        m = (1 - beta1) * grad
        v = (1 - beta2) * grad**2
        m_hat, v_hat = m / (1 - beta1), v / (1 - beta2)
        return param - lr * (m_hat / (np.sqrt(v_hat) + eps) + weight_decay * param), m, v

    new_theta, m, v = adam(theta, g, decay)
    new_bias, _, _ = adam(bias, bias_g, 0.0)
    np.testing.assert_allclose(got["m_1 = β1 m_0 + (1 - β1) g"], m, rtol=1e-12)
    np.testing.assert_allclose(got["v_1 = β2 v_0 + (1 - β2) g²"], v, rtol=1e-12)
    np.testing.assert_allclose(
        got["Weight after: θ - α (m̂/(sqrt(v̂) + ε) + λ θ)"], new_theta, rtol=1e-12
    )
    np.testing.assert_allclose(got["Bias: before, gradient, after"][2], new_bias, rtol=1e-12)


def test_muon_newton_schulz_steps():
    """Each iterate written out from the quintic on Gᵀ (G is tall); the singular values shown
    are G's, each carried through p(σ) = aσ + bσ³ + cσ⁵ k times in its own column (sorted by
    size they change places: p lifts σ2 above σ1 at the first step); X_5 keeps G's singular
    vectors."""
    got = values("muon")
    g = np.array([[2.0, 0.5, 0.1], [1.0, -1.5, 0.05], [0.5, 0.3, -0.2], [-1.0, 0.8, 0.1]])
    x = g.T / (np.linalg.norm(g) + 1e-7)  # ε keeps a zero matrix at zero
    np.testing.assert_allclose(got["X_0 = G / ||G||_F"], x.T, rtol=1e-12)
    sigma = np.linalg.svd(g, compute_uv=False) / (np.linalg.norm(g) + 1e-7)
    for k in range(1, 6):
        a_ = x @ x.T
        x = 3.4445 * x + (-4.7750 * a_ + 2.0315 * a_ @ a_) @ x
        sigma = 3.4445 * sigma - 4.7750 * sigma**3 + 2.0315 * sigma**5
        np.testing.assert_allclose(got[f"X_{k} along G's singular directions"], sigma, rtol=1e-9)
        shown = np.sort(got[f"X_{k} along G's singular directions"])[::-1]  # as a set: X_k's own
        np.testing.assert_allclose(shown, np.linalg.svd(x, compute_uv=False), rtol=1e-9)
    assert (
        got["X_1 along G's singular directions"][1] > got["X_1 along G's singular directions"][0]
    )  # they crossed
    np.testing.assert_allclose(got["X_5: Muon's update direction"], x.T, rtol=1e-10, atol=1e-12)
    u, s, vt = np.linalg.svd(g, full_matrices=False)
    np.testing.assert_allclose(got["Singular values of G"], s, rtol=1e-12)
    np.testing.assert_allclose(got["U Vᵀ from the SVD of G"], u @ vt, rtol=1e-12, atol=1e-12)
    core = got["Uᵀ X_5 V"]
    np.testing.assert_allclose(core, np.diag(np.diag(core)), atol=1e-12)
    assert np.all((np.diag(core) > 0.65) & (np.diag(core) < 1.2))


def numpy_learning_rate(t, max_lr, min_lr, warmup, decay_end, cooldown=None, shape="linear"):
    """Linear warmup (t + 1) / (T_w + 1), cosine from max_lr to min_lr (or with ``cooldown``
    f: max_lr held, then a straight line from (T_d - f (T_d - T_w), max_lr) to (T_d,
    min_lr), or with ``shape`` "sqrt" a fall of sqrt(p) of the way at progress p), then
    min_lr."""
    if t < warmup:
        return max_lr * (t + 1) / (warmup + 1)
    if t > decay_end or decay_end == warmup:
        return min_lr
    if cooldown is not None:
        start = decay_end - cooldown * (decay_end - warmup)
        if shape == "sqrt":
            progress = float(np.interp(t, [start, decay_end], [0.0, 1.0]))
            return max_lr - math.sqrt(progress) * (max_lr - min_lr)
        return float(np.interp(t, [start, decay_end], [max_lr, min_lr]))
    ratio = (t - warmup) / (decay_end - warmup)
    return min_lr + 0.5 * (1 + math.cos(math.pi * ratio)) * (max_lr - min_lr)


def test_lr_schedule_of_the_default_training_run():
    from light_llm.train.config import TrainConfig

    config = TrainConfig().resolve()  # what `light-llm train` with no flags runs
    steps = {step.title: step for step in explain.run("lr-schedule")}
    rates = steps["Learning rate at selected steps"]
    at = [int(label.removeprefix("t=")) for label in rates.columns]
    assert at[0] == 0 and config.warmup_iters in at and config.lr_decay_iters in at
    assert config.lr_schedule == "wsd"  # the default's; the cosine is checked below
    cooldown, shape = config.cooldown_fraction, config.cooldown_shape
    assert shape == "linear"  # the default's; the 1 - sqrt cooldown is checked below
    lengths = (config.warmup_iters, config.lr_decay_iters)
    expected = [
        numpy_learning_rate(t, config.lr, config.min_lr, *lengths, cooldown, shape) for t in at
    ]
    np.testing.assert_allclose(rates.value, expected, rtol=1e-12)
    assert list(steps["Peak and floor: lr_max, lr_min"].value) == [config.lr, config.min_lr]
    peak = at.index(config.warmup_iters)
    assert rates.value[peak] == pytest.approx(config.lr)


def test_lr_schedule_of_a_cosine_run():
    from light_llm.explain.training_examples import ScheduleSettings, lr_schedule
    from light_llm.train.config import TrainConfig

    config = TrainConfig(preset="bpe-cpu").resolve()  # the default before round two: cosine
    settings = ScheduleSettings.from_train_config(config, "bpe-cpu")
    assert settings.cooldown_fraction is None
    steps = {step.title: step for step in lr_schedule(settings)}
    rates = steps["Learning rate at selected steps"]
    at = [int(label.removeprefix("t=")) for label in rates.columns]
    lengths = (config.warmup_iters, config.lr_decay_iters)
    expected = [numpy_learning_rate(t, config.lr, config.min_lr, *lengths) for t in at]
    np.testing.assert_allclose(rates.value, expected, rtol=1e-12)
    assert (
        "cosine decay until T_d"
        in steps["Lengths: warmup_iters T_w, lr_decay_iters T_d, max_iters"].text
    )


def test_lr_schedule_of_a_wsd_run_with_a_sqrt_cooldown():
    from light_llm.explain.training_examples import ScheduleSettings, lr_schedule
    from light_llm.train.config import TrainConfig

    config = TrainConfig(cooldown_shape="sqrt", max_iters=300).resolve()
    settings = ScheduleSettings.from_train_config(config, "a 1 - sqrt cooldown")
    steps = {step.title: step for step in lr_schedule(settings)}
    rates = steps["Learning rate at selected steps"]
    at = [int(label.removeprefix("t=")) for label in rates.columns]
    lengths = (config.warmup_iters, config.lr_decay_iters, config.cooldown_fraction)
    expected = [numpy_learning_rate(t, config.lr, config.min_lr, *lengths, "sqrt") for t in at]
    np.testing.assert_allclose(rates.value, expected, rtol=1e-12)
    lengths_text = steps["Lengths: warmup_iters T_w, lr_decay_iters T_d, max_iters"].text
    assert "a 1 - sqrt cooldown until T_d" in lengths_text
    assert "(the shape gives 1 - sqrt(1/2) = 0.293 at its exact middle)" in rates.text
    halfway = r"At t = (\d+), half way through the cooldown, the rate is lr_min \+ ([\d.]+) "
    for run in (config, TrainConfig(cooldown_shape="sqrt", max_iters=30).resolve()):
        settings = ScheduleSettings.from_train_config(run, "a 1 - sqrt cooldown")
        text = {step.title: step for step in lr_schedule(settings)}[rates.title].text
        middle, share = re.search(halfway, " ".join(text.split())).groups()
        lengths = (run.warmup_iters, run.lr_decay_iters, run.cooldown_fraction)
        rate = numpy_learning_rate(int(middle), run.lr, run.min_lr, *lengths, "sqrt")
        assert float(share) == pytest.approx((rate - run.min_lr) / (run.lr - run.min_lr), abs=5e-4)
    short = ScheduleSettings.from_train_config(TrainConfig(max_iters=20).resolve(), "no decay")
    assert "half way" not in {step.title: step for step in lr_schedule(short)}[rates.title].text


def test_grad_clip_of_norm_50_at_5():
    got = values("grad-clip")
    grads = np.array([[24.0, -18.0], [0.0, 0.0], [0.0, 40.0]])
    norm = np.sqrt((grads**2).sum())
    assert norm == 50.0
    assert got["Global norm ||g||_2 = sqrt(30² + 40²)"] == pytest.approx(norm)
    assert got["Scale factor min(1, c / ||g||), c = 5"] == pytest.approx(5 / 50, rel=1e-6)
    np.testing.assert_allclose(got["Gradients after clipping"], grads * 5 / 50, rtol=1e-6)
    assert got["Global norm after clipping"] == pytest.approx(5.0, rel=1e-6)


# ------------------------------------------------------------------- tokenization
@pytest.fixture(scope="module")
def reference_bert():
    return transformers.BertTokenizerFast.from_pretrained(str(packaged_bert_folder()))


def test_tokenization_matches_transformers(reference_bert):
    steps = explain.run("tokenization")
    got = {step.title: step for step in steps}
    single = reference_bert("I love dogs.", max_length=10, padding="max_length")
    pair = reference_bert("I love dogs.", "Dogs are great.", max_length=14, padding="max_length")
    chess = reference_bert(" I love chess", "I love soccer", max_length=20, padding="max_length")
    for title, reference in [
        ("Padded to 10: ids, attention mask, token type ids", single),
        ('Pair "I love dogs." + "Dogs are great.", padded to 14', pair),
        (
            'encode_plus(" I love chess", "I love soccer", max_length=20, padding="max_length")',
            chess,
        ),
    ]:
        expected = np.array(
            [reference[key] for key in ("input_ids", "attention_mask", "token_type_ids")]
        ).T
        np.testing.assert_array_equal(got[title].value, expected)
        assert list(got[title].rows) == reference_bert.convert_ids_to_tokens(reference["input_ids"])
    assert list(got['WordPiece ids of "I love dogs."'].value) == reference_bert.encode(
        "I love dogs.", add_special_tokens=False
    )


# ------------------------------------------------------------------- the seed's figures
@pytest.mark.parametrize("name", explain.names())
def test_seed_figures_flagged_exactly_where_they_differ(name):
    for step in explain.run(name):
        if step.seed_value is None:
            assert step.seed_differs is None and not step.differs_from_seed
            continue
        seed = np.asarray(step.seed_value, dtype=np.float64)
        exact = np.asarray(step.value, dtype=np.float64)
        printed = ~np.isnan(seed)
        both_infinite = np.isinf(seed) & (seed == exact)
        with np.errstate(invalid="ignore"):
            far = np.abs(seed - exact) > 0.5 * 10.0 ** (-step.seed_decimals) + 1e-9
        expected = printed & far & ~both_infinite
        np.testing.assert_array_equal(step.seed_differs, expected, err_msg=step.title)


# seed, step title, (row, column) or index -> (the seed's printed figure, the exact value)
KNOWN_DIFFERENCES = [
    ("cat-sat", "Scores = Q·K^T", (0, 1), 0.74, 0.64),
    ("cat-sat", "Scores = Q·K^T", (1, 1), 2.66, 2.50),
    ("cat-sat", "Attention weights, GPT (causal softmax)", (2, 2), 0.60, 0.6725),
    ("cat-sat", 'Output for "sat" (GPT)', 1, 0.61, 0.5501),
    ("tiny-attention", "A = softmax(S)", (0, 0), 0.38, 1 / (1 + math.exp(1 / math.sqrt(3)))),
    (
        "sinusoidal-10000",
        "PE for positions 0 and 1, dimensions 0-7 (d = 512, base 10000)",
        (1, 2),
        0.001,
        math.sin(10000 ** (-2 / 512)),
    ),
    ("norms", "RMSNorm(x) = γ x / RMS(x)", 0, 0.36, 1 / math.sqrt(7.5 + 1e-5)),
    (
        "river",
        'Output for "river" without scaling, from the seed\'s rounded query',
        1,
        1.6410,
        None,
    ),
    ("tokenization", 'WordPiece ids of "I love dogs."', 2, 3988, 6077),
]


def test_river_shows_the_key_of_river_the_seed_prints_in_section_19():
    keys = next(s for s in explain.run("river") if s.title == "Keys K = x W_K")
    river = list(keys.rows).index("river")
    x_river = np.array([0.0, 0.9, 0.9])
    w_k = np.arange(1, 10).reshape(3, 3) / 10
    np.testing.assert_allclose(keys.value[river], x_river @ w_k)
    np.testing.assert_array_equal(keys.seed_value[river], [0.99, 1.17, 1.35])
    assert (~np.isnan(keys.seed_value)).all(axis=1).sum() == 4  # [CLS], The, river, flooded


def test_grad_clip_cites_the_section_that_holds_the_norm_50_example():
    steps = {s.title: s for s in explain.run("grad-clip")}
    factor = steps["Scale factor min(1, c / ||g||), c = 5"]
    assert factor.seed.startswith("seed 002 §4.3")
    assert "seed 000 §10, Example" not in " ".join(s.seed for s in steps.values())


@pytest.mark.parametrize("name, title, index, seed_figure, exact", KNOWN_DIFFERENCES)
def test_known_seed_errors_are_flagged(name, title, index, seed_figure, exact):
    step = next(s for s in explain.run(name) if s.title == title)
    assert step.seed_differs[index]
    assert step.seed_value[index] == pytest.approx(seed_figure)
    if exact is not None:
        assert np.asarray(step.value)[index] == pytest.approx(exact, abs=5e-5)


@pytest.mark.parametrize("name", ["sinusoidal", "swiglu", "grad-clip"])
def test_examples_whose_seed_figures_are_all_right(name):
    steps = explain.run(name)
    assert any(step.seed_value is not None for step in steps)
    assert not any(step.differs_from_seed for step in steps)


@pytest.mark.parametrize("name", explain.names())
def test_every_step_has_a_key_of_its_own(name):
    """Pictures and the equations table address a step by its key, so each example's keys
    are there and distinct."""
    keys = [step.key for step in explain.run(name)]
    assert all(keys) and len(set(keys)) == len(keys), keys


def test_value_of_finds_a_step_by_key_and_names_a_missing_one():
    from light_llm.explain.steps import value_of

    steps = explain.run("norms")
    assert np.array_equal(value_of(steps, steps[1].key), np.asarray(steps[1].value))
    with pytest.raises(KeyError, match="no-such-step"):
        value_of(steps, "no-such-step")
