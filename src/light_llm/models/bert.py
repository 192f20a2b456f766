"""The BERT-style encoder: bidirectional post-LN blocks, pooling, and a masked-LM head.

    X_0 = Dropout(LN(E[tokens] + P[positions] + S[token types]))   (learned positions: seed 001
                                                                    "Learned Position Embeddings
                                                                    (BERT)"; seed 003 §4 types)
    X_l = Block_l(X_{l-1}), post-LN, no causal mask                 (seed 001 "For BERT: No
                                                                    masking"; seed 002 §15.3)
    sentence embedding = normalise(Σ_t m_t X_L[t] / Σ_t m_t)        (masked mean; seed 002 §6.1)
    MLM logits = LN(GELU(X_L W_t + b_t)) E^T + b                    (tied head; seed 003 §29,
                                                                    seed 002 §10.2 eq. 43)

The blocks are the GPT's own (:class:`light_llm.nn.blocks.Block`) built with ``causal=False``
and ``block_order="post"``: only the mask and the order of the residual and the norm differ.
Padding is masked through ``SelfAttention``'s ``key_padding``, so a real token never attends
to a [PAD].
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint as activation_checkpoint

from light_llm.config import (
    ELEMENTWISE_ACTIVATIONS,
    ModelConfig,
    block_matrix_weights,
    check_buildable,
    count_parameters,
)
from light_llm.errors import CheckpointError, ConfigError, TokenizerError
from light_llm.limits import check_choice, check_flag, check_integer
from light_llm.models.gpt import GPT, check_attention_mask, check_token_ids
from light_llm.nn.attention import recompute_contexts
from light_llm.nn.blocks import Block
from light_llm.nn.feedforward import activation_fn
from light_llm.nn.linear import Linear
from light_llm.nn.norms import build_norm
from light_llm.nn.positions import RotaryTables, SinusoidalPositions

IGNORE_INDEX = -1  # label of a position the MLM loss skips (the GPT's targets use -1 too)
POOLINGS = ("mean", "cls")


@dataclass
class EncoderConfig(ModelConfig):
    """A :class:`ModelConfig` for the encoder, with BERT's defaults and two more fields.

    Defaults are the shape of all-MiniLM-L6-v2 (6 layers, 12 heads, 384 wide, 512 positions,
    the 30522-token uncased WordPiece vocabulary), post-LN with LayerNorm ε = 1e-12 and exact
    GELU, as BERT.

    type_vocab_size  number of token types (segments): 2, sentence A and sentence B (seed 003 §4)
    mlm_head         whether the model has the masked-LM head (a sentence-embedding checkpoint
                     such as MiniLM ships without one)
    head_activation  the non-linearity of the masked-LM head's transform: exact GELU, as BERT
                     (seed 003 §29); a HuggingFace checkpoint's is its ``hidden_act``, which
                     transformers applies in the head as in the blocks
    """

    vocab_size: int = 30522
    block_size: int = 512
    n_layer: int = 6
    n_head: int = 12
    n_embd: int = 384
    dropout: float = 0.1
    norm_eps: float = 1e-12
    block_order: str = "post"
    type_vocab_size: int = 2
    mlm_head: bool = True
    head_activation: str = "gelu"

    def validate(self) -> None:
        super().validate()
        check_integer("type_vocab_size", self.type_vocab_size)
        check_flag("mlm_head", self.mlm_head)
        check_choice("head_activation", self.head_activation, ELEMENTWISE_ACTIVATIONS)
        if self.attention != "softmax":
            raise ConfigError(
                "light-llm's linear attention is the causal form; the encoder needs softmax."
            )
        if self.logit_softcap is not None:
            raise ConfigError("logit soft-capping is a GPT option; the encoder has none.")
        if self.embedding_skip:
            raise ConfigError(
                "the embedding skip is a GPT option (every block reads λ x + μ x_0); the "
                "encoder has none."
            )
        if self.smear:
            raise ConfigError(
                "the smear is a GPT option (each token's embedding looks back at the previous "
                "one's, which a bidirectional encoder has no order for); the encoder has none."
            )
        if self.value_embeddings:
            raise ConfigError(
                "value embeddings are a GPT option (a second token table in every layer's "
                "values); the encoder has none."
            )
        if self.mtp_weight != 0:
            raise ConfigError(
                "multi-token prediction (mtp_weight) predicts the token after next, a GPT "
                "option; the encoder predicts masked tokens, and has none."
            )


ENCODER_PRESETS: dict[str, EncoderConfig] = {
    # The shape of sentence-transformers' all-MiniLM-L6-v2 (22.7M parameters), no MLM head.
    "minilm-l6": EncoderConfig(mlm_head=False),
    # A small encoder that learns masked-LM on the Shakespeare corpus in minutes on a laptop
    # CPU: BERT's post-LN blocks with rotary positions, which learn where the neighbours are
    # far sooner than learned positions do (val MLM loss 5.75 vs 6.23 after 300 steps of 32
    # x 64 tokens; with sinusoidal positions it had not left the unigram loss by then).
    "bert-shakespeare": EncoderConfig(
        block_size=64, n_layer=4, n_head=4, n_embd=256, dropout=0.0, positions="rotary"
    ),
}


def encoder_preset(name: str, **overrides: Any) -> EncoderConfig:
    """A copy of the named encoder preset with ``overrides`` applied."""
    if not isinstance(name, str) or name not in ENCODER_PRESETS:
        raise ConfigError(
            f"unknown encoder preset {name!r}; known presets: {', '.join(ENCODER_PRESETS)}."
        )
    return ENCODER_PRESETS[name].replace(**overrides)


def encoder_counts(
    config: EncoderConfig, context: int | None = None, bytes_per_value: int = 4
) -> dict[str, Any]:
    """Parameters, FLOPs per token and memory of the encoder ``config`` at ``context`` tokens
    (default T_max), from the config alone (seed 000 §9, seed 003 §29).

    Parameters: the blocks as the GPT's (:func:`light_llm.config.count_parameters`: 4d² +
    biases of attention, the FFN, two norms per layer), the embeddings' tables E (V x d),
    P (T_max x d, learned positions only) and S (n_types x d) and their norm, a final norm
    (pre-LN only), and the masked-LM head: W_t (d x d) + b_t, a norm, the output bias b (V)
    and, untied, its own V x d matrix.

    FLOPs per token, forward, every token through the head (a multiply-add is 2 FLOPs):
        2 N_matmul                 L (4 d² + k d d_ff) in the blocks (k = 3 for SwiGLU, else
                                   2), d² + V d in the head
      + 4 L T d (softmax)          QK^T and A V over all T keys: no causal mask halves them
    Training is 3x the forward (backward ~ 2x); the trainer sends only the chosen tokens
    (15%) through the head, so its step costs less than this by 3 x 0.85 x 2 (d² + V d).
    Memory per sequence: the weights, one layer's n_h T² attention matrix, the L T d
    residual stream; an encoder keeps no KV cache."""
    T = config.block_size if context is None else int(context)
    if T < 1:
        raise ConfigError(f"context must be at least 1 token, got {T}.")
    d, L, V, b = config.n_embd, config.n_layer, config.vocab_size, int(config.bias)
    gpt = count_parameters(config)  # the blocks, E, P, one norm and an untied V x d matrix
    norm = gpt["norms_per_layer"] // 2
    tables = {
        "token_embedding": gpt["token_embedding"],
        "position_embedding": gpt["position_embedding"],
        "type_embedding": config.type_vocab_size * d,
        "embedding_norm": norm,
    }
    head = {
        "transform": d * d + d * b if config.mlm_head else 0,
        "head_norm": norm if config.mlm_head else 0,
        "output_bias": V * b if config.mlm_head else 0,
        "decoder_untied": gpt["lm_head_untied"] if config.mlm_head else 0,
    }
    total = sum(tables.values()) + gpt["layers"] + gpt["final_norm"] + sum(head.values())
    matmul = block_matrix_weights(config) + (d * d + V * d if config.mlm_head else 0)
    forward = 2 * matmul + 4 * L * T * d
    embedding = tables["token_embedding"] + tables["position_embedding"] + tables["type_embedding"]
    return {
        "parameters": {
            "total": total,
            "embedding": embedding,
            "non_embedding": total - embedding,
            **tables,
            "attention_per_layer": gpt["attention_per_layer"],
            "ffn_per_layer": gpt["ffn_per_layer"],
            "norms_per_layer": gpt["norms_per_layer"],
            "layers": gpt["layers"],
            "final_norm": gpt["final_norm"],
            **head,
        },
        "flops_per_token": {"forward": forward, "training": 3 * forward},
        "context": T,
        "memory_bytes_per_sequence": {
            "weights": total * bytes_per_value,
            "attention_matrix_per_layer": config.n_head * T * T * bytes_per_value,
            "attention_matrices_all_layers": L * config.n_head * T * T * bytes_per_value,
            "activations": L * T * d * bytes_per_value,
        },
    }


class EncoderEmbeddings(nn.Module):
    """X_0 = Dropout(LN(E[tokens] + P[positions] + S[token types])).

    E (V, d): the token table (seed 002 §10.2, eq. 42); P (T_max, d): learned positions (seed
    001 "Learned Position Embeddings (BERT)"), or sinusoidal, or none; S (n_types, d): one
    vector for sentence A, one for sentence B (the token type ids of seed 003 §4).
    """

    def __init__(self, config: EncoderConfig) -> None:
        super().__init__()
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)  # E
        if config.positions == "learned":
            self.wpe = nn.Embedding(config.block_size, config.n_embd)  # P
        elif config.positions == "sinusoidal":
            self.wpe = SinusoidalPositions(config.block_size, config.n_embd, config.position_base)
        else:
            self.wpe = None
        self.wtt = nn.Embedding(config.type_vocab_size, config.n_embd)  # S
        self.ln = build_norm(config)
        self.drop = nn.Dropout(config.dropout)

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor) -> torch.Tensor:
        x = self.wte(input_ids) + self.wtt(token_type_ids)  # (B, T, d)
        if self.wpe is not None:
            positions = torch.arange(input_ids.size(1), device=input_ids.device)  # (T,)
            x = x + self.wpe(positions)
        return self.drop(self.ln(x))


class MaskedLMHead(nn.Module):
    """BERT's prediction head: logits = LN(GELU(h W_t + b_t)) E^T + b (seed 003 §29), with
    ``config.head_activation`` in place of GELU where a checkpoint names another.

    The decoder shares the token table E with the embeddings (weight tying, seed 002 §10.2,
    eq. 43) unless ``tie_embeddings`` is False; the output bias b is its own.
    """

    def __init__(self, config: EncoderConfig, token_table: nn.Embedding) -> None:
        super().__init__()
        self.dense = Linear(config.n_embd, config.n_embd, bias=config.bias)  # W_t, b_t
        self.activation = config.head_activation
        self.ln = build_norm(config)
        self.decoder = Linear(config.n_embd, config.vocab_size, bias=config.bias)  # E^T, b
        if config.tie_embeddings:
            self.decoder.weight = token_table.weight

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:  # (..., d) -> (..., V)
        return self.decoder(self.ln(activation_fn(self.activation, self.dense(hidden))))


class BertEncoder(nn.Module):
    """A BERT-style encoder built from an :class:`EncoderConfig`.

    ``forward(input_ids, labels=None, *, attention_mask=None, token_type_ids=None)`` returns
    ``(output, loss)`` as the GPT does, so the same trainer drives both: ``output`` is the
    MLM logits (B, T, V), or the hidden states (B, T, d) for a model without an MLM head.
    With ``labels`` (B, T) (token ids at the chosen positions, :data:`IGNORE_INDEX` elsewhere)
    only the chosen positions go through the head: ``output`` is then their logits (N, V), in
    row-major order of the chosen positions, and ``loss`` their mean cross-entropy
    (:func:`masked_lm_loss`, with optional ``label_smoothing``).
    """

    def __init__(self, config: EncoderConfig) -> None:
        check_buildable(config, EncoderConfig)
        super().__init__()
        self.config = config
        self.embeddings = EncoderEmbeddings(config)
        self.h = nn.ModuleList(Block(config, causal=False) for _ in range(config.n_layer))
        self.rope = None  # rotary positions turn q and k in every layer (seed 001, seed 002 §8.2)
        if config.positions == "rotary":
            self.rope = RotaryTables(config.block_size, config.head_dim, config.position_base)
        # pre-LN blocks leave the residual stream unnormalised: a final norm, as the GPT's
        self.ln_f = build_norm(config) if config.block_order == "pre" else None
        self.mlm_head = MaskedLMHead(config, self.embeddings.wte) if config.mlm_head else None
        self.gradient_checkpointing = False  # recompute block activations in the backward
        self.apply(GPT._init_weights)  # N(0, 0.02), zero biases (seed 000 §10)

    # ------------------------------------------------------------------ properties
    @property
    def device(self) -> torch.device:
        return self.embeddings.wte.weight.device

    def num_parameters(self) -> int:
        """Trainable parameters, the tied token table counted once."""
        return sum(p.numel() for p in self.parameters())

    def use_fast_attention(self, enabled: bool = True) -> None:
        """Switch every layer between the fused kernel and the explicit formula."""
        for block in self.h:
            block.attn.use_fast = enabled

    # ------------------------------------------------------------------ forward
    def encode(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """The contextual vectors X_L (B, T, d) of ``input_ids`` (B, T).

        ``attention_mask`` (B, T): 1 on real tokens, 0 on [PAD] (seed 003 §4); None means all
        real. ``token_type_ids`` (B, T): 0 for sentence A, 1 for B; None means all 0.
        """
        check_token_ids(input_ids, self.config.vocab_size)
        T = input_ids.size(1)
        if attention_mask is not None:
            check_attention_mask(attention_mask, input_ids.shape)
        if token_type_ids is not None:
            check_token_ids(
                token_type_ids, self.config.type_vocab_size, "token type", input_ids.shape
            )
        if T > self.config.block_size:
            raise ConfigError(
                f"sequence of {T} tokens is longer than the encoder's {self.config.block_size} "
                "positions (block_size)."
            )
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        x = self.embeddings(input_ids, token_type_ids)  # (B, T, d)
        key_padding = None
        if attention_mask is not None and not bool(attention_mask.all()):
            key_padding = attention_mask.bool()  # (B, T)
        rope = None if self.rope is None else self.rope(torch.arange(T, device=input_ids.device))
        for block in self.h:
            if self.gradient_checkpointing and self.training:
                # seed 001, "Gradient Checkpointing": keep each block's input, recompute the rest
                x = activation_checkpoint(
                    block,
                    x,
                    use_reentrant=False,
                    context_fn=recompute_contexts,
                    key_padding=key_padding,
                    rope=rope,
                )
            else:
                x = block(x, key_padding=key_padding, rope=rope)
        return x if self.ln_f is None else self.ln_f(x)

    def forward(
        self,
        input_ids: torch.Tensor,
        labels: torch.Tensor | None = None,
        *,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        label_smoothing: float = 0.0,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        hidden = self.encode(input_ids, attention_mask, token_type_ids)  # (B, T, d)
        if labels is not None:
            check_token_ids(labels, self.config.vocab_size, "label", input_ids.shape, IGNORE_INDEX)
        if self.mlm_head is None:
            if labels is not None:
                raise ConfigError(
                    "this encoder has no masked-LM head, so it cannot be trained on MLM labels."
                )
            return hidden, None
        if labels is None:
            return self.mlm_head(hidden), None  # (B, T, V)
        chosen = labels != IGNORE_INDEX  # (B, T)
        logits = self.mlm_head(hidden[chosen])  # (N, V)
        return logits, masked_lm_loss(logits, labels[chosen], label_smoothing)

    @torch.no_grad()
    def attention_maps(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None
    ) -> list[torch.Tensor]:
        """Attention weights A of every layer, a list of (B, nh, T, T), by the explicit formula."""
        layers = [block.attn for block in self.h]
        for attn in layers:
            attn.record_weights = True
        try:
            self.encode(input_ids, attention_mask)
            return [attn.last_weights for attn in layers]
        finally:
            for attn in layers:
                attn.record_weights = False
                attn.last_weights = None


def masked_lm_loss(
    logits: torch.Tensor, targets: torch.Tensor, label_smoothing: float = 0.0
) -> torch.Tensor:
    """Mean cross-entropy -(1/N) Σ_i log softmax(logits_i)[target_i] over the N chosen
    positions only (seed 003 §29; seed 000 §7), optionally label-smoothed (seed 002 §12.2,
    eq. 51). With nothing chosen there is nothing to learn and the loss is 0 (still part of
    the graph, so backward works)."""
    if targets.numel() == 0:
        return logits.sum() * 0.0
    return F.cross_entropy(logits.float(), targets, label_smoothing=label_smoothing)


# ---------------------------------------------------------------------- pooling
def mean_pool(hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Masked mean over the real tokens: u = Σ_t m_t h_t / Σ_t m_t (padding ignored).

    hidden (B, T, d), attention_mask (B, T) of 1/0 -> (B, d)."""
    weights = attention_mask.to(hidden.dtype).unsqueeze(-1)  # (B, T, 1)
    return (hidden * weights).sum(1) / weights.sum(1).clamp_min(1.0)


