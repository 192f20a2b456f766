"""HuggingFace Llama and Qwen3 folders written from a light-llm GPT: ``config.json`` and
``model.safetensors`` as ``LlamaForCausalLM.save_pretrained`` (or Qwen3's) writes them, and the
tokenizer as light-llm and ``AutoTokenizer`` read it. The mapping of names, settings and the
RoPE row order is :mod:`light_llm.checkpoints.hf_llama_config`; reading such a folder back is
:func:`light_llm.checkpoints.load` (``transformers`` itself is needed by neither).
"""

from __future__ import annotations

import json
import os

import safetensors.torch
import torch

from light_llm.atomic import write_folder_atomically
from light_llm.checkpoints.folder import CONFIG_FILE, WEIGHTS_FILE, check_export_arguments
from light_llm.checkpoints.gpt import check_float_weights_only, weights_to_save
from light_llm.checkpoints.hf_architectures import check_exportable, llama_family
from light_llm.checkpoints.hf_llama_config import hf_llama_config_from, tensors_to_hf_llama
from light_llm.checkpoints.hf_tokenizer import exported_tokenizer_files
from light_llm.models.gpt import GPT


def export_hf_llama(
    model: GPT, folder: str | os.PathLike, tokenizer=None, overwrite: bool = False
) -> None:
    """Write ``model`` as a HuggingFace Llama folder, or a Qwen3 one when it has QK-norm,
    that ``AutoModelForCausalLM.from_pretrained`` loads and that computes the same logits:
    config.json (no special-token id the vocabulary lacks) and model.safetensors (float32 as
    the model holds it, W^Q and W^K rows in Llama's RoPE order), with ``tokenizer``'s files
    (light_tokenizer.json; tokenizer.json and tokenizer_config.json where ``tokenizers`` can
    express it). The folder is replaced as a unit; a folder holding files light-llm did not
    write, only with ``overwrite``. ConfigError, before anything is written, if the model uses
    a variant Llama and Qwen3 cannot express."""
    check_export_arguments(model, GPT, folder, tokenizer, overwrite)
    config = model.config
    check_exportable(config, llama_family(config))
    check_float_weights_only(model, llama_family(config))
    state = weights_to_save(model)
    dtype = state["transformer.wte.weight"].dtype

    def unit_gain() -> torch.Tensor:
        return torch.ones(config.head_dim, dtype=dtype)

    # cloned: q, k and v are rows of one c_attn, and safetensors stores no shared memory
    tensors = {
        name: tensor.clone()
        for name, tensor in tensors_to_hf_llama(state, config, unit_gain).items()
    }
    hf_config = hf_llama_config_from(config, None if tokenizer is None else tokenizer.eos_id)
    hf_config["dtype"] = str(dtype).removeprefix("torch.")
    files = {
        CONFIG_FILE: json.dumps(hf_config, indent=2).encode("utf-8"),
        WEIGHTS_FILE: safetensors.torch.save(tensors, metadata={"format": "pt"}),
    }
    if tokenizer is not None:
        files.update(exported_tokenizer_files(tokenizer, config.block_size))
    write_folder_atomically(folder, files, overwrite)
