"""The NumPy engine's GPT (:class:`~light_llm.reference.model.NumpyGPT`) in a model folder, in
the light-llm format the PyTorch engine reads and writes too: ``config.json`` ({"format":
"light-llm", "architecture": "gpt", "model": {...}}), ``model.safetensors`` (by the GPT's
parameter names, a tied lm_head.weight stored once) and the tokenizer's files. A HuggingFace
GPT-2, Llama or Qwen3 folder loads as well.

Weights go through ``safetensors``' NumPy side, and the folder layout, the config parsing and
the HuggingFace mappings are the ones the PyTorch loader uses, so the two engines cannot drift
apart; nothing here needs torch.
"""

from __future__ import annotations

import os

import numpy as np
import safetensors.numpy

from light_llm.checkpoints.folder import GPT_ARCHITECTURE, ModelFolder, gpt_config, write_checkpoint
from light_llm.checkpoints.header import check_gpt_weights
from light_llm.checkpoints.hf_gpt2_config import tensors_from_hf
from light_llm.checkpoints.hf_llama_config import tensors_from_hf_llama
from light_llm.checkpoints.tensors import read_weights
from light_llm.config import check_model_fits
from light_llm.reference.model import NumpyGPT
from light_llm.reference.quantize import check_codes, dequantize_params


def contiguous_transpose(array: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(array.T)


def save_numpy_gpt(
    model: NumpyGPT,
    folder: str | os.PathLike,
    tokenizer=None,
    extra_files=None,
    overwrite: bool = False,
):
    """Write ``model`` as a light-llm checkpoint folder, replacing any previous one as a unit
    (:func:`light_llm.checkpoints.folder.write_checkpoint`, ``overwrite`` as there)."""
    weights = {name: np.ascontiguousarray(value) for name, value in model.params.items()}
    serialised = safetensors.numpy.save(weights, metadata={"format": "pt"})
    config = model.config.to_dict()
    write_checkpoint(
        folder, GPT_ARCHITECTURE, config, serialised, tokenizer, extra_files, overwrite
    )


def load_numpy_gpt(folder: ModelFolder, dtype=None) -> NumpyGPT:
    """A NumpyGPT from a light-llm GPT checkpoint or a HuggingFace GPT-2, Llama or Qwen3
    folder. The dtype
    follows the stored weights (float64 stays float64, anything else becomes float32) unless
    given. Weights that do not match the folder's config are a CheckpointError naming the
    tensor."""
    config = gpt_config(folder)
    check_model_fits(config)  # before the weights are read
    check_gpt_weights(folder, config)  # names and shapes, from the safetensors header
    tensors = read_weights(folder.path, framework="numpy")
    if folder.is_hf_gpt2:
        tensors = tensors_from_hf(tensors, config.tie_embeddings, contiguous_transpose)
    elif folder.is_hf_llama:
        tensors = tensors_from_hf_llama(tensors, config, np.concatenate, folder.weights_path)
    if folder.quantization is not None:  # W_hat = q s: the int8 model's weights, in float
        check_codes(tensors, config, folder.weights_path)
        tensors = dequantize_params(tensors, config)
    if dtype is None:
        first = tensors.get("transformer.wte.weight")
        dtype = first.dtype if first is not None and first.dtype == np.float64 else np.float32
    model = NumpyGPT(config, dtype=dtype)
    model.load_state_dict(tensors, source=str(folder.weights_path))
    return model
