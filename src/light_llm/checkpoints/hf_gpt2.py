"""HuggingFace GPT-2 folders, both directions: ``config.json`` + ``model.safetensors`` as
``transformers``' ``GPT2LMHeadModel.save_pretrained`` writes them (the mapping of names and
settings is :mod:`light_llm.checkpoints.hf_gpt2_config`). ``transformers`` itself is not
needed here: only its file format is.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import safetensors.torch
import torch

from light_llm.atomic import write_folder_atomically
from light_llm.checkpoints.folder import (
    CONFIG_FILE,
    WEIGHTS_FILE,
    ModelFolder,
    check_export_arguments,
    read_config_json,
)
from light_llm.checkpoints.gpt import check_float_weights_only, load_gpt
from light_llm.checkpoints.hf_architectures import GPT2, check_exportable
from light_llm.checkpoints.hf_gpt2_config import (
    GPT2_END_OF_TEXT_ID,
    GPT2_VOCAB_SIZE,
    hf_config_from,
    is_conv1d_weight,
)
from light_llm.checkpoints.hf_tokenizer import exported_tokenizer_files
from light_llm.errors import CheckpointError
from light_llm.models.gpt import GPT, TRAINING_ONLY_WEIGHTS
from light_llm.tokenizers.gpt2 import gpt2_vocabulary_files


def load_hf_gpt2(folder: str | os.PathLike, device: str | torch.device = "cpu") -> GPT:
    """A light-llm :class:`~light_llm.models.gpt.GPT` (eval mode) holding the weights of a
    HuggingFace GPT-2 folder. Only safetensors weights are read, never a pickle."""
    folder = Path(folder)
    if not folder.is_dir():
        raise CheckpointError(f"no checkpoint folder at {folder}.")
    model_folder = ModelFolder(folder, read_config_json(folder))
    if not model_folder.is_hf_gpt2:
        raise CheckpointError(
            f"{folder} is not a HuggingFace GPT-2 folder (its {CONFIG_FILE} has no "
            '"model_type": "gpt2").'
        )
    return load_gpt(model_folder, device)


def zero_biases(config) -> dict[str, torch.Tensor]:
    """The biases GPT-2 has and a model of ``config`` lacks (all of them when it was built
    without biases), as zeros: x W + 0 = x W, and LayerNorm's shift 0 is no shift."""
    if config.bias:  # GPT-2's shape exactly: nothing to add
        return {}
    with torch.device("meta"):  # names and shapes only, no memory
        with_biases = GPT(config.replace(bias=True)).state_dict()
        own = GPT(config).state_dict()
    return {
        name: torch.zeros(tensor.shape, dtype=tensor.dtype)
        for name, tensor in with_biases.items()
        if name not in own
    }


def export_hf_gpt2(
    model, folder: str | os.PathLike, tokenizer=None, overwrite: bool = False
) -> None:
    """Write ``model`` as a HuggingFace GPT-2 folder that ``GPT2LMHeadModel.from_pretrained``
    loads: config.json and model.safetensors (Conv1D weights transposed to (in, out)).

    Without ``tokenizer`` the folder implies GPT-2's tokenizer, as every GPT-2 folder does,
    and for a model with GPT-2's vocabulary it holds that tokenizer's files as HuggingFace
    names them (vocab.json, merges.txt: OpenAI's encoder.json and vocab.bpe), so that
    ``GPT2TokenizerFast.from_pretrained`` loads it too; with one, its
    ``light_tokenizer.json`` is written, which light-llm reads first (a character-level model
    exported this way keeps its vocabulary), and its tokenizer.json where ``tokenizers`` can
    express it (:mod:`~light_llm.checkpoints.hf_tokenizer`), so that ``AutoTokenizer`` loads
    it too. config.json names only special-token ids the vocabulary holds. The folder is
    replaced as a unit; a folder holding files light-llm did not write, only with
    ``overwrite``. A model without biases (nanoGPT's, ``--no-bias``) is written with GPT-2's
    biases at zero, which computes the same. ConfigError if the model uses a variant GPT-2
    cannot express.
    """
    check_export_arguments(model, GPT, folder, tokenizer, overwrite)
    config = model.config
    check_exportable(config, GPT2)
    check_float_weights_only(model, GPT2)
    tensors = {}
    for name, tensor in model.state_dict().items():
        if config.tie_embeddings and name == "lm_head.weight":
            continue  # GPT-2 ties it to wte itself
        if name in TRAINING_ONLY_WEIGHTS:
            continue  # not part of the logits GPT-2 computes
        tensor = tensor.detach().cpu()
        tensors[name] = (tensor.t() if is_conv1d_weight(name) else tensor).contiguous()
    tensors.update(zero_biases(config))
    eos_id = GPT2_END_OF_TEXT_ID if tokenizer is None else tokenizer.eos_id
    files = {
        CONFIG_FILE: json.dumps(hf_config_from(config, eos_id), indent=2).encode("utf-8"),
        WEIGHTS_FILE: safetensors.torch.save(tensors, metadata={"format": "pt"}),
    }
    if tokenizer is not None:
        files.update(exported_tokenizer_files(tokenizer, config.block_size))
    elif config.vocab_size == GPT2_VOCAB_SIZE:
        encoder_file, merges_file = gpt2_vocabulary_files()
        files.update(
            {"vocab.json": encoder_file.read_bytes(), "merges.txt": merges_file.read_bytes()}
        )
    write_folder_atomically(folder, files, overwrite)
