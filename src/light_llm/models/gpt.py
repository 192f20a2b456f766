"""The GPT: a decoder-only transformer language model (seed 000, ``light_llm.py``).

    X_0 = E[tokens] + P[positions]                       (seed 000 §2)
    X_l = Block_l(X_{l-1}),  l = 1..L                    (seed 000 §6, seed 002 §9.1)
          (with value embeddings, every layer's values V_l = a_l X W_V + b_l E_v[tokens]:
          a second token table, read by the attention of every layer; nn/attention.py)
          (with the embedding skip, Block_l reads λ_l X_{l-1} + μ_l X_0, λ_l and μ_l learned
          from 1 and 0: a path from the embedding to every layer)
          (with the smear, X_0[t] += λ σ(w · X_0[t, :k]) X_0[t-1] first: a one-token
          look-back, λ and w learned from 0; nn/smear.py)
    logits = LN_f(X_L) E^T                               (tied head, seed 002 §10.2)
    logits = c tanh(logits / c)                          (only with logit_softcap = c)
    loss = -(1/T) Σ_t log softmax(logits_t)[x_{t+1}]     (seed 000 §7)

With multi-token prediction (``mtp_weight`` w > 0, training only) a second head reads the same
final hidden state h_t = LN_f(X_L)_t and predicts the token after next:

    z'_t = (h_t + W_mtp h_t) W_U^T                       (W_mtp: d x d, starts at 0)
    loss = loss + w · -(1/(T-1)) Σ_{t<T} log softmax(z'_t)[x_{t+2}]

Module and weight names follow GPT-2 (``transformer.wte``, ``transformer.h.0.attn.c_attn``, ...)
so HuggingFace checkpoints map onto them directly.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint as activation_checkpoint

from light_llm.config import ModelConfig, check_buildable
from light_llm.errors import ConfigError, SamplingError
from light_llm.limits import check_integer, check_real
from light_llm.nn.attention import KVCache, recompute_contexts
from light_llm.nn.blocks import Block
from light_llm.nn.linear import Linear
from light_llm.nn.lora import LoRALinear
from light_llm.nn.norms import build_norm
from light_llm.nn.positions import RotaryTables, SinusoidalPositions
from light_llm.nn.smear import Smear
from light_llm.nn.softcap import soft_cap
from light_llm.nn.softmax_loss import softmax_cross_entropy, softmax_loss_applies

INIT_STD = 0.02  # N(0, 0.02) for every weight matrix and embedding (seed 000 §10)
# weights that only the training loss uses (the multi-token head), none of the next-token
# logits: an exported model leaves them out
TRAINING_ONLY_WEIGHTS = ("mtp_proj.weight",)


class GPT(nn.Module):
    """A GPT language model built from a :class:`ModelConfig`.

    ``forward(idx, targets)`` returns ``(logits, loss)``: logits first, loss None without
    targets. Variants (positions, norm, activation, block order, attention, QK-norm, bias,
    tying, logit soft-capping; value embeddings, the embedding skip, the smear, multi-token
    prediction) come from the config; their formulas live in ``light_llm.nn`` and above.
    """

    def __init__(self, config: ModelConfig) -> None:
        check_buildable(config)
        super().__init__()
        self.config = config
        layers = {
            "wte": nn.Embedding(config.vocab_size, config.n_embd),  # E: (V, d)
            "drop": nn.Dropout(config.dropout),
            "h": nn.ModuleList(Block(config, causal=True) for _ in range(config.n_layer)),
        }
        if config.positions == "learned":
            layers["wpe"] = nn.Embedding(config.block_size, config.n_embd)  # P: (T_max, d)
        elif config.positions == "sinusoidal":
            layers["wpe"] = SinusoidalPositions(
                config.block_size, config.n_embd, config.position_base
            )
        if config.value_embeddings:
            layers["wve"] = nn.Embedding(config.vocab_size, config.n_embd)  # E_v: (V, d)
        if config.smear:
            layers["smear"] = Smear(config)  # λ, w: the one-token look-back
        if config.block_order == "pre":
            layers["ln_f"] = build_norm(config)
        self.transformer = nn.ModuleDict(layers)
        self.lm_head = Linear(config.n_embd, config.vocab_size, bias=False)
        if config.tie_embeddings:
            self.lm_head.weight = self.transformer.wte.weight
        if config.multi_token:  # the token after next (module docstring); not for inference
            self.mtp_proj = Linear(config.n_embd, config.n_embd, bias=False)
        self.rope = None
        if config.positions == "rotary":
            self.rope = RotaryTables(config.block_size, config.head_dim, config.position_base)
        self.gradient_checkpointing = False
        self.apply(self._init_weights)
        if config.multi_token:  # the second head starts as the first, shifted by one token
            nn.init.zeros_(self.mtp_proj.weight)
        if config.smear:  # λ = 0, w = 0: the smear starts as nothing
            self.transformer.smear.reset_parameters()

    # ------------------------------------------------------------------ construction
    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        """Weights ~ N(0, 0.02), biases 0 (seed 000 §10); norms start at γ = 1, β = 0."""
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=INIT_STD)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=INIT_STD)

    # ------------------------------------------------------------------ properties
    def num_parameters(self, exclude_embeddings: bool = False) -> int:
        """Trainable parameters, a tied matrix counted once."""
        total = sum(p.numel() for p in self.parameters())
        if exclude_embeddings:
            total -= self.transformer.wte.weight.numel()
            if self.config.positions == "learned":
                total -= self.transformer.wpe.weight.numel()
            if self.config.value_embeddings:
                total -= self.transformer.wve.weight.numel()
        return total

    @property
    def device(self) -> torch.device:
        return self.transformer.wte.weight.device

    @property
    def dtype(self) -> torch.dtype:
        """The dtype the model computes in: its weights', or an int8 model's scales'."""
        table = self.transformer.wte
        return table.weight.dtype if table.weight.is_floating_point() else table.weight_scale.dtype

    def attention_layers(self) -> Iterator[nn.Module]:
        for block in self.transformer.h:
            yield block.attn

    def use_fast_attention(self, enabled: bool = True) -> None:
        """Switch every layer between the fused kernel and the explicit formula."""
        for attn in self.attention_layers():
            attn.use_fast = enabled

    def new_cache(self, batch_size: int) -> KVCache:
        """An empty KV cache for ``batch_size`` sequences, in the model's device and dtype.

        On the CPU in float32 the cache also carries a copy of the output head transposed to
        (d, V): decoding multiplies one row by that matrix every token, and the CPU's BLAS
        (MKL) runs this product about 2.5x faster with the (d, V) layout than with
        ``nn.Linear``'s (V, d), which dominates a decoding step (``benchmarks/bench_decode.py``).
        The copy lives as long as the cache, one generation; a head with LoRA adapters is
        copied as its merged weight W + (α/r) B A, which its forward computes."""
        check_integer("the cache's batch_size", batch_size)
        cache = KVCache.allocate(self.config, batch_size, self.device, self.dtype)
        head = self.lm_head
        float_head = head.weight.is_floating_point()  # not an int8 head
        if self.device.type == "cpu" and self.dtype == torch.float32 and float_head:
            weight = head.merged_weight() if isinstance(head, LoRALinear) else head.weight
            cache.output_head = weight.t().contiguous()  # (d, V), gradients flowing back
        return cache

    # ------------------------------------------------------------------ forward
    def positions_for(
        self, n_new: int, offset: int, attention_mask: torch.Tensor | None
    ) -> torch.Tensor:
        """Absolute positions of the new tokens: offset..offset+T-1, or, with left padding,
        the count of real tokens before each one (so every row starts at position 0)."""
        if attention_mask is None:
            return torch.arange(offset, offset + n_new, device=self.device)  # (T,)
        positions = attention_mask.long().cumsum(-1) - 1  # (B, offset + T)
        return positions.clamp_min(0)[:, -n_new:]  # (B, T)

    def forward(
        self,
        idx: torch.Tensor,
        targets: torch.Tensor | None = None,
        *,
        kv_cache: KVCache | None = None,
        attention_mask: torch.Tensor | None = None,
        last_only: bool = False,
        label_smoothing: float = 0.0,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """idx: (B, T) token ids -> logits (B, T, V) (or (B, 1, V) with ``last_only``), loss.

        ``targets`` (B, T): next-token ids, -1 to ignore; loss is the mean cross-entropy
        (seed 000 §7) with optional label smoothing α (seed 002 §12.2, eq. 51).
        ``kv_cache``: a :class:`KVCache`; idx then holds only the new tokens (seed 002 §11.2).
        ``attention_mask`` (B, cached length + T): 1 for real tokens, 0 for left padding.
        """
        check_token_ids(idx, self.config.vocab_size)
        B, T = idx.shape
        offset = kv_cache.length if kv_cache is not None else 0
        if targets is not None:
            check_token_ids(targets, self.config.vocab_size, "target", idx.shape, ignore_index=-1)
            check_real("label_smoothing", label_smoothing, 0.0, 1.0)  # (-1 and NaN read as 0)
        if attention_mask is not None:
            check_attention_mask(attention_mask, (B, offset + T))
        if offset + T > self.config.block_size:
            raise ConfigError(
                f"sequence of {offset + T} tokens is longer than the context of "
                f"{self.config.block_size} (block_size)."
            )
        positions = self.positions_for(T, offset, attention_mask)  # (T,) or (B, T)
        x = self.transformer.wte(idx)  # E[tokens]: (B, T, d)
        if "wpe" in self.transformer:
            x = x + self.transformer.wpe(positions)  # + P[positions]
        x = self.transformer.drop(x)
        if "smear" in self.transformer:  # X_0[t] + g_t X_0[t-1]
            previous = kv_cache.previous_embedding if kv_cache is not None else None
            if kv_cache is not None:
                kv_cache.previous_embedding = x[:, -1].detach()
            x = x + self.transformer.smear(x, offset, previous, attention_mask)
        rope = self.rope(positions) if self.rope is not None else None  # cos, sin
        key_padding = attention_mask.bool() if attention_mask is not None else None
        values = self.transformer.wve(idx) if "wve" in self.transformer else None  # E_v[tokens]
        x0 = x  # X_0, which the embedding skip mixes into every layer's input
        for i, block in enumerate(self.transformer.h):
            kwargs = {
                "offset": offset,
                "key_padding": key_padding,
                "rope": rope,
                "cache": kv_cache.layers[i] if kv_cache is not None else None,
                "value_embedding": values,
            }
            if self.config.embedding_skip:
                x = block.x0_gains[0] * x + block.x0_gains[1] * x0  # λ_l X_{l-1} + μ_l X_0
            if self.gradient_checkpointing and self.training:
                # recompute this block's activations in the backward pass (seed 001,
                # "Gradient Checkpointing"): memory O(L) blocks -> O(1) blocks + inputs
                x = activation_checkpoint(
                    block, x, use_reentrant=False, context_fn=recompute_contexts, **kwargs
                )
            else:
                x = block(x, **kwargs)
        if kv_cache is not None:
            kv_cache.length += T
        if "ln_f" in self.transformer:
            x = self.transformer.ln_f(x)
        if last_only and targets is None:
            x = x[:, -1:, :]  # only the next token's distribution is needed
        if kv_cache is not None and kv_cache.output_head is not None:
            logits = x @ kv_cache.output_head  # the same product, faster layout: (B, T, V)
        else:
            logits = self.lm_head(x)  # (B, T, V)
        if self.config.logit_softcap is not None:
            logits = soft_cap(logits, self.config.logit_softcap)  # before loss and sampling
        loss = None
        if targets is not None:
            loss = self.next_token_loss(logits, targets, label_smoothing)
            if self.config.multi_token and self.training and T > 1:
                loss = loss + self.config.mtp_weight * self.token_after_next_loss(
                    x[:, :-1], targets[:, 1:], label_smoothing
                )
        return logits, loss

    @staticmethod
    def next_token_loss(
        logits: torch.Tensor, targets: torch.Tensor, label_smoothing: float, reduction="mean"
    ) -> torch.Tensor:
        """Mean (or ``reduction="sum"``) cross-entropy of ``logits`` (B, T, V) at ``targets``
        (B, T), -1 ignored (seed 000 §7; label smoothing: seed 002 §12.2, eq. 51), in float32
        at least, also when the logits are bf16 / fp16; a CPU training step on bf16 or fp32
        logits takes the same loss from one softmax in their dtype (``nn/softmax_loss.py``)."""
        if softmax_loss_applies(logits, targets, label_smoothing, reduction):  # CPU training
            return softmax_cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))
        loss_dtype = torch.promote_types(logits.dtype, torch.float32)
        return F.cross_entropy(
            logits.reshape(-1, logits.size(-1)).to(loss_dtype),
            targets.reshape(-1),
            ignore_index=-1,
            label_smoothing=label_smoothing,
            reduction=reduction,
        )

    def token_after_next_loss(
        self, hidden: torch.Tensor, targets: torch.Tensor, label_smoothing: float
    ) -> torch.Tensor:
        """Multi-token prediction's second loss (module docstring): the mean cross-entropy of
        z' = (h + W_mtp h) W_U^T at the token after next. hidden: the final hidden states
        h_1..h_{T-1} (B, T-1, d); targets: x_3..x_{T+1} (B, T-1). A batch whose targets are
        all ignored adds 0 (a sum over no tokens), not NaN."""
        ahead = hidden + self.mtp_proj(hidden)  # (B, T-1, d)
        logits = self.lm_head(ahead)  # (B, T-1, V)
        if self.config.logit_softcap is not None:
            logits = soft_cap(logits, self.config.logit_softcap)
        total = self.next_token_loss(logits, targets, label_smoothing, reduction="sum")
        return total / (targets != -1).sum().clamp_min(1)

    @torch.no_grad()
    def attention_maps(self, idx: torch.Tensor) -> list[torch.Tensor]:
        """Attention weights A of every layer for ``idx`` (B, T): a list of (B, nh, T, T),
        computed by the explicit formula."""
        layers = list(self.attention_layers())
        for attn in layers:
            attn.record_weights = True
        try:
            self(idx)
            return [attn.last_weights for attn in layers]
        finally:
            for attn in layers:
                attn.record_weights = False
                attn.last_weights = None


