"""A light-llm encoder written as the HuggingFace folder that computes exactly what it computes:
``config.json`` and ``model.safetensors`` as ``save_pretrained`` writes them, with the
WordPiece tokenizer as ``vocab.txt`` and ``tokenizer_config.json``:

    BERT      learned positions, post-LN LayerNorm, GELU / GELU-tanh / ReLU, biases, softmax
              attention, the masked-LM head                            (BertForMaskedLM)
    RoFormer  the same with rotary positions (pairs (x_2i, x_2i+1) turned by m θ_i,
              θ_i = 10000^(-2i/d_head), on q and k only: Su et al. 2021) in place of learned
              ones                                                     (RoFormerForMaskedLM)

The names are those :mod:`light_llm.checkpoints.hf_bert` reads, the other way: the fused
W^QKV is split into query, key and value rows; RoFormer's table of sines and cosines
(``encoder.embed_positions``, half sines then half cosines per head dimension) is computed
from its formula. A tied decoder is not stored (``tie_word_embeddings``); its bias is
``cls.predictions.bias``. ``transformers`` itself is not needed to write the folder.
"""

from __future__ import annotations

import json
import os

import safetensors.torch
import torch

from light_llm.atomic import write_folder_atomically
from light_llm.checkpoints.folder import (
    CONFIG_FILE,
    WEIGHTS_FILE,
    check_export_arguments,
    tokenizer_files,
)
from light_llm.checkpoints.hf_architectures import and_list
from light_llm.checkpoints.hf_bert import (
    EMBEDDING_PARTS,
    HF_ACTIVATIONS,
    LAYER_PARTS,
    ROFORMER_BASE,
    ROFORMER_TABLE,
    roformer_position_table,
)
from light_llm.errors import ConfigError
from light_llm.models.bert import BertEncoder, EncoderConfig
from light_llm.tokenizers import BertTokenizer

BERT = "BERT"
ROFORMER = "RoFormer"
ENCODER_CLASS_NAMES = {BERT: "BertForMaskedLM", ROFORMER: "RoFormerForMaskedLM"}
MODEL_TYPES = {BERT: "bert", ROFORMER: "roformer"}
# light-llm's activation -> the hidden_act transformers reads (the first name of each)
ACTIVATION_NAMES = {ours: hf for hf, ours in reversed(HF_ACTIVATIONS.items())}


def encoder_blockers(config: EncoderConfig) -> list[str]:
    """Every setting of ``config`` that neither BERT nor RoFormer expresses, as a phrase."""
    rules = [
        (
            config.positions not in ("learned", "rotary"),
            f"positions={config.positions!r} (BERT has learned positions, RoFormer rotary ones)",
        ),
        (
            config.positions == "rotary" and config.position_base != ROFORMER_BASE,
            f"position_base={config.position_base:g} (RoFormer's rotary angles have base 10000)",
        ),
        (config.norm != "layernorm", f"norm={config.norm!r} (BERT has LayerNorm only)"),
        (config.block_order != "post", f"block_order={config.block_order!r} (BERT is post-LN)"),
        (
            config.activation not in ACTIVATION_NAMES,
            f"activation={config.activation!r} (BERT's feed-forward layer knows "
            f"{', '.join(ACTIVATION_NAMES)})",
        ),
        (
            config.head_activation != config.activation,
            f"head_activation={config.head_activation!r} beside activation="
            f"{config.activation!r} (transformers' masked-LM head applies the blocks' one)",
        ),
        (not config.bias, "bias=False (BERT's layers all have biases)"),
        (config.qk_norm, "qk_norm=True (BERT does not normalise queries and keys)"),
        (
            not config.mlm_head,
            "mlm_head=False (this exports masked-LM models; a sentence encoder without the "
            "head is best kept as the HuggingFace folder it came from)",
        ),
    ]
    return [phrase for blocked, phrase in rules if blocked]


def encoder_hf_architecture(config: EncoderConfig) -> str:
    """BERT or RoFormer, the architecture that computes what ``config`` computes; ConfigError
    naming every setting that blocks both."""
    blockers = encoder_blockers(config)
    if blockers:
        raise ConfigError(
            f"no HuggingFace architecture computes what this encoder computes: "
            f"{and_list(blockers)}."
        )
    return ROFORMER if config.positions == "rotary" else BERT


