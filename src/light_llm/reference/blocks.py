"""The GPT's layers assembled from the NumPy ops: normalisation, multi-head self-attention,
the feed-forward network and the transformer block, each a forward that returns a cache and a
backward that takes it (seed 000 §3-§6; seed 002 §8.1, §9.1; seed 001).

Parameters are read from one flat dict by the PyTorch engine's names (``prefix`` + ``"attn.
c_attn.weight"``, ...) and gradients are written into a dict under the same names.
"""

from __future__ import annotations

import numpy as np

from light_llm.config import ModelConfig
from light_llm.reference.activations import (
    activation_backward,
    activation_forward,
    swiglu_backward,
    swiglu_forward,
)
from light_llm.reference.attention import (
    attention_backward,
    attention_forward,
    attention_mask,
    merge_heads,
    split_heads,
)
from light_llm.reference.dropout import dropout_backward, dropout_forward
from light_llm.reference.linear import linear_backward, linear_forward
from light_llm.reference.linear_attention import (
    causal_linear_attention_backward,
    causal_linear_attention_forward,
)
from light_llm.reference.norms import (
    layernorm_backward,
    layernorm_forward,
    rms_normalize_backward,
    rms_normalize_forward,
    rmsnorm_backward,
    rmsnorm_forward,
)
from light_llm.reference.positions import rotary_backward, rotary_forward

Params = dict[str, np.ndarray]
# the key, after a layer's attention name, under which its backward leaves the gradient at
# the value embedding E_v[tokens] (B, T, d) in ``grads``; the model sums the layers' into E_v
VALUE_EMBEDDING_GRAD = ".value_embedding"


def linear_layer_forward(x: np.ndarray, params: Params, name: str) -> tuple[np.ndarray, tuple]:
    """``name``.weight / ``name``.bias (bias absent when the config has none) applied to x."""
    return linear_forward(x, params[name + ".weight"], params.get(name + ".bias"))


def linear_layer_backward(dout: np.ndarray, cache: tuple, grads: Params, name: str) -> np.ndarray:
    dx, dweight, dbias = linear_backward(dout, cache)
    grads[name + ".weight"] = dweight
    if dbias is not None:
        grads[name + ".bias"] = dbias
    return dx


def norm_forward(
    x: np.ndarray, params: Params, name: str, config: ModelConfig
) -> tuple[np.ndarray, tuple]:
    """The config's normalisation (LayerNorm or RMSNorm, seed 000 §5, seed 001) by ``name``."""
    if config.norm == "rmsnorm":
        return rmsnorm_forward(x, params[name + ".weight"], config.norm_eps)
    return layernorm_forward(
        x, params[name + ".weight"], params.get(name + ".bias"), config.norm_eps
    )


def norm_backward(
    dout: np.ndarray, cache: tuple, grads: Params, name: str, config: ModelConfig
) -> np.ndarray:
    if config.norm == "rmsnorm":
        dx, grads[name + ".weight"] = rmsnorm_backward(dout, cache)
        return dx
    dx, grads[name + ".weight"], dbias = layernorm_backward(dout, cache)
    if dbias is not None:
        grads[name + ".bias"] = dbias
    return dx


