"""The PyTorch encoder (:class:`~light_llm.models.bert.BertEncoder`) in a light-llm checkpoint
folder ("architecture": "bert"); HuggingFace BERT folders are read by
:mod:`light_llm.checkpoints.hf_bert`.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import torch
from safetensors.torch import save

from light_llm.checkpoints.folder import (
    ENCODER_ARCHITECTURE,
    GPT_ARCHITECTURE,
    ModelFolder,
    model_settings,
    write_checkpoint,
)
from light_llm.checkpoints.gpt import load_weights_into
from light_llm.checkpoints.header import check_stored_tensors, stored_tensors
from light_llm.checkpoints.tensors import read_weights
from light_llm.errors import CheckpointError
from light_llm.models.bert import BertEncoder, EncoderConfig

NEEDS_ENCODER = "a BERT-style encoder (a light-llm BERT checkpoint or a HuggingFace BERT folder)"


def encoder_config(folder: ModelFolder) -> EncoderConfig:
    """The validated :class:`EncoderConfig` of a light-llm encoder checkpoint, without reading
    its weights; CheckpointError for any other folder."""
    if folder.is_hf_bert:  # a BERT of HuggingFace's: its config is read with its weights
        raise CheckpointError(
            f"{folder.path} is a HuggingFace BERT folder, whose config light-llm reads with "
            "its weights (whether its head is tied shows only there): load it with "
            'light_llm.checkpoints.load(folder, architecture="bert").'
        )
    if not folder.is_light_llm:
        model_type = folder.config_json.get("model_type")
        what = f"a HuggingFace {model_type} model" if model_type is not None else None
        raise CheckpointError(
            f"{folder.path} holds {what or 'no model light-llm knows'}, not {NEEDS_ENCODER}."
        )
    if folder.architecture != ENCODER_ARCHITECTURE:
        what = "a GPT" if folder.architecture == GPT_ARCHITECTURE else "an unknown architecture"
        raise CheckpointError(f"{folder.path} holds {what}, not {NEEDS_ENCODER}.")
    return model_settings(folder, EncoderConfig)


def load_encoder(folder: ModelFolder, device: str | torch.device = "cpu") -> BertEncoder:
    """A light-llm encoder checkpoint loaded into a :class:`BertEncoder`, in eval mode (the
    safetensors header checked against the config first)."""
    config = encoder_config(folder)
    check_stored_tensors(stored_tensors(folder.path), stored_shapes(config), folder.weights_path)
    model = BertEncoder(config)
    load_state(model, read_weights(folder.path), folder.weights_path)
    return model.to(device).eval()


def tied_names(model: BertEncoder) -> list[str]:
    """The weights stored once because they are another: the tied MLM decoder (the token
    table)."""
    tied = model.mlm_head is not None and model.config.tie_embeddings
    return ["mlm_head.decoder.weight"] if tied else []


def stored_shapes(config: EncoderConfig) -> dict[str, tuple[int, ...]]:
    """The name and shape of every tensor an encoder of ``config`` stores (a tied decoder
    left out), from a model built on PyTorch's meta device: shapes only, nothing allocated."""
    with torch.device("meta"):
        skeleton = BertEncoder(config)
    tied = tied_names(skeleton)
    return {
        name: tuple(tensor.shape)
        for name, tensor in skeleton.state_dict().items()
        if name not in tied
    }


def state_to_save(model: BertEncoder) -> dict[str, torch.Tensor]:
    """The state dict to write: contiguous tensors, the tied decoder weight left out (it is
    the token table, stored once)."""
    state = model.state_dict()
    for name in tied_names(model):
        del state[name]
    return {name: tensor.detach().cpu().contiguous() for name, tensor in state.items()}


def load_state(model: BertEncoder, state: dict[str, torch.Tensor], source: Path) -> None:
    """Copy ``state`` into ``model``, every tensor accounted for (a tied MLM decoder is stored
    once, as the word embeddings); CheckpointError on any missing, unexpected or mis-shaped
    tensor."""
    load_weights_into(model, state, source, tied_names=tied_names(model))


def save_encoder(
    model: BertEncoder,
    folder: str | os.PathLike,
    tokenizer=None,
    extra_files: dict[str, bytes] | None = None,
    overwrite: bool = False,
) -> None:
    """Write a light-llm encoder checkpoint folder, all of it or nothing (the folder is
    replaced as a unit): config.json ({"format": "light-llm", "architecture": "bert",
    "model": {...}}), model.safetensors (the tied decoder weight stored once, as the token
    table), the tokenizer's files, and ``extra_files`` (a folder holding other files only with
    ``overwrite``)."""
    weights = save(state_to_save(model), metadata={"format": "pt"})
    model_config = dataclasses.asdict(model.config)
    write_checkpoint(
        folder, ENCODER_ARCHITECTURE, model_config, weights, tokenizer, extra_files, overwrite
    )