def cls_pool(hidden: torch.Tensor) -> torch.Tensor:
    """The vector of the [CLS] token, the first position: (B, T, d) -> (B, d)."""
    return hidden[:, 0]


def l2_normalize(vectors: torch.Tensor) -> torch.Tensor:
    """u / ||u||_2 on the last dimension, so that u·v is the cosine similarity (seed 002 §6.1)."""
    return F.normalize(vectors, p=2.0, dim=-1)


def cosine_similarity_matrix(vectors: torch.Tensor) -> torch.Tensor:
    """cos(u_i, u_j) = u_i^T u_j / (||u_i||_2 ||u_j||_2) for every pair (seed 002 §6.1): (N, N)."""
    unit = l2_normalize(vectors)
    return unit @ unit.T


def pool(hidden: torch.Tensor, attention_mask: torch.Tensor, pooling: str) -> torch.Tensor:
    """Pool (B, T, d) hidden states to (B, d) sentence vectors: "mean" or "cls"."""
    if pooling == "mean":
        return mean_pool(hidden, attention_mask)
    if pooling == "cls":
        return cls_pool(hidden)
    raise ConfigError(f"pooling must be one of {', '.join(POOLINGS)}, got {pooling!r}.")


@torch.inference_mode()
def embed_sentences(
    model: BertEncoder,
    tokenizer,
    sentences: Sequence[str],
    max_length: int = 256,
    batch_size: int = 32,
    pooling: str = "mean",
    normalize: bool = True,
) -> torch.Tensor:
    """Sentence embeddings (N, d), in the order of ``sentences``.

    The all-MiniLM-L6-v2 recipe: WordPiece with [CLS]/[SEP], truncated to ``max_length``
    (256 for that model), the encoder, the masked mean over real tokens, L2 normalisation.
    Sentences are encoded in batches of similar token counts (sorted longest first) so that
    little compute goes to padding; each batch is padded to its longest.
    """
    check_integer("batch_size", batch_size)
    if pooling not in POOLINGS:
        raise ConfigError(f"pooling must be one of {', '.join(POOLINGS)}, got {pooling!r}.")
    max_length = min(max_length, model.config.block_size)
    lengths = [len(ids) for ids in tokenizer.batch_encode_plus(sentences, max_length)["input_ids"]]
    order = sorted(range(len(sentences)), key=lambda i: -lengths[i])
    vectors = torch.empty(len(sentences), model.config.n_embd)
    for start in range(0, len(order), batch_size):
        indices = order[start : start + batch_size]
        batch = tokenizer.batch_encode_plus(
            [sentences[i] for i in indices], max_length=max_length, padding="longest"
        )
        inputs = {key: torch.tensor(value, device=model.device) for key, value in batch.items()}
        hidden = model.encode(**inputs)  # (b, T, d)
        pooled = pool(hidden, inputs["attention_mask"], pooling)  # (b, d)
        vectors[indices] = (l2_normalize(pooled) if normalize else pooled).float().cpu()
    return vectors


