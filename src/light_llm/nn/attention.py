"""Multi-head self-attention: the explicit formula, the fused kernel, linear attention, KV cache.

Seed 000 §3 writes attention as five steps; ``attention_explicit`` is exactly those steps and
``attention_fast`` hands the same computation to PyTorch's fused kernel
(``F.scaled_dot_product_attention``, flash / memory-efficient where available). Both read the
same boolean mask, so they agree to rounding. Inside :func:`fused_attention_dtype` the fused
kernel runs in a given number format whatever autocast would choose (the trainer's choice on
the CPU under bfloat16, :func:`light_llm.train.precision.attention_kernels`).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from light_llm.config import ModelConfig
from light_llm.nn.linear import Linear
from light_llm.nn.norms import rms_normalize
from light_llm.nn.positions import apply_rotary


def attention_mask(
    n_query: int,
    n_key: int,
    offset: int,
    causal: bool,
    key_padding: torch.Tensor | None,
    device: torch.device,
) -> torch.Tensor | None:
    """Which keys each query may see: ``allowed[b, 0, i, j]`` (True = attend).

    Causal mask (seed 000 §3, "Causal Masking"): query i, at absolute position offset + i, sees
    keys j <= offset + i. Padding mask (seed 003 §4, attention_mask): key j is seen only if it is
    a real token. A query that would see no key at all (a pad at the start of a left-padded row)
    is allowed to see itself, so that its softmax stays finite; its output is never used.
    Returns None when nothing is masked. Shape (1 or B, 1, n_query, n_key).
    """
    allowed = None
    query_pos = torch.arange(n_query, device=device)[:, None] + offset  # (Tq, 1)
    key_pos = torch.arange(n_key, device=device)[None, :]  # (1, Tk)
    if causal:
        allowed = (key_pos <= query_pos)[None, None]  # (1, 1, Tq, Tk)
    if key_padding is not None:
        real_key = key_padding[:, None, None, :n_key]  # (B, 1, 1, Tk)
        allowed = real_key if allowed is None else allowed & real_key
        allowed = allowed | (key_pos == query_pos)[None, None]
    return allowed


def attention_explicit(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    allowed: torch.Tensor | None = None,
    dropout_p: float = 0.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V, step by step (seed 000 §3;
    seed 002 §7.1; seed 001 "Attention Mechanism Mathematics", steps 1-5).

    q: (B, nh, Tq, hs), k and v: (B, nh, Tk, hs). Returns the output (B, nh, Tq, hs) and the
    attention weights A (B, nh, Tq, Tk), each row summing to 1. ``dropout_p`` > 0 applies
    attention dropout to A (seed 002 §12.1, eq. 49).
    """
    d_k = q.size(-1)
    scores = q @ k.transpose(-2, -1)  # step 1, Q K^T: (B, nh, Tq, Tk)
    scores = scores / math.sqrt(d_k)  # step 2, scale by 1/sqrt(d_k)
    if allowed is not None:
        scores = scores.masked_fill(~allowed, float("-inf"))  # step 3, mask with -inf
    # step 4, softmax along each row (in float32 at least, for bf16/fp16 inputs): rows sum to 1
    weights = torch.softmax(scores, dim=-1, dtype=torch.promote_types(scores.dtype, torch.float32))
    weights = weights.to(q.dtype)
    if dropout_p > 0.0:
        weights = F.dropout(weights, dropout_p)
    return weights @ v, weights  # step 5, weighted sum of values: (B, nh, Tq, hs)


# the number format of attention_fast inside fused_attention_dtype; None: autocast's (or q's)
FUSED_ATTENTION_DTYPE: ContextVar[torch.dtype | None] = ContextVar(
    "fused_attention_dtype", default=None
)


@contextlib.contextmanager
def fused_attention_dtype(dtype: torch.dtype | None) -> Iterator[None]:
    """Within this block :func:`attention_fast` computes in ``dtype`` (Q, K, V cast to it,
    autocast off for the kernel); its output stays in ``dtype``."""
    token = FUSED_ATTENTION_DTYPE.set(dtype)
    try:
        yield
    finally:
        FUSED_ATTENTION_DTYPE.reset(token)