def self_attention_forward(
    x: np.ndarray,
    params: Params,
    name: str,
    config: ModelConfig,
    *,
    rope: tuple[np.ndarray, np.ndarray] | None = None,
    key_padding: np.ndarray | None = None,
    offset: int = 0,
    layer_cache=None,
    dropout_p: float = 0.0,
    rng: np.random.Generator | None = None,
    value_embedding: np.ndarray | None = None,
) -> tuple[np.ndarray, tuple]:
    """Causal multi-head self-attention (seed 000 §3; seed 002 §8.1, eqs. 29-30):

        Q, K, V = split(x W^QKV + b)        one fused projection ``c_attn``, then heads
        V = a V + b E_v[tokens]             value embeddings only (``value_embedding`` =
                                            E_v[tokens] (B, T, d); a, b = ``ve_gains``)
        Q, K = Q / RMS(Q), K / RMS(K)       per head, QK-norm only (seed 001 "RMSNorm")
        Q, K = RoPE(Q), RoPE(K)             rotary positions only (seed 002 §8.2)
        head_i = Attention(Q_i, K_i, V_i)   softmax or linear attention
        out = Dropout(Concat(heads) W^O + b)   ``c_proj``, residual dropout

    ``layer_cache`` (a LayerKV or LinearAttentionState) makes this a decoding step; a
    forward with a cache cannot be differentiated. x: (B, T, d) -> (B, T, d)."""
    C = x.shape[-1]
    qkv, qkv_cache = linear_layer_forward(x, params, name + ".c_attn")  # (B, T, 3d)
    q = split_heads(qkv[..., :C], config.n_head)  # (B, nh, T, hs)
    k = split_heads(qkv[..., C : 2 * C], config.n_head)
    values, value_cache = qkv[..., 2 * C :], None  # (B, T, d)
    if value_embedding is not None:
        a, b = params[name + ".ve_gains"]
        value_cache = (values, value_embedding, a, b)
        values = a * values + b * value_embedding
    v = split_heads(values, config.n_head)
    qk_norm_caches = None
    if config.qk_norm:  # normalised (then rotated) keys are what a KV cache stores
        q, q_norm = rms_normalize_forward(q, config.norm_eps)
        k, k_norm = rms_normalize_forward(k, config.norm_eps)
        qk_norm_caches = (q_norm, k_norm)
    rope_caches = None
    if rope is not None:
        q, q_rope = rotary_forward(q, *rope)
        k, k_rope = rotary_forward(k, *rope)
        rope_caches = (q_rope, k_rope)
    if config.attention == "linear":
        y, attention_cache = causal_linear_attention_forward(q, k, v, key_padding, layer_cache)
        linear = True
    else:
        if layer_cache is not None:
            k, v = layer_cache.append(k, v, offset)  # (B, nh, offset + T, hs)
        allowed = attention_mask(q.shape[2], k.shape[2], offset, True, key_padding)
        y, attention_cache = attention_forward(q, k, v, allowed, dropout_p, rng)
        linear = False
    out, proj_cache = linear_layer_forward(merge_heads(y), params, name + ".c_proj")
    out, dropout_cache = dropout_forward(out, dropout_p, rng)
    qk_caches = (qk_norm_caches, rope_caches)  # what q and k went through before attention
    caches = (qkv_cache, qk_caches, value_cache, linear, attention_cache, proj_cache)
    return out, (*caches, dropout_cache)


def self_attention_backward(
    dout: np.ndarray, cache: tuple, grads: Params, name: str, config: ModelConfig
) -> np.ndarray:
    """Backward of :func:`self_attention_forward`, step by step in reverse: dropout, W^O,
    merge (backward: split), attention (seed 002 §7.3), RoPE (rotate back), QK-norm, the
    value embedding's mix (dV_raw = a dV, dE = b dV, da = Σ dV ⊙ V_raw, db = Σ dV ⊙ E; dE
    left in ``grads`` under ``name`` + :data:`VALUE_EMBEDDING_GRAD`), split (backward: merge,
    with Q, K, V concatenated back into the fused projection's output), W^QKV."""
    qkv_cache, qk_caches, value_cache, linear, attention_cache, proj_cache, dropout_cache = cache
    qk_norm_caches, rope_caches = qk_caches
    dout = dropout_backward(dout, dropout_cache)
    dy = linear_layer_backward(dout, proj_cache, grads, name + ".c_proj")  # (B, T, d)
    dy = split_heads(dy, config.n_head)  # backward of merge_heads: (B, nh, T, hs)
    if linear:
        dq, dk, dv = causal_linear_attention_backward(dy, attention_cache)
    else:
        dq, dk, dv = attention_backward(dy, attention_cache)
    if rope_caches is not None:
        dq = rotary_backward(dq, rope_caches[0])
        dk = rotary_backward(dk, rope_caches[1])
    if qk_norm_caches is not None:
        dq = rms_normalize_backward(dq, qk_norm_caches[0])
        dk = rms_normalize_backward(dk, qk_norm_caches[1])
    dvalues = merge_heads(dv)  # (B, T, d)
    if value_cache is not None:
        raw, embedding, a, b = value_cache
        grads[name + ".ve_gains"] = np.array(
            [(dvalues * raw).sum(), (dvalues * embedding).sum()], dtype=dvalues.dtype
        )
        grads[name + VALUE_EMBEDDING_GRAD] = b * dvalues
        dvalues = a * dvalues
    dqkv = np.concatenate((merge_heads(dq), merge_heads(dk), dvalues), axis=-1)
    return linear_layer_backward(dqkv, qkv_cache, grads, name + ".c_attn")


def feedforward_forward(
    x: np.ndarray,
    params: Params,
    name: str,
    config: ModelConfig,
    dropout_p: float = 0.0,
    rng: np.random.Generator | None = None,
) -> tuple[np.ndarray, tuple]:
    """The position-wise FFN (seed 000 §4; seed 002 §9.1, eq. 39; §12.1, eq. 50):

        MLP:     out = Dropout(σ(x W_1 + b_1) W_2 + b_2),  σ = GELU | GELU-tanh | ReLU | ReLU²
        SwiGLU:  out = Dropout((Swish(x W_1) ⊙ (x V)) W_2)   (seed 001 "SwiGLU")

    with ``c_fc`` = W_1, ``c_v`` = V, ``c_proj`` = W_2. x: (B, T, d) -> (B, T, d)."""
    if config.activation == "swiglu":
        gate, gate_cache = linear_layer_forward(x, params, name + ".c_fc")  # (B, T, d_ff)
        value, value_cache = linear_layer_forward(x, params, name + ".c_v")
        hidden, act_cache = swiglu_forward(gate, value)
        in_caches = (gate_cache, value_cache)
    else:
        pre, pre_cache = linear_layer_forward(x, params, name + ".c_fc")  # (B, T, d_ff)
        hidden, act_cache = activation_forward(config.activation, pre)
        in_caches = (pre_cache,)
    out, proj_cache = linear_layer_forward(hidden, params, name + ".c_proj")
    out, dropout_cache = dropout_forward(out, dropout_p, rng)
    return out, (in_caches, act_cache, proj_cache, dropout_cache)


