"""HuggingFace BERT folders -> the light-llm encoder (:class:`light_llm.models.bert.BertEncoder`).

A HuggingFace BERT keeps query, key and value as three matrices and names each sub-layer after
its place in the original code; light-llm keeps one fused W^QKV, as the GPT does. Per layer i:

    encoder.layer.i.attention.self.{query,key,value}   -> h.i.attn.c_attn   (rows q | k | v)
    encoder.layer.i.attention.output.dense             -> h.i.attn.c_proj   (W^O)
    encoder.layer.i.attention.output.LayerNorm         -> h.i.ln_1          (post-LN)
    encoder.layer.i.intermediate.dense                 -> h.i.mlp.c_fc      (W_1)
    encoder.layer.i.output.dense                       -> h.i.mlp.c_proj    (W_2)
    encoder.layer.i.output.LayerNorm                   -> h.i.ln_2
    embeddings.{word,position,token_type}_embeddings   -> embeddings.{wte,wpe,wtt}
    embeddings.LayerNorm                               -> embeddings.ln
    cls.predictions.transform.{dense,LayerNorm}, .bias -> mlm_head.{dense,ln}, decoder.bias

Both use the nn.Linear layout (out, in), so no matrix is transposed. Keys may carry the
``bert.`` prefix of BertForMaskedLM. The pooler (a dense + tanh over [CLS] trained for next
sentence prediction) and the next-sentence head are not part of the encoder and are left out.
Only safetensors weights are read: a pickled ``pytorch_model.bin`` can run code when loaded.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import partial
from pathlib import Path

import torch

from light_llm.checkpoints.encoder import load_state, stored_shapes
from light_llm.checkpoints.folder import HF_ENCODER_MODEL_TYPES, WEIGHTS_FILE, read_config_json
from light_llm.checkpoints.header import (
    StoredTensor,
    check_stored_tensors,
    stack_rows,
    stored_tensors,
)
from light_llm.checkpoints.tensors import read_weights
from light_llm.errors import CheckpointError
from light_llm.models.bert import BertEncoder, EncoderConfig
from light_llm.tokenizers.bert import packaged_bert_folder as packaged_minilm_path
from light_llm.untrusted import read_json_object

__all__ = ["encoder_config_from_hf", "load_hf_bert", "packaged_minilm_path", "state_from_hf"]

HF_ACTIVATIONS = {
    "gelu": "gelu",
    "gelu_new": "gelu_tanh",
    "gelu_pytorch_tanh": "gelu_tanh",
    "relu": "relu",
}
LAYER_PARTS = {
    "attention.output.dense": "attn.c_proj",
    "attention.output.LayerNorm": "ln_1",
    "intermediate.dense": "mlp.c_fc",
    "output.dense": "mlp.c_proj",
    "output.LayerNorm": "ln_2",
}
EMBEDDING_PARTS = {
    "embeddings.word_embeddings": "embeddings.wte",
    "embeddings.position_embeddings": "embeddings.wpe",
    "embeddings.token_type_embeddings": "embeddings.wtt",
    "embeddings.LayerNorm": "embeddings.ln",
    "cls.predictions.transform.dense": "mlm_head.dense",
    "cls.predictions.transform.LayerNorm": "mlm_head.ln",
}
# RoFormer's table of sines and cosines (encoder.embed_positions) is checked against its
# formula by load_hf_bert, then left out: light-llm's encoder computes its own
NOT_IN_ENCODER = (
    "pooler.",
    "cls.seq_relationship.",
    "embeddings.position_ids",
    "encoder.embed_positions.",
)
ROFORMER_BASE = 10000.0  # RoFormerSinusoidalPositionalEmbedding's, fixed
ROFORMER_TABLE = "roformer.encoder.embed_positions.weight"


def encoder_config_from_hf(hf: dict, has_mlm_head: bool, source: Path) -> EncoderConfig:
    """The :class:`EncoderConfig` of a HuggingFace BERT ``config.json``."""
    hidden_act = hf.get("hidden_act", "gelu")
    activation = HF_ACTIVATIONS.get(hidden_act) if isinstance(hidden_act, str) else None
    if activation is None:
        raise CheckpointError(
            f"{source} uses the activation {hf.get('hidden_act')!r}; light-llm's encoder "
            f"supports {', '.join(HF_ACTIVATIONS)}."
        )
    positions = "learned"
    if hf.get("model_type") == "roformer":  # BERT with rotary positions on q and k
        positions = "rotary"
        if hf.get("rotary_value", False):
            raise CheckpointError(
                f"{source} turns the values by the rotary angles too (rotary_value); light-llm's "
                "rotary positions turn queries and keys only."
            )
        if hf.get("embedding_size") not in (None, hf.get("hidden_size")):
            raise CheckpointError(
                f"{source} projects embeddings of size {hf['embedding_size']} to the model's "
                "width, a layer light-llm's encoder does not have."
            )
    elif hf.get("position_embedding_type", "absolute") != "absolute":
        raise CheckpointError(
            f"{source} uses {hf['position_embedding_type']!r} position embeddings; light-llm's "
            "encoder has absolute (learned) or RoFormer's rotary ones."
        )
    try:
        width = hf["hidden_size"]
        return EncoderConfig(
            vocab_size=hf["vocab_size"],
            block_size=hf["max_position_embeddings"],
            n_layer=hf["num_hidden_layers"],
            n_head=hf["num_attention_heads"],
            n_embd=width,
            n_inner=None if hf["intermediate_size"] == 4 * width else hf["intermediate_size"],
            dropout=hf.get("hidden_dropout_prob", 0.1),
            norm_eps=hf.get("layer_norm_eps", 1e-12),
            positions=positions,
            activation=activation,
            head_activation=activation,  # transformers' BertPredictionHeadTransform: hidden_act
            type_vocab_size=hf.get("type_vocab_size", 2),
            tie_embeddings=hf.get("tie_word_embeddings", True),
            mlm_head=has_mlm_head,
        )
    except KeyError as exc:
        raise CheckpointError(f"{source} lacks the BERT setting {exc.args[0]!r}.") from None
    except (ValueError, TypeError) as exc:  # ConfigError, or "384" * 4
        raise CheckpointError(f"{source} describes a model light-llm cannot build: {exc}") from None


def concatenate_rows(parts: list[torch.Tensor], names: list[str]) -> torch.Tensor:
    """W^QKV from W^Q, W^K, W^V (or their biases): the three stacked along the rows."""
    return torch.cat(parts)


def state_from_hf(hf_state: dict, n_layer: int, fuse: Callable = concatenate_rows) -> dict:
    """Rename (and fuse q, k, v of) a HuggingFace BERT state dict into light-llm's names.
    ``fuse(parts, names)`` stacks q, k, v (:func:`concatenate_rows` of the tensors; the
    header check passes its shapes-only :func:`~light_llm.checkpoints.header.stack_rows`).

    Tensors outside the encoder (pooler, next-sentence head, position_ids) are dropped; a
    tied decoder weight, when stored, is dropped too (it is the token table). Anything else
    unknown is kept under its own name, so that :func:`load_state` reports it.
    """
    state = {}
    for name, tensor in hf_state.items():
        name = name.removeprefix("bert.").removeprefix("roformer.")
        name = name.replace("LayerNorm.gamma", "LayerNorm.weight")  # pre-2019 names
        name = name.replace("LayerNorm.beta", "LayerNorm.bias")
        if name.startswith(NOT_IN_ENCODER):
            continue
        state[name] = tensor
    renamed = {}
    for i in range(n_layer):
        prefix = f"encoder.layer.{i}."
        for kind in ("weight", "bias"):
            parts = [f"{prefix}attention.self.{p}.{kind}" for p in ("query", "key", "value")]
            if all(part in state for part in parts):
                renamed[f"h.{i}.attn.c_attn.{kind}"] = fuse([state.pop(p) for p in parts], parts)
        for hf_part, ours in LAYER_PARTS.items():
            for kind in ("weight", "bias"):
                if f"{prefix}{hf_part}.{kind}" in state:
                    renamed[f"h.{i}.{ours}.{kind}"] = state.pop(f"{prefix}{hf_part}.{kind}")
    for hf_part, ours in EMBEDDING_PARTS.items():
        for kind in ("weight", "bias"):
            if f"{hf_part}.{kind}" in state:
                renamed[f"{ours}.{kind}"] = state.pop(f"{hf_part}.{kind}")
    # the decoder's own bias is the one its forward adds; "cls.predictions.bias" is the same
    # tensor when the head is tied, and the only one stored then
    output_bias = state.pop("cls.predictions.bias", None)
    decoder_bias = state.pop("cls.predictions.decoder.bias", output_bias)
    if decoder_bias is not None:
        renamed["mlm_head.decoder.bias"] = decoder_bias
    if "cls.predictions.decoder.weight" in state:
        renamed["mlm_head.decoder.weight"] = state.pop("cls.predictions.decoder.weight")
    renamed.update(state)
    return renamed


def check_hf_bert_header(stored: dict[str, StoredTensor], config: EncoderConfig, source: Path):
    """The tensors a HuggingFace BERT folder's header lists (renamed and fused as
    :func:`state_from_hf` does) against the shapes ``config`` needs, before any weight is read
    or the model built. A decoder weight stored beside the token table fits either way (tied
    or not: the values decide, once read)."""
    state = state_from_hf(stored, config.n_layer, partial(stack_rows, source=source))
    if "mlm_head.decoder.weight" in state:
        config = config.replace(tie_embeddings=False)
    check_stored_tensors(state, stored_shapes(config), source)


def roformer_position_table(positions: int, head_dim: int) -> torch.Tensor:
    """RoFormer's ``embed_positions`` (positions, d_head): [sin(m θ_i) | cos(m θ_i)] for
    i < d_head / 2, θ_i = 10000^(-2i/d_head) (Su et al. 2021), computed in float64: the
    angles light-llm's rotary positions turn q and k by (seed 002 §8.2)."""
    m = torch.arange(positions, dtype=torch.float64)[:, None]
    theta = ROFORMER_BASE ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    angles = m * theta  # (positions, d_head / 2)
    return torch.cat([angles.sin(), angles.cos()], dim=-1).float()