def recompute_contexts() -> tuple[contextlib.AbstractContextManager, ...]:
    """``context_fn`` of ``torch.utils.checkpoint``: the forward as it is, and its recomputation
    in the backward pass (gradient checkpointing) inside the same :func:`fused_attention_dtype`
    as the forward, which the backward runs outside of (else the recomputed attention is in
    another number format than the saved one, and the checkpoint refuses it)."""
    return contextlib.nullcontext(), fused_attention_dtype(FUSED_ATTENTION_DTYPE.get())


def attention_fast(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    allowed: torch.Tensor | None,
    is_causal: bool,
    dropout_p: float = 0.0,
) -> torch.Tensor:
    """The same softmax(Q K^T / sqrt(d_k)) V through PyTorch's fused kernel, which never stores
    the T x T matrix when it can avoid it (flash attention on GPUs); in the number format
    :func:`fused_attention_dtype` sets, if any."""
    dtype = FUSED_ATTENTION_DTYPE.get()
    if dtype is not None:
        with torch.autocast(q.device.type, enabled=False):
            return F.scaled_dot_product_attention(
                q.to(dtype),
                k.to(dtype),
                v.to(dtype),
                attn_mask=allowed,
                dropout_p=dropout_p,
                is_causal=is_causal,
            )
    return F.scaled_dot_product_attention(
        q, k, v, attn_mask=allowed, dropout_p=dropout_p, is_causal=is_causal
    )


def linear_attention_feature_map(x: torch.Tensor) -> torch.Tensor:
    """φ(x) = elu(x) + 1: a positive feature map, so φ(q)·φ(k) > 0 can stand in for
    exp(q·k) (seed 002 §11.3, kernel view)."""
    return F.elu(x) + 1.0


def causal_linear_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    key_padding: torch.Tensor | None,
    state: LinearAttentionState | None,
) -> torch.Tensor:
    """Causal linear attention (seed 002 §11.3, eq. 48), for position i:

        y_i = φ(q_i)^T S_i / φ(q_i)^T z_i,   S_i = Σ_{j<=i} φ(k_j) v_j^T,   z_i = Σ_{j<=i} φ(k_j)

    Within the chunk the sums are taken as a masked product (φ(Q) φ(K)^T ⊙ M) V, which is the
    same arithmetic as the running sums; the running state (S, z) of earlier chunks is added,
    and updated in place when ``state`` is given. That state, of size d_k x d_v per head, is
    linear attention's whole "KV cache". q, k, v: (B, nh, T, hs).
    """
    phi_q = linear_attention_feature_map(q)  # (B, nh, T, hs)
    phi_k = linear_attention_feature_map(k)
    if key_padding is not None:
        phi_k = phi_k * key_padding[:, None, -k.size(2) :, None].to(phi_k.dtype)
    n = q.size(2)
    causal = torch.ones(n, n, dtype=torch.bool, device=q.device).tril()
    kernel = (phi_q @ phi_k.transpose(-2, -1)).masked_fill(~causal, 0.0)  # (B, nh, T, T)
    numerator = kernel @ v  # (B, nh, T, hs)
    denominator = kernel.sum(-1)  # (B, nh, T)
    if state is not None:
        if state.kv is not None:
            numerator = numerator + phi_q @ state.kv
            denominator = denominator + (phi_q @ state.k_sum[..., None]).squeeze(-1)
        kv_chunk = phi_k.transpose(-2, -1) @ v  # (B, nh, hs, hs)
        k_chunk = phi_k.sum(2)  # (B, nh, hs)
        state.kv = kv_chunk if state.kv is None else state.kv + kv_chunk
        state.k_sum = k_chunk if state.k_sum is None else state.k_sum + k_chunk
    return numerator / denominator.clamp_min(1e-6)[..., None]


