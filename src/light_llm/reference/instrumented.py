"""The NumPy GPT's forward pass as the residual stream, recording what is asked for and applying
interventions: the twin of :mod:`light_llm.inspect.instrumented`, read off the NumPy engine's
own ops (``blocks.py``), where each step is one line. Names and :class:`Patch` are in
:mod:`light_llm.interventions`; dropout is off.

    x = E[tokens] + P[positions]                                   embed, pos_embed
    for each layer l:                                              resid_pre.l
        A_h = softmax(Q_h K_h^T / sqrt(d_k)) (causal)             pattern.l
        head_out[h] = (A_h V_h) W_O[:, h]^T                        head_out.l
        x = x + Σ_h head_out[h] + b_O                              attn_out.l, resid_mid.l
        x = x + σ(LN_2(x) W_1 + b_1) W_2 + b_2                     mlp_hidden.l, mlp_out.l
    logits = LN_f(x) W_U                                           final_scale
"""

from __future__ import annotations

import numpy as np

from light_llm.errors import ConfigError, SamplingError
from light_llm.interventions import (
    Sites,
    Trace,
)
from light_llm.reference.activations import activation_forward, swiglu_forward
from light_llm.reference.attention import attention_forward, attention_mask, split_heads
from light_llm.reference.blocks import linear_layer_forward, norm_forward
from light_llm.reference.embedding import check_ids_in_vocabulary
from light_llm.reference.linear_attention import DENOMINATOR_FLOOR, feature_map_forward
from light_llm.reference.model import NumpyGPT
from light_llm.reference.norms import rms_normalize_forward
from light_llm.reference.positions import rotary_forward
from light_llm.reference.smear import smear_forward
from light_llm.reference.softcap import softcap_forward
from light_llm.reference.softmax import log_softmax_forward


def as_array_like(value, like: np.ndarray) -> np.ndarray:
    """A patch's value (a number, nested lists, an array, or a torch tensor of any dtype,
    device or grad: one the PyTorch engine recorded) as an array of ``like``'s dtype."""
    if hasattr(value, "detach") and hasattr(value, "element_size"):  # a tensor; torch not here
        value = value.detach().cpu()
        if value.dtype.is_floating_point and value.element_size() < 4:
            value = value.float()  # NumPy has no bfloat16
        value = value.numpy()
    return np.asarray(value, dtype=like.dtype)


def run_instrumented(
    model: NumpyGPT, idx: np.ndarray, *, record=(), patches=(), targets=None, start=None
) -> Trace:
    """The forward of ``model`` on ``idx`` (B, T), recording the sites named in ``record`` (an
    iterable of names, or True for all) and applying ``patches``. The same logits as
    ``model.forward(idx)`` when nothing is patched. ``start`` = (layer l, resid_pre.l recorded
    before) begins at layer l with that residual."""
    if not isinstance(model, NumpyGPT):
        raise ConfigError(
            f"model must be a NumpyGPT, got {type(model).__name__} (a PyTorch model runs "
            "through light_llm.inspect.instrumented)."
        )
    config, params = model.config, model.params
    idx = checked_ids(idx, config.vocab_size, "token id")
    B, T = idx.shape
    if targets is not None:
        targets = checked_ids(targets, config.vocab_size, "target", idx.shape, ignore_index=-1)
    sites = Sites.for_forward(config, T, record, patches, np.copy, as_array_like)
    positions = np.arange(T)
    first, x = start if start is not None else (0, None)
    if start is not None:  # the residual in the weights' dtype, as the torch engine casts it
        x = as_array_like(x, params["transformer.wte.weight"])
    if start is None:
        x = embed(model, idx, positions, sites)
    x0 = None  # X_0, which the embedding skip mixes into every layer's input
    if config.embedding_skip:
        x0 = x if start is None else embed(model, idx, positions, unseen_sites())
    rope = None
    if config.positions == "rotary":
        rope = (model.rope_cos[positions], model.rope_sin[positions])  # (T, hs/2) each
    values = params["transformer.wve.weight"][idx] if config.value_embeddings else None
    for layer in range(first, config.n_layer):
        if x0 is not None and (start is None or layer > first):  # a start's residual is mixed
            gain, skip = params[f"transformer.h.{layer}.x0_gains"]
            x = gain * x + skip * x0
        x = block_forward(model, layer, x, rope, sites, values)
    if config.block_order == "pre":
        sites.visit("final_scale", final_norm_scale(x, config))
        x, _ = norm_forward(x, params, "transformer.ln_f", config)
    logits = x @ model.head_weight.T  # (B, T, V)
    if config.logit_softcap is not None:
        logits, _ = softcap_forward(logits, config.logit_softcap)
    token_losses = None
    if targets is not None:  # -log softmax(logits_t)[x_{t+1}] (seed 000 §7), each token's
        log_probs, _ = log_softmax_forward(logits)  # (B, T, V)
        picked = np.take_along_axis(log_probs, np.maximum(targets, 0)[..., None], -1)[..., 0]
        token_losses = np.where(targets == -1, np.nan, -picked)
    return Trace(logits, token_losses, sites.activations)