# ---------------------------------------------------------------- input checks


def check_token_ids(
    idx: object,
    vocab_size: int,
    name: str = "token id",
    shape: tuple[int, ...] | None = None,
    ignore_index: int | None = None,
) -> None:
    """SamplingError unless ``idx`` is a (B, T) integer tensor of ids in [0, vocab_size): the
    embedding lookup E[idx] (seed 000 §2) is defined for nothing else. ``name`` says what the
    ids are (token ids, targets, token types); ``shape``, when given, is the (B, T) they must
    have (that of the token ids they go with); ``ignore_index`` is a value allowed besides (a
    target that the loss skips)."""
    if not isinstance(idx, torch.Tensor):
        raise SamplingError(
            f"{name}s must be a torch tensor of shape (B, T), not {type(idx).__name__}."
        )
    if idx.dim() != 2 or (shape is not None and tuple(idx.shape) != tuple(shape)):
        expected = "(B, T)" if shape is None else str(tuple(shape))
        raise SamplingError(f"{name}s must have shape {expected}, got {tuple(idx.shape)}.")
    if shape is None and 0 in idx.shape:  # nothing to compute (rotary cannot reshape it)
        raise SamplingError(
            f"the {name}s are empty (shape {tuple(idx.shape)}): give at least one token."
        )
    if idx.dtype.is_floating_point or idx.dtype.is_complex or idx.dtype == torch.bool:
        raise SamplingError(
            f"{name}s must be integers, got {str(idx.dtype).removeprefix('torch.')}."
        )
    # the embedding takes int64 or int32 ids, the loss int64 targets: int8 holds no vocabulary
    allowed = (torch.int64, torch.int32) if name in ("token id", "token type") else (torch.int64,)
    if idx.dtype not in allowed:
        names = " or ".join(str(dtype).removeprefix("torch.") for dtype in allowed)
        raise SamplingError(
            f"{name}s must be a tensor of {names}, got "
            f"{str(idx.dtype).removeprefix('torch.')}; convert them with .long()."
        )
    if not idx.numel():
        return
    low, high = torch.stack(torch.aminmax(idx)).tolist()  # one pass, one device sync
    if low < 0 and ignore_index is not None:  # the rare path: skipped positions are there
        kept = idx[idx != ignore_index]
        low, high = torch.stack(torch.aminmax(kept)).tolist() if kept.numel() else (0, 0)
    if low < 0 or high >= vocab_size:
        bad = low if low < 0 else high
        table = "the model's vocabulary" if name == "token id" else f"the model's {name}s"
        skip = "" if ignore_index is None else f", or {ignore_index} to skip a position"
        raise SamplingError(
            f"{name} {bad} is outside {table} ({name}s run from 0 to {vocab_size - 1}{skip})."
        )


def check_attention_mask(mask: object, shape: tuple[int, ...]) -> None:
    """SamplingError unless ``mask`` is a tensor of ``shape`` (B, T) holding 1 (or True) on
    real tokens and 0 (False) on padding (seed 003 §4)."""
    if not isinstance(mask, torch.Tensor) or tuple(mask.shape) != tuple(shape):
        got = tuple(mask.shape) if isinstance(mask, torch.Tensor) else type(mask).__name__
        raise SamplingError(
            f"the attention mask must be a tensor of shape {tuple(shape)}, got {got}."
        )
    if mask.numel() and not bool(((mask == 0) | (mask == 1)).all()):
        raise SamplingError("the attention mask must hold only 1 (a real token) and 0 (padding).")