def feedforward_backward(
    dout: np.ndarray, cache: tuple, grads: Params, name: str, config: ModelConfig
) -> np.ndarray:
    """Backward of :func:`feedforward_forward` (seed 002 §5.2, eqs. 16-18: the two-layer MLP
    rule dW_1 = x^T (dz2 W_2^T ⊙ σ'(z1)))."""
    in_caches, act_cache, proj_cache, dropout_cache = cache
    dout = dropout_backward(dout, dropout_cache)
    dhidden = linear_layer_backward(dout, proj_cache, grads, name + ".c_proj")  # (B, T, d_ff)
    if config.activation == "swiglu":
        dgate, dvalue = swiglu_backward(dhidden, act_cache)
        dx = linear_layer_backward(dgate, in_caches[0], grads, name + ".c_fc")
        dx += linear_layer_backward(dvalue, in_caches[1], grads, name + ".c_v")
        return dx
    dpre = activation_backward(config.activation, dhidden, act_cache)
    return linear_layer_backward(dpre, in_caches[0], grads, name + ".c_fc")


def block_forward(
    x: np.ndarray,
    params: Params,
    name: str,
    config: ModelConfig,
    dropout_p: float = 0.0,
    rng: np.random.Generator | None = None,
    **attention_kwargs,
) -> tuple[np.ndarray, tuple]:
    """One transformer layer (seed 002 §9.1, eqs. 35-38; seed 000 §6; seed 001):

        pre-LN:   h = x + Attn(LN_1(x));     y = h + FFN(LN_2(h))
        post-LN:  h = LN_1(x + Attn(x));     y = LN_2(h + FFN(h))

    ``attention_kwargs`` go to :func:`self_attention_forward`. x: (B, T, d) -> (B, T, d)."""
    attn, ln_1, ln_2, mlp = name + ".attn", name + ".ln_1", name + ".ln_2", name + ".mlp"
    kwargs = dict(attention_kwargs, dropout_p=dropout_p, rng=rng)
    if config.block_order == "pre":
        normed, ln_1_cache = norm_forward(x, params, ln_1, config)
        attended, attn_cache = self_attention_forward(normed, params, attn, config, **kwargs)
        h = x + attended
        normed, ln_2_cache = norm_forward(h, params, ln_2, config)
        fed, mlp_cache = feedforward_forward(normed, params, mlp, config, dropout_p, rng)
        return h + fed, (ln_1_cache, attn_cache, ln_2_cache, mlp_cache)
    attended, attn_cache = self_attention_forward(x, params, attn, config, **kwargs)
    h, ln_1_cache = norm_forward(x + attended, params, ln_1, config)
    fed, mlp_cache = feedforward_forward(h, params, mlp, config, dropout_p, rng)
    y, ln_2_cache = norm_forward(h + fed, params, ln_2, config)
    return y, (ln_1_cache, attn_cache, ln_2_cache, mlp_cache)


def block_backward(
    dout: np.ndarray, cache: tuple, grads: Params, name: str, config: ModelConfig
) -> np.ndarray:
    """Backward of :func:`block_forward`. A residual y = h + F(h) sends dout both straight to
    h and through F, and the two add (seed 002 §3.2: the "gradient highway")."""
    attn, ln_1, ln_2, mlp = name + ".attn", name + ".ln_1", name + ".ln_2", name + ".mlp"
    ln_1_cache, attn_cache, ln_2_cache, mlp_cache = cache
    if config.block_order == "pre":
        dnormed = feedforward_backward(dout, mlp_cache, grads, mlp, config)
        dh = dout + norm_backward(dnormed, ln_2_cache, grads, ln_2, config)
        dnormed = self_attention_backward(dh, attn_cache, grads, attn, config)
        return dh + norm_backward(dnormed, ln_1_cache, grads, ln_1, config)
    dsum = norm_backward(dout, ln_2_cache, grads, ln_2, config)  # at h + FFN(h)
    dh = dsum + feedforward_backward(dsum, mlp_cache, grads, mlp, config)
    dsum = norm_backward(dh, ln_1_cache, grads, ln_1, config)  # at x + Attn(x)
    return dsum + self_attention_backward(dsum, attn_cache, grads, attn, config)
