"""Model configuration, named presets, and the counts of seed 000 §9 / seed 002 §8.1, §11.1.

``ModelConfig`` is the single description of a model that both engines (PyTorch and NumPy)
read, and that a checkpoint stores as ``config.json``.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from light_llm.errors import ConfigError
from light_llm.limits import (
    check_choice,
    check_fits_in_memory,
    check_flag,
    check_integer,
    check_real,
)

POSITIONS = ("learned", "sinusoidal", "rotary", "none")
ANGLED_POSITIONS = ("sinusoidal", "rotary")  # the two that position_base's angles θ_i set
DEFAULT_POSITION_BASE = 10000.0  # the base of the Transformer's sinusoids and of RoFormer's RoPE
NORMS = ("layernorm", "rmsnorm")
ELEMENTWISE_ACTIVATIONS = ("gelu", "gelu_tanh", "relu", "relu2")
ACTIVATIONS = (*ELEMENTWISE_ACTIVATIONS, "swiglu")  # SwiGLU gates one projection by another
BLOCK_ORDERS = ("pre", "post")
ATTENTIONS = ("softmax", "linear")


@dataclass
class ModelConfig:
    """Shape and variant switches of a transformer (seed 000 §1 notation): the GPT's
    (decoder-only, causal) and the base of the encoder's (``models.bert.EncoderConfig``
    adds what only an encoder has).

    vocab_size  V        n_layer  L        n_head  n_h        n_embd  d_model
    block_size  T_max (the context length: GPT-2's n_positions)
    """

    vocab_size: int = 50257
    block_size: int = 1024
    n_layer: int = 6
    n_head: int = 6
    n_embd: int = 384
    dropout: float = 0.0
    bias: bool = True  # biases in Linear layers and LayerNorm, as GPT-2
    tie_embeddings: bool = True  # lm_head.weight is wte.weight (seed 002 §10.2)
    positions: str = "learned"  # learned | sinusoidal | rotary | none
    position_base: float = DEFAULT_POSITION_BASE  # of sinusoidal PE and RoPE (seed 003: 100)
    norm: str = "layernorm"  # layernorm | rmsnorm
    norm_eps: float = 1e-5
    activation: str = "gelu"  # gelu (exact erf) | gelu_tanh | relu | relu2 (ReLU²) | swiglu
    block_order: str = "pre"  # pre-LN (GPT-2, seed 002 §9.1) | post-LN (original Transformer)
    attention: str = "softmax"  # softmax | linear (seed 002 §11.3, causal form)
    n_inner: int | None = None  # FFN hidden width; default 4*d (8d/3 rounded for SwiGLU)
    qk_norm: bool = False  # RMS-normalise q and k per head (no gain) before rotary and Q K^T
    logit_softcap: float | None = None  # c: logits = c tanh(z / c); None = no capping
    mtp_weight: float = 0.0  # w: training loss + w x the loss on the token after next; 0 = off
    value_embeddings: bool = False  # V_l = a_l X W_V + b_l E_v[tokens]: a second token table
    embedding_skip: bool = False  # block l reads λ_l X_{l-1} + μ_l X_0 (learned, from 1 and 0)
    smear: bool = False  # X_0[t] += λ σ(w · X_0[t, :k]) X_0[t-1]: a one-token look-back

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise :class:`ConfigError` with one sentence if this config cannot work: every
        field's type and range first (:mod:`light_llm.limits`), then how they fit together.
        A config from a file is as untrusted as one typed by hand: "0.1" is not a number,
        "no" is not false."""
        for name in ("vocab_size", "block_size", "n_layer", "n_head", "n_embd"):
            check_integer(name, getattr(self, name))
        if self.n_inner is not None:
            check_integer("n_inner", self.n_inner)
        check_real("dropout", self.dropout, 0.0, 1.0, high_open=True)
        check_real("position_base", self.position_base, 1.0, low_open=True)
        check_real("norm_eps", self.norm_eps, 0.0, 1.0, low_open=True)
        if self.logit_softcap is not None:
            check_real("logit_softcap", self.logit_softcap, 0.0, low_open=True)
        check_real("mtp_weight", self.mtp_weight, 0.0)
        flags = ("bias", "tie_embeddings", "qk_norm", "value_embeddings", "embedding_skip", "smear")
        for name in flags:
            check_flag(name, getattr(self, name))
        choices = {
            "positions": POSITIONS,
            "norm": NORMS,
            "activation": ACTIVATIONS,
            "block_order": BLOCK_ORDERS,
            "attention": ATTENTIONS,
        }
        for name, allowed in choices.items():
            check_choice(name, getattr(self, name), allowed)
        if self.n_embd % self.n_head != 0:
            raise ConfigError(
                f"n_embd ({self.n_embd}) must be divisible by n_head ({self.n_head})."
            )
        if self.position_base != DEFAULT_POSITION_BASE and self.positions not in ANGLED_POSITIONS:
            raise ConfigError(
                "position_base sets the angles of rotary and sinusoidal positions, and this "
                f"model's positions are {self.positions}: use --positions rotary, or drop it."
            )
        if self.positions == "rotary" and self.head_dim % 2 != 0:
            raise ConfigError(f"rotary positions need an even head size, got {self.head_dim}.")
        if self.positions == "sinusoidal" and self.n_embd % 2 != 0:
            raise ConfigError(f"sinusoidal positions need an even n_embd, got {self.n_embd}.")

    # ----------------------------------------------------------------- derived sizes
    @property
    def head_dim(self) -> int:
        """d_k = d_v = d_model / n_h (seed 000 §3)."""
        return self.n_embd // self.n_head

    @property
    def ffn_hidden(self) -> int:
        """d_ff: 4 d_model (seed 000 §4), or 8/3 d_model rounded up to a multiple of 8 for
        SwiGLU so that its three matrices hold as many weights as the two of a 4x MLP."""
        if self.n_inner is not None:
            return self.n_inner
        if self.activation == "swiglu":
            return 8 * math.ceil(8 * self.n_embd / 3 / 8)
        return 4 * self.n_embd

    @property
    def multi_token(self) -> bool:
        """Whether the model has the head for the token after next (``mtp_weight`` > 0)."""
        return self.mtp_weight > 0

    # ----------------------------------------------------------------- (de)serialisation
    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelConfig:
        if not isinstance(data, dict):
            raise ConfigError(f"a model config is a JSON object, not {type(data).__name__}.")
        cls.check_keys(data)
        return cls(**data)

    @classmethod
    def check_keys(cls, settings: dict[str, Any]) -> None:
        """ConfigError naming the keys of ``settings`` that are not fields of this config."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(str(key) for key in set(settings) - known)
        if unknown:
            raise ConfigError(
                f"unknown model config keys: {', '.join(unknown)}; the known ones are "
                f"{', '.join(sorted(known))}."
            )

    def replace(self, **changes: Any) -> ModelConfig:
        self.check_keys(changes)
        return dataclasses.replace(self, **changes)


CHAR_BABY = ModelConfig(vocab_size=65, block_size=64, n_layer=4, n_head=4, n_embd=128, dropout=0.0)
CHAR_CPU = CHAR_BABY.replace(
    n_embd=96,
    bias=False,
    tie_embeddings=False,
    positions="rotary",
    norm="rmsnorm",
    activation="relu2",
    qk_norm=True,
    logit_softcap=15.0,
)
PRESETS: dict[str, ModelConfig] = {
    # The seed's model, light_llm.py (seed 000): ~30M parameters with tied embeddings.
    "seed-30m": ModelConfig(
        vocab_size=50257, block_size=1024, n_layer=6, n_head=6, n_embd=384, dropout=0.1
    ),
    # A model that trains in a few minutes on a laptop CPU (nanoGPT's CPU recipe shape).
    "char-baby": CHAR_BABY,
    # nanoGPT's CPU recipe's model: the same shape without biases (nanoGPT's train.py trains
    # with bias=False in its Linear layers and LayerNorms), trained with nanoGPT's CPU recipe
    # (light_llm.train.config.PRESET_RECIPES): light-llm's default before char-cpu.
    "nanogpt-cpu": CHAR_BABY.replace(bias=False),
    # nanoGPT's CPU shape made narrower (96 wide: at equal wall time more steps beat width)
    # with the parts that won the sweep for a 2-core CPU and nanoGPT's CPU recipe's wall time
    # (benchmarks/recipe_sweep.py, docs/recipe.md): rotary positions, RMSNorm,
    # ReLU², QK-norm, an untied head, no biases, soft-capped logits; trained with Muon.
    "char-cpu": CHAR_CPU,
    # The same model over a byte-level BPE of 768 ids (learned from the training split, which
    # sets vocab_size; 768 here sizes the memory check before it): the default before qwen3-cpu.
    "bpe-cpu": CHAR_CPU.replace(vocab_size=768),
    # light-llm's default: bpe-cpu made exportable (issue 26): SwiGLU in place of ReLU² (as
    # many weights per layer: 3 x 96 x 256 = 2 x 96 x 384) and no logit cap, so that
    # `light-llm export` writes it as a Qwen3 folder (its QK-norm is Qwen3's, with unit gains).
    # Trained with bpe-cpu's recipe, it is as good (within 0.01 nats per character both ways
    # on two slices and two seeds, docs/recipe.md). Since round two (issue 25) 2 heads of 48
    # dimensions, not 4 of 24: a step 0.92x as long, and at equal time 0.008 nats per
    # character lower on both 1 MB slices and both seeds (docs/recipe.md); then 3 layers, not
    # 4: a step 0.79x as long, and at equal time 0.010 nats per character lower on the 1 MB
    # slices (three runs of four) and 0.004 on all of Shakespeare (docs/recipe.md, "Three
    # layers at equal time"). Its 768 ids are a small text's: from a large one a run learns 1536
    # (light_llm.train.config.fitted_vocab_size).
    "qwen3-cpu": CHAR_CPU.replace(
        vocab_size=768, activation="swiglu", logit_softcap=None, n_head=2, n_layer=3
    ),
    # nanoGPT's shakespeare-char shape.
    "shakespeare-char": ModelConfig(
        vocab_size=65, block_size=256, n_layer=6, n_head=6, n_embd=384, dropout=0.2
    ),
    # GPT-2 small (124M), with GPT-2's tanh GELU so HuggingFace weights load unchanged.
    "gpt2-124m": ModelConfig(
        vocab_size=50257,
        block_size=1024,
        n_layer=12,
        n_head=12,
        n_embd=768,
        dropout=0.0,
        activation="gelu_tanh",
    ),
}


def preset(name: str, **overrides: Any) -> ModelConfig:
    """Return a copy of the named preset with ``overrides`` applied."""
    if not isinstance(name, str) or name not in PRESETS:
        raise ConfigError(f"unknown preset {name!r}; known presets: {', '.join(PRESETS)}.")
    return PRESETS[name].replace(**overrides)


# --------------------------------------------------------------------------- counting
@dataclass
class ModelCounts:
    """Parameter, FLOP and memory counts of a config at a given context length."""

    params: int  # every trainable parameter (a tied matrix counted once)
    params_embedding: int  # token table + learned position table (+ value embedding table)
    params_non_embedding: int
    flops_forward_per_token: int
    flops_train_per_token: int
    context: int
    kv_cache_bytes: int  # per sequence, at `context` tokens (linear attention: its state)
    attention_matrix_bytes: int  # one layer's n_h x T x T scores, per sequence
    activation_bytes: int  # L x T x d_model residual stream, per sequence
    bytes_per_value: int
    per_layer: dict[str, int] = field(default_factory=dict)


SMEAR_WIDTH = 12  # the smear's gate reads the first k = min(12, d) features of a token


def smear_width(config: ModelConfig) -> int:
    """k = min(12, d_model): how many of a token's features the smear's gate reads."""
    return min(SMEAR_WIDTH, config.n_embd)


def count_parameters(config: ModelConfig) -> dict[str, int]:
    """Exact parameter count by component (seed 002 §8.1: 4 d^2 per attention layer + biases).

    Per layer: attention W^QKV (d x 3d) and W^O (d x d); FFN W_1 (d x d_ff), W_2 (d_ff x d)
    and, for SwiGLU, the gate V (d x d_ff); two norms. Plus the token table E (V x d), the
    learned position table P (T_max x d), the final norm (pre-LN only), an untied head, the
    multi-token projection W_mtp (d x d, with ``mtp_weight`` > 0), with value embeddings
    their table E_v (V x d) and two gains a_l, b_l per layer, and with the smear its gate
    w (k = min(12, d) weights) and its gain λ.
    """
    d, d_ff, b = config.n_embd, config.ffn_hidden, int(config.bias)
    norm_params = d * (2 if (config.norm == "layernorm" and config.bias) else 1)
    value_gains = 2 if config.value_embeddings else 0  # a_l, b_l
    attention = d * 3 * d + 3 * d * b + d * d + d * b + value_gains
    n_ffn_in = 2 if config.activation == "swiglu" else 1
    ffn = n_ffn_in * (d * d_ff + d_ff * b) + d_ff * d + d * b
    skip_gains = 2 if config.embedding_skip else 0  # λ_l, μ_l
    per_layer = attention + ffn + 2 * norm_params + skip_gains
    token_table = config.vocab_size * d
    position_table = config.block_size * d if config.positions == "learned" else 0
    head = 0 if config.tie_embeddings else config.vocab_size * d
    final_norm = norm_params if config.block_order == "pre" else 0  # post-LN ends normalised
    mtp = d * d if config.multi_token else 0
    value_table = config.vocab_size * d if config.value_embeddings else 0
    smear = smear_width(config) + 1 if config.smear else 0  # w (k,) and λ
    return {
        "token_embedding": token_table,
        "position_embedding": position_table,
        "attention_per_layer": attention,
        "ffn_per_layer": ffn,
        "norms_per_layer": 2 * norm_params,
        "skip_per_layer": skip_gains,
        "layers": config.n_layer * per_layer,
        "final_norm": final_norm,
        "lm_head_untied": head,
        "mtp_head": mtp,
        "value_embedding": value_table,
        "smear": smear,
        "total": token_table
        + smear
        + position_table
        + value_table
        + config.n_layer * per_layer
        + final_norm
        + head
        + mtp,
    }


def check_buildable(
    config: object, config_class: type | None = None, bytes_per_value: int = 4
) -> None:
    """ConfigError unless ``config`` is a valid ``config_class`` (default :class:`ModelConfig`)
    whose model fits in memory (:func:`check_model_fits`): what every model constructor of
    both engines checks before it allocates anything."""
    config_class = config_class or ModelConfig
    if not isinstance(config, config_class):
        raise ConfigError(
            f"a model is built from a {config_class.__name__} (e.g. light_llm.preset(...)), "
            f"not from {type(config).__name__}."
        )
    config.validate()
    check_model_fits(config, bytes_per_value)


def check_model_fits(
    config: ModelConfig,
    bytes_per_value: int = 4,
    settings: str = "vocab_size, n_layer, n_embd or block_size",
) -> None:
    """ConfigError, before anything is allocated, when the weights of a model of ``config``
    (:func:`count_parameters`, ``bytes_per_value`` each) and its sinusoidal or rotary tables
    (built in float64) would not fit the machine's free memory; the message names
    ``settings``, those to lower."""
    n_params = count_parameters(config)["total"]
    tables = 0
    if config.positions in ("sinusoidal", "rotary"):
        tables = 2 * 8 * config.block_size * config.n_embd
    check_fits_in_memory(
        n_params * bytes_per_value + tables,
        f"a model of {n_params:,} parameters ({config.n_layer} layers, {config.n_embd} wide, "
        f"{config.vocab_size:,} tokens, context {config.block_size:,})",
        f"choose a smaller {settings}",
    )


def batch_memory_bytes(
    config: ModelConfig, batch_size: int, context: int | None = None, training: bool = False
) -> int:
    """An estimate of the memory one forward pass of ``batch_size`` sequences of ``context``
    tokens (default T_max) takes, float32, beyond the weights: the logits and their softmax,
    3 B T V values, and one layer's activations, B T (6 d + d_ff + n_h T); when ``training``,
    every layer's activations are kept for the backward pass (seed 002 §11.1's counts)."""
    T = config.block_size if context is None else context
    d, heads = config.n_embd, config.n_head
    scores = heads * T if config.attention == "softmax" else 0
    per_layer = batch_size * T * (6 * d + config.ffn_hidden + scores)
    layers = config.n_layer * per_layer if training else per_layer
    return 4 * (3 * batch_size * T * config.vocab_size + layers)


def check_batch_fits(
    config: ModelConfig,
    batch_size: int,
    context: int | None = None,
    training: bool = False,
    setting: str = "--batch-size",
    context_setting: str = "--block-size",
) -> None:
    """ConfigError, before anything is allocated, when a batch of ``batch_size`` sequences
    (:func:`batch_memory_bytes`) would not fit the machine's free memory; the message names
    ``setting``, the option to lower, or ``context_setting`` when one sequence alone would
    not fit."""
    T = context or config.block_size
    check_fits_in_memory(
        batch_memory_bytes(config, 1, context, training),
        f"one sequence of {T:,} tokens",
        f"give a smaller {context_setting}",
    )
    check_fits_in_memory(
        batch_memory_bytes(config, batch_size, context, training),
        f"a batch of {batch_size:,} sequences of {T:,} tokens",
        f"give a smaller {setting}",
    )


def block_matrix_weights(config: ModelConfig) -> int:
    """The weights of the blocks' matrix products, each used once per token in the forward
    pass: L (4 d² + k d d_ff), W^QKV and W^O, then W_1, W_2 (and SwiGLU's V: k = 3, else 2)."""
    d = config.n_embd
    ffn_matrices = 3 if config.activation == "swiglu" else 2
    return config.n_layer * (4 * d * d + ffn_matrices * d * config.ffn_hidden)


def model_counts(
    config: ModelConfig, context: int | None = None, bytes_per_value: int = 4
) -> ModelCounts:
    """Counts of seed 000 §9 and seed 002 §11.1 at ``context`` tokens (default T_max).

    FLOPs per token, forward (a multiply-add is 2 FLOPs):
        2 N_matmul                 every weight in a matrix product is used once
      + 2 L T d_model (softmax)    QK^T and A V: each token attends to T keys, 2 x 2 x T x d / 2
                                   averaged over causal positions (T/2 keys each), i.e.
                                   4 L d (T/2) = 2 L T d
      + 2 V d_model                the output head (tied or not)
    Training is 3x the forward (backward ~ 2x forward), the usual 6N + attention estimate,
    plus, with multi-token prediction, 3x the second head's forward (2 d_model^2 + 2 V d_model).
    """
    T = config.block_size if context is None else int(context)
    if T < 1:
        raise ConfigError(f"context must be at least 1 token, got {T}.")
    parts = count_parameters(config)
    d, L = config.n_embd, config.n_layer
    embedding = parts["token_embedding"] + parts["position_embedding"] + parts["value_embedding"]
    matmul_weights = (
        block_matrix_weights(config)
        + config.vocab_size * d
        + (smear_width(config) if config.smear else 0)  # the smear's gate w · x[:k]
    )
    if config.attention == "softmax":
        attention_flops = 2 * L * T * d  # causal average of 4 L d (T/2)
    else:  # linear attention keeps a d_k x d_v state per head: 4 L d d_k per token
        attention_flops = 4 * L * d * config.head_dim
    forward = 2 * matmul_weights + attention_flops
    mtp_forward = 2 * (d * d + config.vocab_size * d) if config.multi_token else 0
    kv = 2 * L * T * d * bytes_per_value  # K and V of every layer, T tokens (seed 002 §11.2)
    attention_matrix = config.n_head * T * T * bytes_per_value
    if config.attention == "linear":
        # no T x T matrix and no growing cache: per layer and head the running state
        # S = Σ φ(k) v^T (d_k x d_v) and z = Σ φ(k) (d_k), whatever T is (seed 002 §11.3)
        hs = config.head_dim
        kv = L * config.n_head * (hs * hs + hs) * bytes_per_value
        attention_matrix = config.n_head * hs * hs * bytes_per_value
    return ModelCounts(
        params=parts["total"],
        params_embedding=embedding,
        params_non_embedding=parts["total"] - embedding,
        flops_forward_per_token=forward,
        flops_train_per_token=3 * forward + 3 * mtp_forward,
        context=T,
        kv_cache_bytes=kv,
        attention_matrix_bytes=attention_matrix,
        activation_bytes=L * T * d * bytes_per_value,
        bytes_per_value=bytes_per_value,
        per_layer={k: v for k, v in parts.items() if k.endswith("per_layer")},
    )