def tensors_to_hf_encoder(model: BertEncoder, architecture: str) -> dict[str, torch.Tensor]:
    """The model's weights under ``architecture``'s names (module docstring), cloned (safetensors
    stores no shared memory), in the model's dtype, on the CPU."""
    config = model.config
    prefix = MODEL_TYPES[architecture] + "."
    state = {name: tensor.detach().cpu() for name, tensor in model.state_dict().items()}
    tensors = {}
    for hf_part, ours in EMBEDDING_PARTS.items():
        for kind in ("weight", "bias"):
            if f"{ours}.{kind}" in state:
                hf_name = hf_part if ours.startswith("mlm_head.") else prefix + hf_part
                tensors[f"{hf_name}.{kind}"] = state.pop(f"{ours}.{kind}")
    for i in range(config.n_layer):
        layer = f"{prefix}encoder.layer.{i}."
        for kind in ("weight", "bias"):
            q, k, v = state.pop(f"h.{i}.attn.c_attn.{kind}").chunk(3)  # rows q | k | v
            for part, tensor in zip(("query", "key", "value"), (q, k, v), strict=True):
                tensors[f"{layer}attention.self.{part}.{kind}"] = tensor
            for hf_part, ours in LAYER_PARTS.items():
                tensors[f"{layer}{hf_part}.{kind}"] = state.pop(f"h.{i}.{ours}.{kind}")
    tensors["cls.predictions.bias"] = state.pop("mlm_head.decoder.bias")
    decoder = state.pop("mlm_head.decoder.weight")
    if not config.tie_embeddings:  # a tied one is the word table, which transformers ties
        tensors["cls.predictions.decoder.weight"] = decoder
        tensors["cls.predictions.decoder.bias"] = tensors["cls.predictions.bias"]
    if architecture == ROFORMER:
        table = roformer_position_table(config.block_size, config.head_dim)
        tensors[ROFORMER_TABLE] = table.to(decoder.dtype)
    if state:  # a tensor this mapping does not know would be lost silently
        raise ConfigError(f"cannot export the encoder's tensor(s) {', '.join(sorted(state))}.")
    return {name: tensor.clone().contiguous() for name, tensor in tensors.items()}


def hf_encoder_config(config: EncoderConfig, architecture: str, pad_id: int) -> dict:
    """The ``config.json`` of ``architecture`` for ``config``."""
    hf = {
        "architectures": [ENCODER_CLASS_NAMES[architecture]],
        "model_type": MODEL_TYPES[architecture],
        "vocab_size": config.vocab_size,
        "hidden_size": config.n_embd,
        "num_hidden_layers": config.n_layer,
        "num_attention_heads": config.n_head,
        "intermediate_size": config.n_inner or 4 * config.n_embd,
        "hidden_act": ACTIVATION_NAMES[config.activation],
        "hidden_dropout_prob": config.dropout,
        "attention_probs_dropout_prob": config.dropout,
        "max_position_embeddings": config.block_size,
        "type_vocab_size": config.type_vocab_size,
        "layer_norm_eps": config.norm_eps,
        "pad_token_id": pad_id,
        "tie_word_embeddings": config.tie_embeddings,
    }
    if architecture == ROFORMER:
        hf.update(embedding_size=config.n_embd, rotary_value=False)
    else:
        hf["position_embedding_type"] = "absolute"
    return hf


def wordpiece_tokenizer_config(tokenizer: BertTokenizer, model_max_length: int) -> bytes:
    """``tokenizer_config.json`` naming BertTokenizer (RoFormer's own class needs jieba, a
    Chinese word splitter) with the casing, accents and length of ``tokenizer``."""
    settings = {
        "tokenizer_class": "BertTokenizer",
        "do_lower_case": tokenizer.lowercase,
        "strip_accents": tokenizer.strip_accents,
        "tokenize_chinese_chars": tokenizer.chinese_words,
        "model_max_length": model_max_length,
    }
    return json.dumps(settings, indent=2).encode("utf-8")


def export_hf_encoder(
    model: BertEncoder, folder: str | os.PathLike, tokenizer: BertTokenizer, overwrite: bool = False
) -> str:
    """Write ``model`` as a HuggingFace BERT or RoFormer masked-LM folder that
    ``AutoModelForMaskedLM.from_pretrained`` loads and that computes the same logits, with
    ``tokenizer``'s files (light_tokenizer.json and vocab.txt, tokenizer_config.json for
    ``AutoTokenizer``); the folder is replaced as a unit, one holding files light-llm did not
    write only with ``overwrite``. Returns the architecture's name.
    ConfigError, before anything is written, for a model neither expresses."""
    if tokenizer is None:
        raise ConfigError("an encoder is exported with its WordPiece tokenizer: give it.")
    check_export_arguments(model, BertEncoder, folder, tokenizer, overwrite, BertTokenizer)
    config = model.config
    architecture = encoder_hf_architecture(config)
    tensors = tensors_to_hf_encoder(model, architecture)
    hf_config = hf_encoder_config(config, architecture, tokenizer.pad_id)
    hf_config["dtype"] = str(tensors["cls.predictions.bias"].dtype).removeprefix("torch.")
    files = {
        CONFIG_FILE: json.dumps(hf_config, indent=2).encode("utf-8"),
        WEIGHTS_FILE: safetensors.torch.save(tensors, metadata={"format": "pt"}),
        **tokenizer_files(tokenizer),
        "tokenizer_config.json": wordpiece_tokenizer_config(tokenizer, config.block_size),
    }
    write_folder_atomically(folder, files, overwrite)
    return architecture