class Candidate(NamedTuple):
    """One prediction for a [MASK]: the token, its id and its probability."""

    token: str
    id: int
    probability: float


@torch.inference_mode()
def tokens_left_out(tokenizer, text: str, text_pair: str | None, max_length: int) -> int:
    """How many tokens of ``text`` (and ``text_pair``) with [CLS]/[SEP] lie beyond
    ``max_length``, which :meth:`BertTokenizer.encode_plus` cuts off (0 when all fit)."""
    specials = 2 if text_pair is None else 3  # [CLS] A [SEP] (B [SEP])
    pair = 0 if text_pair is None else len(tokenizer.encode(text_pair))
    return max(0, len(tokenizer.encode(text)) + pair + specials - max_length)


def predict_masked(
    model: BertEncoder,
    tokenizer,
    text: str,
    text_pair: str | None = None,
    top_k: int = 5,
) -> list[list[Candidate]]:
    """For each [MASK] of ``text`` (and ``text_pair``), left to right, the ``top_k`` most
    probable tokens under the MLM head, P = softmax(logits) at that position (seed 003 §29).

    Each [MASK] is predicted from the same input (the others stay masked), as BERT sees it.
    """
    if model.mlm_head is None:
        raise CheckpointError(
            "this encoder has no masked-LM head (a sentence-embedding model such as MiniLM "
            "ships without one), so it cannot fill in [MASK]; train one with light-llm train "
            "--model bert."
        )
    check_integer("top_k", top_k)
    encoding = tokenizer.encode_plus(text, text_pair, max_length=model.config.block_size)
    ids = encoding["input_ids"]
    positions = [i for i, token_id in enumerate(ids) if token_id == tokenizer.mask_id]
    if not positions:
        written = "[MASK]" in text or "[MASK]" in (text_pair or "")
        raise TokenizerError(
            f"every [MASK] lies beyond the model's {model.config.block_size} positions."
            if written
            else "the text has no [MASK] to fill in: write [MASK] where a word should go."
        )
    written = text.count("[MASK]") + (text_pair or "").count("[MASK]")
    if written > len(positions):
        raise TokenizerError(
            f"the text has {written} [MASK]s but only the first {len(positions)} fit in the "
            f"model's {model.config.block_size} positions; shorten the text or fill in fewer."
        )
    inputs = torch.tensor([ids], device=model.device)
    types = torch.tensor([encoding["token_type_ids"]], device=model.device)
    logits, _ = model(inputs, token_type_ids=types)  # (1, T, V)
    probabilities = torch.softmax(logits[0, positions].float(), dim=-1)  # (n_masks, V)
    top = probabilities.topk(min(top_k, probabilities.size(-1)), dim=-1)
    return [
        [
            Candidate(token, token_id, probability)
            for token, token_id, probability in zip(
                tokenizer.tokens(row_ids), row_ids, row_probabilities, strict=True
            )
        ]
        for row_ids, row_probabilities in zip(
            top.indices.tolist(), top.values.tolist(), strict=True
        )
    ]
