"""Every NumPy operation against PyTorch autograd on the same inputs: outputs and all input
gradients within 1e-10 (relative) in float64 and 1e-5 in float32, on random sizes."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from light_llm.nn.attention import causal_linear_attention
from light_llm.nn.positions import apply_rotary
from light_llm.nn.positions import rope_angles as torch_rope_angles
from light_llm.nn.positions import sinusoidal_table as torch_sinusoidal_table
from light_llm.reference import (
    activations,
    attention,
    dropout,
    embedding,
    linear,
    linear_attention,
    loss,
    norms,
    positions,
    softcap,
    softmax,
)

TOLERANCE = {np.float64: 1e-10, np.float32: 1e-5}
DTYPES = [np.float64, np.float32]
SEEDS = range(3)


def rel(a, b) -> float:
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    return float(np.abs(a - b).max() / max(np.abs(a).max() + np.abs(b).max(), 1e-300))


def leaf(x: np.ndarray) -> torch.Tensor:
    return torch.tensor(x, requires_grad=True)


def check(ours, theirs, dtype, what=""):
    assert (
        rel(ours, theirs.detach().numpy() if torch.is_tensor(theirs) else theirs)
        <= TOLERANCE[dtype]
    ), what


def torch_backward(out: torch.Tensor, upstream: np.ndarray) -> None:
    out.backward(torch.from_numpy(upstream))


def random_sizes(seed, *ranges):
    rng = np.random.default_rng(seed + 100)
    return [int(rng.integers(lo, hi + 1)) for lo, hi in ranges]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_linear(seed, dtype):
    B, T, n_in, n_out = random_sizes(seed, (1, 4), (1, 9), (2, 17), (2, 17))
    rng = np.random.default_rng(seed)
    shapes = ((B, T, n_in), (n_out, n_in), (n_out,))
    x, w, b = (rng.standard_normal(s).astype(dtype) for s in shapes)
    g = rng.standard_normal((B, T, n_out)).astype(dtype)
    out, cache = linear.linear_forward(x, w, b)
    dx, dw, db = linear.linear_backward(g, cache)
    tx, tw, tb = leaf(x), leaf(w), leaf(b)
    tout = F.linear(tx, tw, tb)
    torch_backward(tout, g)
    check(out, tout, dtype)
    check(dx, tx.grad, dtype)
    check(dw, tw.grad, dtype)
    check(db, tb.grad, dtype)
    assert out.dtype == dtype and dw.dtype == dtype


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_embedding(seed, dtype):
    V, d, B, T = random_sizes(seed, (2, 20), (1, 8), (1, 4), (1, 9))
    rng = np.random.default_rng(seed)
    weight = rng.standard_normal((V, d)).astype(dtype)
    idx = rng.integers(0, V, (B, T))
    g = rng.standard_normal((B, T, d)).astype(dtype)
    out, cache = embedding.embedding_forward(idx, weight)
    dweight = embedding.embedding_backward(g, cache)
    tw = leaf(weight)
    tout = F.embedding(torch.from_numpy(idx), tw)
    torch_backward(tout, g)
    check(out, tout, dtype)
    check(dweight, tw.grad, dtype)


@pytest.mark.parametrize("with_bias", [True, False])
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_layernorm(seed, dtype, with_bias):
    B, T, d = random_sizes(seed, (1, 4), (1, 9), (3, 33))
    rng = np.random.default_rng(seed)
    x = (3 * rng.standard_normal((B, T, d)) + 1).astype(dtype)
    w, b = (rng.standard_normal(d).astype(dtype) for _ in range(2))
    g = rng.standard_normal((B, T, d)).astype(dtype)
    out, cache = norms.layernorm_forward(x, w, b if with_bias else None, 1e-5)
    dx, dw, db = norms.layernorm_backward(g, cache)
    tx, tw, tb = leaf(x), leaf(w), leaf(b)
    tout = F.layer_norm(tx, (d,), tw, tb if with_bias else None, 1e-5)
    torch_backward(tout, g)
    check(out, tout, dtype)
    check(dx, tx.grad, dtype)
    check(dw, tw.grad, dtype)
    if with_bias:
        check(db, tb.grad, dtype)
    else:
        assert db is None


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_rmsnorm(seed, dtype):
    B, T, d = random_sizes(seed, (1, 4), (1, 9), (2, 33))
    rng = np.random.default_rng(seed)
    x = (3 * rng.standard_normal((B, T, d)) + 1).astype(dtype)
    w = rng.standard_normal(d).astype(dtype)
    g = rng.standard_normal((B, T, d)).astype(dtype)
    out, cache = norms.rmsnorm_forward(x, w, 1e-5)
    dx, dw = norms.rmsnorm_backward(g, cache)
    tx, tw = leaf(x), leaf(w)
    tout = F.rms_norm(tx, (d,), tw, 1e-5)
    torch_backward(tout, g)
    check(out, tout, dtype)
    check(dx, tx.grad, dtype)
    check(dw, tw.grad, dtype)


ELEMENTWISE = {
    "gelu": (activations.gelu_forward, activations.gelu_backward, F.gelu),
    "gelu_tanh": (
        activations.gelu_tanh_forward,
        activations.gelu_tanh_backward,
        lambda t: F.gelu(t, approximate="tanh"),
    ),
    "relu": (activations.relu_forward, activations.relu_backward, F.relu),
    "relu2": (activations.relu2_forward, activations.relu2_backward, lambda t: F.relu(t) ** 2),
    "softcap": (
        lambda z: softcap.softcap_forward(z, 3.0),
        softcap.softcap_backward,
        lambda t: 3.0 * torch.tanh(t / 3.0),
    ),
    "rms_normalize": (  # QK-norm: RMSNorm without its gain
        norms.rms_normalize_forward,
        norms.rms_normalize_backward,
        lambda t: F.rms_norm(t, (t.shape[-1],), None, 1e-5),
    ),
    "softmax": (softmax.softmax_forward, softmax.softmax_backward, lambda t: t.softmax(-1)),
    "log_softmax": (
        softmax.log_softmax_forward,
        softmax.log_softmax_backward,
        lambda t: t.log_softmax(-1),
    ),
}


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(ELEMENTWISE))
def test_elementwise_and_softmax(name, seed, dtype):
    forward, backward, reference = ELEMENTWISE[name]
    shape = random_sizes(seed, (1, 4), (1, 9), (2, 40))
    rng = np.random.default_rng(seed)
    x = (4 * rng.standard_normal(shape)).astype(dtype)  # wide range: both GELU tails
    g = rng.standard_normal(shape).astype(dtype)
    out, cache = forward(x)
    dx = backward(g, cache)
    tx = leaf(x)
    tout = reference(tx)
    torch_backward(tout, g)
    check(out, tout, dtype, name)
    check(dx, tx.grad, dtype, name)
    assert out.dtype == dtype and dx.dtype == dtype


def test_softmax_backward_is_the_jacobian_transpose_product():
    """s ⊙ (g - g·s) equals J^T g with J = diag(s) - s s^T built explicitly (App. B.1)."""
    rng = np.random.default_rng(0)
    z, g = rng.standard_normal(6), rng.standard_normal(6)
    s, cache = softmax.softmax_forward(z)
    jacobian = np.diag(s) - np.outer(s, s)
    assert rel(softmax.softmax_backward(g, cache), jacobian.T @ g) < 1e-14


def test_log_softmax_survives_huge_logits():
    """The log-sum-exp trick (seed 002 §4.4): no overflow at logits of 1e4."""
    z = np.array([[1e4, 1e4 - 1.0, -1e4]])
    out, _ = softmax.log_softmax_forward(z)
    expected = torch.log_softmax(torch.from_numpy(z), -1).numpy()
    assert np.all(np.isfinite(out)) and rel(out, expected) < 1e-14


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_swiglu(seed, dtype):
    shape = random_sizes(seed, (1, 4), (1, 9), (1, 40))
    rng = np.random.default_rng(seed)
    gate = (3 * rng.standard_normal(shape)).astype(dtype)
    value = rng.standard_normal(shape).astype(dtype)
    g = rng.standard_normal(shape).astype(dtype)
    out, cache = activations.swiglu_forward(gate, value)
    dgate, dvalue = activations.swiglu_backward(g, cache)
    tg, tv = leaf(gate), leaf(value)
    tout = F.silu(tg) * tv
    torch_backward(tout, g)
    check(out, tout, dtype)
    check(dgate, tg.grad, dtype)
    check(dvalue, tv.grad, dtype)


@pytest.mark.parametrize("mask", ["none", "causal", "causal+padding", "padding"])
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_attention(mask, seed, dtype):
    B, nh, T, hs = random_sizes(seed, (1, 3), (1, 4), (2, 9), (1, 8))
    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal((B, nh, T, hs)).astype(dtype) for _ in range(3))
    g = rng.standard_normal((B, nh, T, hs)).astype(dtype)
    key_padding = None
    if "padding" in mask:
        key_padding = np.arange(T)[None, :] >= rng.integers(0, T - 1, size=B)[:, None]
    allowed = attention.attention_mask(T, T, 0, "causal" in mask, key_padding)
    out, cache = attention.attention_forward(q, k, v, allowed)
    dq, dk, dv = attention.attention_backward(g, cache)
    tq, tk, tv = leaf(q), leaf(k), leaf(v)
    tmask = None
    if allowed is not None:
        tmask = torch.from_numpy(np.broadcast_to(allowed, (B, 1, T, T)).copy())
    tout = F.scaled_dot_product_attention(tq, tk, tv, attn_mask=tmask)
    torch_backward(tout, g)
    check(out, tout, dtype)
    for ours, theirs in ((dq, tq), (dk, tk), (dv, tv)):
        check(ours, theirs.grad, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_attention_with_dropout(dtype):
    """Attention dropout on A (seed 002 §12.1, eq. 49): torch given the same kept mask."""
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((2, 3, 6, 4)).astype(dtype) for _ in range(3))
    g = rng.standard_normal((2, 3, 6, 4)).astype(dtype)
    allowed = attention.attention_mask(6, 6, 0, True, None)
    out, cache = attention.attention_forward(q, k, v, allowed, 0.3, np.random.default_rng(1))
    dq, dk, dv = attention.attention_backward(g, cache)
    scaled_mask = cache[5]  # the dropout cache: kept entries scaled by 1/(1-p)
    assert set(np.unique(scaled_mask)) <= {0.0, np.float32(1 / 0.7), 1 / 0.7}
    tq, tk, tv = leaf(q), leaf(k), leaf(v)
    scores = (tq @ tk.transpose(-1, -2)) / math.sqrt(4)
    scores = scores.masked_fill(~torch.from_numpy(allowed), float("-inf"))
    tout = (scores.softmax(-1) * torch.from_numpy(scaled_mask)) @ tv
    torch_backward(tout, g)
    check(out, tout, dtype)
    for ours, theirs in ((dq, tq), (dk, tk), (dv, tv)):
        check(ours, theirs.grad, dtype)


def test_split_and_merge_heads_match_torch_view_transpose():
    x = np.random.default_rng(0).standard_normal((2, 5, 12))
    heads = attention.split_heads(x, 3)
    expected = torch.from_numpy(x).view(2, 5, 3, 4).transpose(1, 2).numpy()
    assert np.array_equal(heads, expected)
    assert np.array_equal(attention.merge_heads(heads), x)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_rotary_against_the_torch_engine(seed, dtype):
    B, nh, T, pairs, offset = random_sizes(seed, (1, 3), (1, 4), (1, 9), (1, 6), (0, 20))
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((B, nh, T, 2 * pairs)).astype(dtype)
    g = rng.standard_normal(x.shape).astype(dtype)
    cos, sin = positions.rope_angles(np.arange(offset, offset + T), 2 * pairs, 10000.0, dtype)
    out, cache = positions.rotary_forward(x, cos, sin)
    dx = positions.rotary_backward(g, cache)
    tx = leaf(x)
    tout = apply_rotary(tx, torch.from_numpy(cos), torch.from_numpy(sin))
    torch_backward(tout, g)
    check(out, tout, dtype)
    check(dx, tx.grad, dtype)


def test_position_tables_match_the_torch_engine():
    """The tables are computed in float64 in both engines; the PyTorch engine keeps float32."""
    ours = positions.sinusoidal_table(50, 16, 100.0, np.float32)
    assert np.array_equal(ours, torch_sinusoidal_table(50, 16, 100.0).numpy())
    cos, sin = positions.rope_angles(np.arange(40), 8, 10000.0, np.float32)
    tcos, tsin = torch_rope_angles(torch.arange(40), 8, 10000.0)
    assert np.array_equal(cos, tcos.numpy()) and np.array_equal(sin, tsin.numpy())
    # the seed's example values (seed 001 "Sinusoidal Position Encoding", d_model = 512)
    table = positions.sinusoidal_table(2, 512)
    assert np.allclose(table[0, :4], [0.0, 1.0, 0.0, 1.0])
    assert np.allclose(table[1, :2], [math.sin(1), math.cos(1)])


@pytest.mark.parametrize("dtype", DTYPES)
def test_dropout_against_torch_with_the_same_mask(dtype):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 50)).astype(dtype)
    g = rng.standard_normal((4, 50)).astype(dtype)
    out, cache = dropout.dropout_forward(x, 0.4, np.random.default_rng(3))
    dx = dropout.dropout_backward(g, cache)
    kept = cache != 0
    assert abs((1 - kept.mean()) - 0.4) < 0.1  # about p of the 200 entries dropped
    tx = leaf(x)
    tout = tx * torch.from_numpy(kept.astype(dtype)) / (1 - 0.4)
    torch_backward(tout, g)
    check(out, tout, dtype)
    check(dx, tx.grad, dtype)
    same, none = dropout.dropout_forward(x, 0.0, None)
    assert same is x and none is None


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_cross_entropy(seed, dtype, smoothing):
    B, T, V = random_sizes(seed, (1, 4), (2, 9), (2, 70))
    rng = np.random.default_rng(seed)
    logits = (3 * rng.standard_normal((B, T, V))).astype(dtype)
    targets = rng.integers(0, V, (B, T))
    targets[0, 1] = -1
    value, cache = loss.cross_entropy_forward(logits, targets, -1, smoothing)
    dlogits = loss.cross_entropy_backward(cache)
    tl = leaf(logits)
    tloss = F.cross_entropy(
        tl.reshape(-1, V),
        torch.from_numpy(targets).reshape(-1),
        ignore_index=-1,
        label_smoothing=smoothing,
    )
    tloss.backward()
    check(value, tloss, dtype)
    check(dlogits, tl.grad, dtype)


@pytest.mark.parametrize("padded", [False, True])
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_linear_attention_against_the_torch_engine(seed, dtype, padded):
    B, nh, T, hs = random_sizes(seed, (1, 3), (1, 3), (2, 9), (2, 8))
    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal((B, nh, T, hs)).astype(dtype) for _ in range(3))
    g = rng.standard_normal(q.shape).astype(dtype)
    key_padding = None
    if padded:
        key_padding = np.arange(T)[None, :] >= rng.integers(0, T - 1, size=B)[:, None]
    out, cache = linear_attention.causal_linear_attention_forward(q, k, v, key_padding)
    dq, dk, dv = linear_attention.causal_linear_attention_backward(g, cache)
    tq, tk, tv = leaf(q), leaf(k), leaf(v)
    tpad = None if key_padding is None else torch.from_numpy(key_padding)
    tout = causal_linear_attention(tq, tk, tv, tpad, None)
    torch_backward(tout, g)
    check(out, tout, dtype)
    for ours, theirs in ((dq, tq), (dk, tk), (dv, tv)):
        check(ours, theirs.grad, dtype)


def test_linear_attention_state_carries_the_prefix():
    """Running the sequence in chunks with the state equals one pass (seed 002 §11.3)."""
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((2, 2, 9, 4)) for _ in range(3))
    full, _ = linear_attention.causal_linear_attention_forward(q, k, v)
    state = linear_attention.LinearAttentionState()
    pieces = []
    for start, end in ((0, 4), (4, 5), (5, 9)):
        piece, _ = linear_attention.causal_linear_attention_forward(
            q[:, :, start:end], k[:, :, start:end], v[:, :, start:end], None, state
        )
        pieces.append(piece)
    assert rel(np.concatenate(pieces, axis=2), full) < 1e-13


def test_shapes_that_do_not_fit_are_one_sentence():
    from light_llm.errors import ConfigError

    with pytest.raises(ConfigError, match="input size 4 got inputs of size 3"):
        linear.linear_forward(np.zeros((2, 3)), np.zeros((5, 4)))
    with pytest.raises(ConfigError, match="LayerNorm of size 4"):
        norms.layernorm_forward(np.zeros((2, 3)), np.ones(4), None)
    with pytest.raises(ConfigError, match="cannot be split into 5 heads"):
        attention.split_heads(np.zeros((1, 2, 12)), 5)
    with pytest.raises(ConfigError, match="attention needs"):
        q = v = np.zeros((1, 1, 3, 4))
        attention.attention_forward(q, np.zeros((1, 1, 3, 5)), v)
    with pytest.raises(ConfigError, match="index 9 is outside the table of 5 rows"):
        embedding.embedding_forward(np.array([1, 9]), np.zeros((5, 2)))
    with pytest.raises(ConfigError, match="target 7 is outside the vocabulary of 7"):
        loss.cross_entropy_forward(np.zeros((2, 7)), np.array([1, 7]))
    with pytest.raises(ConfigError, match="do not fit logits"):
        loss.cross_entropy_forward(np.zeros((2, 7)), np.array([1, 2, 3]))
