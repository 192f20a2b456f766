"""Each layer against its formula computed independently (NumPy, float64, loops)."""

import math

import numpy as np
import torch

from light_llm.nn.attention import (
    SelfAttention,
    attention_explicit,
    attention_fast,
    attention_mask,
    causal_linear_attention,
    fused_attention_dtype,
)
from light_llm.nn.feedforward import SwiGLU, activation_fn
from light_llm.nn.norms import LayerNorm, RMSNorm
from light_llm.nn.positions import apply_rotary, rope_angles, sinusoidal_table
from light_llm.nn.softcap import soft_cap
from light_llm.reference.norms import rms_normalize_forward
from light_llm.reference.positions import rotary_forward
from tests.conftest import tiny_config


def test_sinusoidal_table_matches_the_formula_elementwise():
    for base, dim in ((10000.0, 8), (100.0, 4)):
        table = sinusoidal_table(6, dim, base).numpy()
        for pos in range(6):
            for i in range(dim // 2):
                angle = pos / base ** (2 * i / dim)
                assert abs(table[pos, 2 * i] - math.sin(angle)) < 1e-6
                assert abs(table[pos, 2 * i + 1] - math.cos(angle)) < 1e-6


def test_rope_is_a_pairwise_rotation_and_depends_only_on_the_offset():
    hs = 8
    q, k = torch.randn(1, 1, 1, hs), torch.randn(1, 1, 1, hs)

    def rotate(x, m):
        cos, sin = rope_angles(torch.tensor([m]), hs)
        return apply_rotary(x, cos, sin)

    # pair (0, 1) rotated by angle m * θ_0 = m
    r = rotate(q, 3)[0, 0, 0].numpy()
    x0, x1 = q[0, 0, 0, 0].item(), q[0, 0, 0, 1].item()
    assert abs(r[0] - (x0 * math.cos(3) - x1 * math.sin(3))) < 1e-5
    assert abs(r[1] - (x0 * math.sin(3) + x1 * math.cos(3))) < 1e-5
    dots = [(rotate(q, m + 4) * rotate(k, m)).sum().item() for m in range(5)]
    assert max(dots) - min(dots) < 1e-4
    assert abs(rotate(q, 7).norm().item() - q.norm().item()) < 1e-5


def test_rope_under_torch_compile_takes_the_real_path_and_agrees():
    """Compiled code rotates the pairs without complex numbers; both paths give one result
    (forward, in float32 and for bfloat16 inputs; gradient in float32, where bfloat16 would
    only compare where each path rounds)."""
    for dtype in (torch.float32, torch.bfloat16):
        x = torch.randn(2, 3, 5, 8).to(dtype).requires_grad_()
        cos, sin = rope_angles(torch.arange(5), 8)
        eager = apply_rotary(x, cos, sin)
        (eager_grad,) = torch.autograd.grad(eager.float().pow(2).sum(), x)
        torch._dynamo.reset()
        compiled_fn = torch.compile(apply_rotary, backend="eager", fullgraph=True)
        compiled = compiled_fn(x, cos, sin)
        (compiled_grad,) = torch.autograd.grad(compiled.float().pow(2).sum(), x)
        assert compiled.dtype == eager.dtype == dtype
        torch.testing.assert_close(compiled, eager, rtol=0, atol=1e-6)
        if dtype == torch.float32:
            torch.testing.assert_close(compiled_grad, eager_grad, rtol=0, atol=1e-5)


def test_layernorm_and_rmsnorm_match_the_formulas():
    x = torch.randn(3, 5, 16, dtype=torch.float64)
    ln = LayerNorm(16).double()
    with torch.no_grad():
        ln.weight.uniform_(0.5, 1.5)
        ln.bias.uniform_(-0.5, 0.5)
    xn = x.numpy()
    mu = xn.mean(-1, keepdims=True)
    var = ((xn - mu) ** 2).mean(-1, keepdims=True)
    expected = (
        ln.weight.detach().numpy() * (xn - mu) / np.sqrt(var + 1e-5) + ln.bias.detach().numpy()
    )
    np.testing.assert_allclose(ln(x).detach().numpy(), expected, rtol=1e-10, atol=1e-12)
    rms = RMSNorm(16).double()
    expected = xn / np.sqrt((xn**2).mean(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(rms(x).detach().numpy(), expected, rtol=1e-10, atol=1e-12)


def test_activations_match_their_formulas():
    x = torch.linspace(-4, 4, 101, dtype=torch.float64)
    xn = x.numpy()
    erf = np.vectorize(math.erf)
    np.testing.assert_allclose(
        activation_fn("gelu", x).numpy(), xn * 0.5 * (1 + erf(xn / math.sqrt(2))), atol=1e-12
    )
    tanh_gelu = 0.5 * xn * (1 + np.tanh(math.sqrt(2 / math.pi) * (xn + 0.044715 * xn**3)))
    np.testing.assert_allclose(activation_fn("gelu_tanh", x).numpy(), tanh_gelu, atol=1e-12)
    np.testing.assert_allclose(activation_fn("relu", x).numpy(), np.maximum(xn, 0))
    np.testing.assert_allclose(activation_fn("relu2", x).numpy(), np.maximum(xn, 0) ** 2)


def test_relu_squared_backward_is_twice_the_relu():
    """The hand-written backward of ReLU² against autograd of relu(x)·relu(x) and finite
    differences (points kept away from the kink at 0)."""
    x = torch.randn(3, 5, 7, dtype=torch.float64)
    x = (x + 0.1 * x.sign()).requires_grad_()
    grad_output = torch.randn(3, 5, 7, dtype=torch.float64)
    (by_hand,) = torch.autograd.grad(activation_fn("relu2", x), x, grad_output)
    (by_autograd,) = torch.autograd.grad(torch.relu(x) * torch.relu(x), x, grad_output)
    torch.testing.assert_close(by_hand, by_autograd, rtol=0, atol=1e-15)
    assert torch.autograd.gradcheck(lambda t: activation_fn("relu2", t), (x,))


def test_soft_cap_is_c_tanh_and_its_backward_is_one_minus_tanh_squared():
    """The sigmoid form against c·tanh(z/c) and autograd of it, and finite differences."""
    z = torch.linspace(-80.0, 80.0, 641, dtype=torch.float64).requires_grad_()
    grad_output = torch.randn(641, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    (by_hand,) = torch.autograd.grad(soft_cap(z, 15.0), z, grad_output)
    (by_autograd,) = torch.autograd.grad(15.0 * torch.tanh(z / 15.0), z, grad_output)
    torch.testing.assert_close(soft_cap(z, 15.0), 15.0 * torch.tanh(z / 15.0))
    torch.testing.assert_close(by_hand, by_autograd)
    assert soft_cap(z, 15.0).abs().max() < 15.0
    assert torch.autograd.gradcheck(
        lambda t: soft_cap(t, 3.0), (z[::40].detach().requires_grad_(),)
    )


def test_swiglu_matches_its_formula():
    config = tiny_config(activation="swiglu", bias=False)
    ffn = SwiGLU(config).double()
    x = torch.randn(2, 3, 16, dtype=torch.float64)
    w1, v, w2 = (m.weight.detach().numpy() for m in (ffn.c_fc, ffn.c_v, ffn.c_proj))
    xn = x.numpy()
    gate = xn @ w1.T
    expected = (gate / (1 + np.exp(-gate)) * (xn @ v.T)) @ w2.T
    np.testing.assert_allclose(ffn(x).detach().numpy(), expected, rtol=1e-10, atol=1e-12)


def test_explicit_attention_matches_a_loop_over_positions():
    q, k, v = (torch.randn(1, 2, 5, 4, dtype=torch.float64) for _ in range(3))
    allowed = attention_mask(5, 5, 0, True, None, q.device)
    y, weights = attention_explicit(q, k, v, allowed)
    qn, kn, vn = q.numpy(), k.numpy(), v.numpy()
    for h in range(2):
        for i in range(5):
            scores = np.array([qn[0, h, i] @ kn[0, h, j] / 2.0 for j in range(i + 1)])
            p = np.exp(scores - scores.max())
            p /= p.sum()
            np.testing.assert_allclose(weights[0, h, i, : i + 1].numpy(), p, rtol=1e-12)
            np.testing.assert_allclose(y[0, h, i].numpy(), p @ vn[0, h, : i + 1], rtol=1e-10)


def test_fused_attention_in_float32_under_bfloat16_autocast_keeps_float32():
    """The trainer's attention on a bfloat16 CPU (light_llm.train.precision.attention_kernels):
    the fused kernel in float32 inside autocast agrees with the explicit formula as closely
    as float32 does outside it, and its gradient flows back to bfloat16 inputs."""
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 3, 8, 4, dtype=torch.float64) for _ in range(3))
    allowed = attention_mask(8, 8, 0, True, None, q.device)
    reference, _ = attention_explicit(q, k, v, allowed)
    inputs = [t.to(torch.bfloat16).requires_grad_() for t in (q, k, v)]
    with torch.autocast("cpu", dtype=torch.bfloat16), fused_attention_dtype(torch.float32):
        out = attention_fast(*inputs, None, True)
    assert out.dtype == torch.float32
    exact_inputs = [t.to(torch.bfloat16).double() for t in (q, k, v)]
    expected, _ = attention_explicit(*exact_inputs, allowed)
    assert torch.allclose(out.double(), expected, atol=1e-5)
    assert not torch.allclose(out.double(), reference, atol=1e-5)  # inputs were rounded
    out.sum().backward()
    assert all(t.grad is not None and t.grad.dtype == torch.bfloat16 for t in inputs)


def test_qk_norm_and_rope_under_bfloat16_autocast_round_q_and_k_only_once():
    """Under bfloat16 autocast with attention in float32 (the trainer on a bfloat16 CPU), Q and
    K are QK-norm and RoPE of the bfloat16 projection computed in float32 (NumPy's formulas in
    float64 here), not rounded to bfloat16 after the norm and after the rotation; a bfloat16
    model outside autocast gets them in bfloat16, the format its KV cache holds."""
    torch.manual_seed(0)
    config = tiny_config(positions="rotary", norm="rmsnorm", qk_norm=True, bias=False)
    attention = SelfAttention(config)
    x = torch.randn(2, 8, config.n_embd)
    cos, sin = rope_angles(torch.arange(8), config.head_dim)
    with torch.autocast("cpu", dtype=torch.bfloat16), fused_attention_dtype(torch.float32):
        q, k, _ = attention.queries_keys_values(x, (cos, sin))
        projection = attention.c_attn(x)  # (B, T, 3 d) in bfloat16, as the method read it
    assert q.dtype == k.dtype == torch.float32
    heads = projection.detach().double().numpy().reshape(2, 8, 3, config.n_head, config.head_dim)
    for got, which in ((q, 0), (k, 1)):
        normed, _ = rms_normalize_forward(heads[:, :, which].transpose(0, 2, 1, 3), 1e-5)
        expected, _ = rotary_forward(normed, cos.double().numpy(), sin.double().numpy())
        np.testing.assert_allclose(got.detach().double().numpy(), expected, atol=2e-6)
    plain = SelfAttention(config).to(torch.bfloat16)
    q, k, v = plain.queries_keys_values(x.to(torch.bfloat16), (cos, sin))
    assert q.dtype == k.dtype == v.dtype == torch.bfloat16


def test_causal_linear_attention_matches_running_sums():
    q, k, v = (torch.randn(2, 3, 7, 4, dtype=torch.float64) for _ in range(3))
    y = causal_linear_attention(q, k, v, None, None).numpy()

    def phi(x):
        return np.where(x > 0, x + 1, np.exp(x))

    qn, kn, vn = q.numpy(), k.numpy(), v.numpy()
    for b in range(2):
        for h in range(3):
            s = np.zeros((4, 4))
            z = np.zeros(4)
            for i in range(7):
                s += np.outer(phi(kn[b, h, i]), vn[b, h, i])
                z += phi(kn[b, h, i])
                fq = phi(qn[b, h, i])
                np.testing.assert_allclose(y[b, h, i], fq @ s / (fq @ z), rtol=1e-10)


def test_position_tables_are_exact_after_a_dtype_change():
    from light_llm.models.gpt import GPT

    for positions in ("sinusoidal", "rotary"):
        model = GPT(tiny_config(positions=positions)).double()
        if positions == "sinusoidal":
            table = model.transformer.wpe.table
            assert table.dtype == torch.float64
            assert abs(table[3, 2].item() - math.sin(3 / 10000 ** (2 / 16))) < 1e-15
        else:
            assert model.rope.cos.dtype == torch.float64
            assert abs(model.rope.sin[5, 1].item() - math.sin(5 * 10000 ** (-2 / 8))) < 1e-15
        idx = torch.randint(0, 37, (1, 6))
        logits, loss = model(idx, idx)
        assert logits.dtype == torch.float64 and loss.dtype == torch.float64