def checked_ids(
    ids: object,
    vocab_size: int,
    name: str,
    shape: tuple[int, ...] | None = None,
    ignore_index: int | None = None,
) -> np.ndarray:
    """``ids`` as a (B, T) integer array of ids in [0, vocab_size) (``ignore_index`` allowed
    besides), of ``shape`` when given; else the SamplingError the torch engine's
    check_token_ids gives: E[ids] and -log softmax(logits)[y] are defined for nothing else (a
    negative id read the table from its end, and a negative target scored id 0)."""
    array = np.asarray(ids)
    if array.ndim != 2 or (shape is not None and array.shape != tuple(shape)):
        expected = "(B, T)" if shape is None else str(tuple(shape))
        raise SamplingError(f"{name}s must have shape {expected}, got {array.shape}.")
    if 0 in array.shape:
        raise SamplingError(
            f"the {name}s are empty (shape {array.shape}): give at least one token."
        )
    if not np.issubdtype(array.dtype, np.integer):
        raise SamplingError(f"{name}s must be integers, got {array.dtype}.")
    check_ids_in_vocabulary(array, vocab_size, name, ignore_index)
    return array


def embed(model: NumpyGPT, idx: np.ndarray, positions: np.ndarray, sites: Sites) -> np.ndarray:
    """The residual stream's start E[tokens] + P[positions] (seed 000 §2), with the smear's
    term g_t X_0[t-1] added (``smear``, a site of its own), its sites visited."""
    config, params = model.config, model.params
    x = sites.visit("embed", params["transformer.wte.weight"][idx])  # E[tokens]: (B, T, d)
    if config.positions in ("learned", "sinusoidal"):
        learned = config.positions == "learned"
        table = params["transformer.wpe.weight"] if learned else model.position_table
        x = x + sites.visit("pos_embed", np.broadcast_to(table[positions], x.shape))
    if config.smear:  # + g_t X_0[t-1], the look-back term, recorded as a part of its own
        _, term, _ = smear_forward(
            x, params["transformer.smear.gate"], params["transformer.smear.gain"]
        )
        x = x + sites.visit("smear", term)
    return x


def unseen_sites() -> Sites:
    """Sites that record and patch nothing: a part of the forward computed again, unseen."""
    return Sites(frozenset(), [], np.copy, as_array_like)


def final_norm_scale(x: np.ndarray, config) -> np.ndarray:
    """1 / sqrt(Var(x) + ε) (LayerNorm) or 1 / sqrt(mean(x²) + ε) (RMSNorm), (B, T, 1): the
    factor the final norm multiplies by (seed 000 §5; seed 001)."""
    if config.norm == "layernorm":
        spread = x.var(-1, keepdims=True)
    else:
        spread = np.mean(x * x, axis=-1, keepdims=True)
    return 1.0 / np.sqrt(spread + config.norm_eps)


def block_forward(
    model: NumpyGPT, layer: int, x: np.ndarray, rope, sites: Sites, values=None
) -> np.ndarray:
    """One block (``blocks.block_forward``), pre-LN or post-LN, its sites visited in order;
    ``values``: the value embedding E_v[tokens] (B, T, d) of a model that has them."""
    config, params = model.config, model.params
    name, prefix = f".{layer}", f"transformer.h.{layer}"
    x = sites.visit("resid_pre" + name, x)
    if config.block_order == "pre":
        normed = sites.visit("ln1" + name, norm_forward(x, params, prefix + ".ln_1", config)[0])
        x = sites.visit(
            "resid_mid" + name,
            x + attention_forward_by_head(model, layer, normed, rope, sites, values),
        )
        normed = sites.visit("ln2" + name, norm_forward(x, params, prefix + ".ln_2", config)[0])
        hidden = sites.visit(
            "mlp_hidden" + name, mlp_hidden(normed, params, prefix + ".mlp", config)
        )
        mlp_out, _ = linear_layer_forward(hidden, params, prefix + ".mlp.c_proj")
        return sites.visit("resid_post" + name, x + sites.visit("mlp_out" + name, mlp_out))
    attended = attention_forward_by_head(model, layer, x, rope, sites, values)
    x, _ = norm_forward(x + attended, params, prefix + ".ln_1", config)
    x = sites.visit("resid_mid" + name, x)
    hidden = sites.visit("mlp_hidden" + name, mlp_hidden(x, params, prefix + ".mlp", config))
    mlp_out, _ = linear_layer_forward(hidden, params, prefix + ".mlp.c_proj")
    x, _ = norm_forward(
        x + sites.visit("mlp_out" + name, mlp_out), params, prefix + ".ln_2", config
    )
    return sites.visit("resid_post" + name, x)