def check_roformer_table(table: torch.Tensor, config: EncoderConfig, source: Path) -> None:
    """CheckpointError unless a RoFormer folder's stored table of sines and cosines is the one
    its formula gives (light-llm computes the angles itself and would not use another)."""
    expected = roformer_position_table(config.block_size, config.head_dim)
    if table.shape != expected.shape or not torch.allclose(table.float(), expected, atol=1e-5):
        raise CheckpointError(
            f"{source}: {ROFORMER_TABLE} is not RoFormer's table of sines and cosines for "
            f"{config.block_size} positions of {config.head_dim} dimensions (base 10000)."
        )


def load_hf_bert(folder: str | os.PathLike, device: str | torch.device = "cpu") -> BertEncoder:
    """A HuggingFace BERT folder (config.json with "model_type": "bert", model.safetensors)
    loaded into a :class:`BertEncoder`, in eval mode. The MLM head is loaded when the folder
    has one (BertForMaskedLM); a sentence-embedding model such as MiniLM has none."""
    folder = Path(folder)
    hf = read_config_json(folder)
    if hf.get("model_type") not in HF_ENCODER_MODEL_TYPES:
        raise CheckpointError(
            f"{folder} is not a HuggingFace BERT folder (its config.json has model_type "
            f"{hf.get('model_type')!r}, not 'bert' or 'roformer')."
        )
    stored = stored_tensors(folder)  # safetensors only: a pickle is refused, never opened
    has_head = any(name.startswith("cls.predictions.") for name in stored)
    config = encoder_config_from_hf(hf, has_head, folder)
    check_hf_bert_header(stored, config, folder / WEIGHTS_FILE)
    weights = read_weights(folder)
    if ROFORMER_TABLE in weights:
        check_roformer_table(weights[ROFORMER_TABLE], config, folder / WEIGHTS_FILE)
    state = state_from_hf(weights, config.n_layer)
    word_table = state.get("embeddings.wte.weight")
    decoder = state.get("mlm_head.decoder.weight")
    if decoder is not None and word_table is not None and torch.equal(decoder, word_table):
        del state["mlm_head.decoder.weight"]  # tied, stored twice by older transformers
        config = config.replace(tie_embeddings=True)
    elif decoder is not None:
        config = config.replace(tie_embeddings=False)
    model = BertEncoder(config)
    load_state(model, state, folder / WEIGHTS_FILE)
    return model.to(device).eval()


def sentence_length_limit(folder: Path, block_size: int) -> int:
    """The max_seq_length of a sentence-transformers folder, else the model's positions."""
    path = folder / "sentence_bert_config.json"
    if path.is_file():
        limit = read_json_object(path).get("max_seq_length")
        if isinstance(limit, int) and limit > 0:
            return min(limit, block_size)
    return block_size
