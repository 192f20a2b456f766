"""Checkpoint folders for the NumPy engine, in the light-llm format the PyTorch engine reads
and writes (``light_llm.checkpoint``): ``config.json`` ({"format": "light-llm",
"architecture": "gpt", "model": {...}}), ``model.safetensors`` (by the GPT's parameter names,
a tied lm_head.weight stored once) and the tokenizer's files.

Weights go through ``safetensors.numpy``; the folder layout, the config parsing and the atomic
replacement of the folder are the PyTorch engine's own functions, so the two engines cannot
drift apart.
"""

from __future__ import annotations

import os

import numpy as np
import safetensors
import safetensors.numpy

from light_llm.errors import CheckpointError


def save_numpy_model(model, folder: str | os.PathLike, tokenizer=None, extra_files=None) -> None:
    """Write ``model`` (a NumpyGPT) as a light-llm checkpoint folder, replacing any previous
    one as a unit (:func:`light_llm.checkpoint.write_checkpoint`)."""
    from light_llm.checkpoint import write_checkpoint

    weights = {name: np.ascontiguousarray(value) for name, value in model.params.items()}
    serialised = safetensors.numpy.save(weights, metadata={"format": "pt"})
    write_checkpoint(folder, "gpt", model.config.to_dict(), serialised, tokenizer, extra_files)


def load_numpy_model(path: str | os.PathLike, dtype=None):
    """A NumpyGPT from a light-llm checkpoint folder (or a training output folder holding one,
    or a HuggingFace GPT-2 folder, converted through the PyTorch loader). The dtype follows
    the stored weights unless given. Weights that do not match the folder's config are a
    CheckpointError naming the tensor."""
    from light_llm.checkpoint import (
        WEIGHTS_FILE,
        gpt_config_from_json,
        is_hf_gpt2,
        load_model,
        read_config_json,
        refuse_pickled_weights,
        resolve_checkpoint_dir,
    )
    from light_llm.reference.model import NumpyGPT

    folder = resolve_checkpoint_dir(path)
    config_json = read_config_json(folder)
    if is_hf_gpt2(config_json):
        torch_model = load_model(folder)
        return NumpyGPT.from_torch_state_dict(torch_model.state_dict(), torch_model.config, dtype)
    config = gpt_config_from_json(config_json, folder)
    weights_path = folder / WEIGHTS_FILE
    if not weights_path.is_file():
        refuse_pickled_weights(folder)
        raise CheckpointError(f"{folder} has no weights: {WEIGHTS_FILE} is missing.")
    try:
        tensors = safetensors.numpy.load_file(weights_path)
    except (safetensors.SafetensorError, OSError, ValueError, TypeError) as exc:
        raise CheckpointError(
            f"{weights_path} is not a readable safetensors file ({exc})."
        ) from None
    if dtype is None:
        first = tensors.get("transformer.wte.weight")
        dtype = first.dtype if first is not None and first.dtype == np.float64 else np.float32
    model = NumpyGPT(config, dtype=dtype)
    model.load_state_dict(tensors, source=str(weights_path))
    return model