def causal_linear_attention_weights(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """The weight causal linear attention gives key j at query i (seed 002 §11.3, eq. 48),

        a_ij = φ(q_i)·φ(k_j) / Σ_{j'<=i} φ(q_i)·φ(k_j')   for j <= i, 0 after,

    so that its output y_i = Σ_j a_ij v_j, as softmax attention's is with A's rows: the matrix
    that pictures and head scores read. q, k: (B, nh, T, hs) -> (B, nh, T, T)."""
    n = q.size(2)
    causal = torch.ones(n, n, dtype=torch.bool, device=q.device).tril()
    kernel = linear_attention_feature_map(q) @ linear_attention_feature_map(k).transpose(-2, -1)
    kernel = kernel.masked_fill(~causal, 0.0)  # (B, nh, T, T)
    return kernel / kernel.sum(-1, keepdim=True).clamp_min(1e-6)


@dataclass
class LinearAttentionState:
    """Running sums S = Σ φ(k) v^T (B, nh, hs, hs) and z = Σ φ(k) (B, nh, hs)."""

    kv: torch.Tensor | None = None
    k_sum: torch.Tensor | None = None


@dataclass
class LayerKV:
    """One layer's cached keys and values, pre-allocated to the maximum length (seed 002 §11.2,
    eqs. 45-46: K_cache = [K_cache; k_new], V_cache = [V_cache; v_new])."""

    keys: torch.Tensor  # (B, nh, T_max, hs)
    values: torch.Tensor  # (B, nh, T_max, hs)

    def append(
        self, k: torch.Tensor, v: torch.Tensor, offset: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        end = offset + k.size(2)
        self.keys[:, :, offset:end] = k
        self.values[:, :, offset:end] = v
        return self.keys[:, :, :end], self.values[:, :, :end]


@dataclass
class KVCache:
    """Keys and values of every layer for the tokens seen so far, so that decoding a new token
    costs one token's work (seed 002 §11.2). ``length`` counts the cached positions.

    ``output_head``, when set, is the output head's weight laid out (d, V) for the decoding
    steps that use this cache (see :meth:`light_llm.models.gpt.GPT.new_cache`)."""

    layers: list = field(default_factory=list)
    length: int = 0
    output_head: torch.Tensor | None = None  # (d, V), contiguous
    previous_embedding: torch.Tensor | None = None  # the smear's X_0 of the last token (B, d)

    @classmethod
    def allocate(
        cls,
        config: ModelConfig,
        batch_size: int,
        device: torch.device | str = "cpu",
        dtype: torch.dtype = torch.float32,
    ) -> KVCache:
        shape = (batch_size, config.n_head, config.block_size, config.head_dim)
        layers: list = []
        for _ in range(config.n_layer):
            if config.attention == "linear":
                layers.append(LinearAttentionState())
            else:
                layers.append(
                    LayerKV(
                        torch.zeros(shape, device=device, dtype=dtype),
                        torch.zeros(shape, device=device, dtype=dtype),
                    )
                )
        return cls(layers=layers, length=0)

    def clear(self) -> None:
        """Forget every cached position, keeping the buffers (and ``output_head``) for reuse."""
        self.length = 0
        self.previous_embedding = None
        for layer in self.layers:
            if isinstance(layer, LinearAttentionState):
                layer.kv = layer.k_sum = None


class SelfAttention(nn.Module):
    """Multi-head self-attention (seed 000 §3; seed 002 §8.1):

        Q, K, V = X W^QKV (one fused projection, split in three)
        V       = a V + b E_v[tokens]                 only with ``value_embeddings`` (the GPT
                                                      gives E_v[tokens]; a, b learned, from ½)
        Q, K    = Q / RMS(Q), K / RMS(K)              per head, only with ``qk_norm``
        Q, K    = RoPE(Q), RoPE(K)                    rotary positions only
        head_i  = Attention(Q_i, K_i, V_i)           per head, d_k = d_model / n_h
        output  = Concat(head_1, ..., head_h) W^O

    ``causal`` selects the GPT (masked) or BERT (bidirectional) form. ``use_fast`` picks
    ``attention_fast`` or ``attention_explicit``; ``record_weights`` keeps the last attention
    matrix in ``last_weights`` (explicit path) for pictures.
    """

    def __init__(self, config: ModelConfig, causal: bool = True) -> None:
        super().__init__()
        self.n_head = config.n_head
        self.n_embd = config.n_embd
        self.causal = causal
        self.linear = config.attention == "linear"
        self.dropout_p = config.dropout
        self.qk_norm_eps = config.norm_eps if config.qk_norm else None
        self.c_attn = Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)  # W^QKV
        self.c_proj = Linear(config.n_embd, config.n_embd, bias=config.bias)  # W^O
        self.resid_dropout = nn.Dropout(config.dropout)
        if config.value_embeddings:  # (a, b): V = a V + b E_v[tokens]
            self.ve_gains = nn.Parameter(torch.full((2,), 0.5))
        self.use_fast = True
        self.record_weights = False
        self.last_weights: torch.Tensor | None = None

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, d_model) -> (B, nh, T, hs): reshape then transpose (seed 000 §3)."""
        B, T, _ = x.shape
        return x.view(B, T, self.n_head, self.n_embd // self.n_head).transpose(1, 2)

    def queries_keys_values(
        self,
        x: torch.Tensor,
        rope: tuple[torch.Tensor, torch.Tensor] | None = None,
        value_embedding: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Q, K, V = split(X W^QKV + b) per head, V mixed with the value embedding
        E_v[tokens] (B, T, d_model) when the config has them, then QK-norm and RoPE on Q and K
        when the config has them. x: (B, T, d_model) -> three (B, nh, T, hs).

        QK-norm and RoPE compute in float32 at least, and Q and K then take the number format
        attention runs in (:func:`fused_attention_dtype`'s, else their own): under bfloat16
        autocast on the CPU, whose attention runs in float32, they are cast up once, not
        rounded to bfloat16 after the norm and again after the rotation and cast up around
        each (eight casts fewer a layer forward, and as many backward: the default's training
        step 3.5-4.6% shorter on a 2-core Xeon with AMX, docs/recipe.md)."""
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)  # each (B, T, d_model)
        if value_embedding is not None:
            v = self.ve_gains[0] * v + self.ve_gains[1] * value_embedding  # a V + b E_v[tokens]
        q, k, v = self.split_heads(q), self.split_heads(k), self.split_heads(v)  # (B, nh, T, hs)
        if self.qk_norm_eps is None and rope is None:
            return q, k, v
        attention_dtype = FUSED_ATTENTION_DTYPE.get() or q.dtype
        work = torch.promote_types(q.dtype, torch.float32)
        q, k = q.to(work), k.to(work)
        if self.qk_norm_eps is not None:  # the cache then holds normalised, rotated keys
            q, k = rms_normalize(q, self.qk_norm_eps), rms_normalize(k, self.qk_norm_eps)
        if rope is not None:
            q, k = apply_rotary(q, *rope), apply_rotary(k, *rope)
        return q.to(attention_dtype), k.to(attention_dtype), v

    def forward(
        self,
        x: torch.Tensor,
        *,
        offset: int = 0,
        key_padding: torch.Tensor | None = None,
        rope: tuple[torch.Tensor, torch.Tensor] | None = None,
        cache: LayerKV | LinearAttentionState | None = None,
        value_embedding: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """x: (B, T, d_model) -> (B, T, d_model). ``offset`` is the absolute position of x's
        first token (the cache length); ``key_padding`` (B, offset + T) marks real tokens;
        ``value_embedding``: E_v[tokens] (B, T, d_model), with value embeddings."""
        B, T, C = x.shape
        q, k, v = self.queries_keys_values(x, rope, value_embedding)  # each (B, nh, T, hs)
        dropout_p = self.dropout_p if self.training else 0.0
        if self.linear:
            y = causal_linear_attention(q, k, v, key_padding, cache)
            if self.record_weights:  # y_i = Σ_j a_ij v_j: a's rows, for a whole prompt
                whole = cache is None and key_padding is None
                weights = causal_linear_attention_weights(q, k).detach() if whole else None
                self.last_weights = weights
        else:
            if cache is not None:
                k, v = cache.append(k, v, offset)  # (B, nh, offset + T, hs)
            sees_every_key = key_padding is None and (not self.causal or T == 1)
            kernel_causal = self.causal and key_padding is None and offset == 0
            if self.use_fast and not self.record_weights and (sees_every_key or kernel_causal):
                # no mask tensor: one new token (or an encoder) sees every key, or the
                # kernel's own causal path
                y = attention_fast(q, k, v, None, kernel_causal and T > 1, dropout_p)
            else:
                allowed = attention_mask(T, k.size(2), offset, self.causal, key_padding, x.device)
                if self.use_fast and not self.record_weights:
                    y = attention_fast(q, k, v, allowed, False, dropout_p)
                else:
                    y, weights = attention_explicit(q, k, v, allowed, dropout_p)
                    self.last_weights = weights.detach() if self.record_weights else None
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # concatenate heads: (B, T, d_model)
        return self.resid_dropout(self.c_proj(y))