def mlp_hidden(x: np.ndarray, params, name: str, config) -> np.ndarray:
    """The FFN's hidden units, before W_2: σ(x W_1 + b_1), or Swish(x W_1) ⊙ (x V) for SwiGLU
    (``blocks.feedforward_forward``'s first half). (B, T, d) -> (B, T, d_ff)."""
    if config.activation == "swiglu":
        gate, _ = linear_layer_forward(x, params, name + ".c_fc")
        value, _ = linear_layer_forward(x, params, name + ".c_v")
        return swiglu_forward(gate, value)[0]
    pre, _ = linear_layer_forward(x, params, name + ".c_fc")
    return activation_forward(config.activation, pre)[0]


def attention_forward_by_head(
    model: NumpyGPT, layer: int, x: np.ndarray, rope, sites: Sites, values=None
) -> np.ndarray:
    """The attention sub-layer, head by head (seed 000 §3; seed 002 §8.1):

        Q, K, V = split(x W^QKV + b);  V = a V + b E_v[tokens] (value embeddings only)
        Q, K normalised (QK-norm) and rotated (RoPE)
        head_h = A_h V_h;   head_out[h] = head_h W_O[:, h hs:(h+1) hs]^T
        attn_out = Σ_h head_out[h] + b_O

    (B, T, d) -> (B, T, d)."""
    config, params = model.config, model.params
    prefix = f"transformer.h.{layer}.attn"
    B, T, C = x.shape
    qkv, _ = linear_layer_forward(x, params, prefix + ".c_attn")  # (B, T, 3d)
    q = split_heads(qkv[..., :C], config.n_head)  # (B, nh, T, hs)
    k = split_heads(qkv[..., C : 2 * C], config.n_head)
    mixed = qkv[..., 2 * C :]  # (B, T, d)
    if values is not None:
        a, b = params[prefix + ".ve_gains"]
        mixed = a * mixed + b * values
    v = split_heads(mixed, config.n_head)
    if config.qk_norm:
        q, k = (
            rms_normalize_forward(q, config.norm_eps)[0],
            rms_normalize_forward(k, config.norm_eps)[0],
        )
    if rope is not None:
        q, k = rotary_forward(q, *rope)[0], rotary_forward(k, *rope)[0]
    q, k, v = (
        sites.visit(f"{site}.{layer}", value) for site, value in zip("qkv", (q, k, v), strict=True)
    )
    if config.attention == "linear":
        weights = causal_linear_attention_weights(q, k)
        heads = weights @ v
    else:
        heads, cache = attention_forward(q, k, v, attention_mask(T, T))
        weights = cache[3]  # A: (B, nh, T, T)
    sites.visit(f"pattern.{layer}", weights)
    w_o = params[prefix + ".c_proj.weight"].reshape(C, config.n_head, config.head_dim)
    head_out = sites.visit(f"head_out.{layer}", np.einsum("bhte,dhe->bthd", heads, w_o))
    out = head_out.sum(2)  # (B, T, d)
    if prefix + ".c_proj.bias" in params:
        out = out + params[prefix + ".c_proj.bias"]
    return sites.visit(f"attn_out.{layer}", out)


def causal_linear_attention_weights(q: np.ndarray, k: np.ndarray) -> np.ndarray:
    """a_ij = φ(q_i)·φ(k_j) / Σ_{j'<=i} φ(q_i)·φ(k_j') for j <= i, 0 after (seed 002 §11.3,
    eq. 48): causal linear attention's output is y_i = Σ_j a_ij v_j. (B, nh, T, T)."""
    n = q.shape[2]
    kernel = feature_map_forward(q)[0] @ feature_map_forward(k)[0].swapaxes(-1, -2)
    kernel = np.where(np.tril(np.ones((n, n), dtype=bool)), kernel, 0.0).astype(q.dtype)
    return kernel / np.maximum(kernel.sum(-1, keepdims=True), DENOMINATOR_FLOOR)
