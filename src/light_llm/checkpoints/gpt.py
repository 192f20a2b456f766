"""The PyTorch GPT in a model folder: loaded from a light-llm checkpoint or a HuggingFace
GPT-2, Llama or Qwen3 folder, saved as a light-llm checkpoint::

    config.json           {"format": "light-llm", "architecture": "gpt", "model": {ModelConfig}}
    model.safetensors     the weights, by GPT-2's names; a tied lm_head.weight is stored once
    light_tokenizer.json  the tokenizer (and any file it refers to)
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import safetensors.torch
import torch

from light_llm.checkpoints.folder import GPT_ARCHITECTURE, ModelFolder, gpt_config, write_checkpoint
from light_llm.checkpoints.header import StoredTensor, check_gpt_weights, check_stored_tensors
from light_llm.checkpoints.hf_gpt2_config import tensors_from_hf
from light_llm.checkpoints.hf_llama_config import tensors_from_hf_llama
from light_llm.checkpoints.tensors import read_weights
from light_llm.config import check_model_fits
from light_llm.errors import CheckpointError, ConfigError
from light_llm.models.gpt import GPT
from light_llm.models.quantize import empty_quantized_gpt, is_quantized
from light_llm.nn.lora import lora_layers
from light_llm.reference.quantize import SCALE_SUFFIX, check_codes, dequantize_params


def load_weights_into(
    model: torch.nn.Module,
    tensors: dict[str, torch.Tensor],
    source: Path,
    tied_names: Sequence[str] | None = None,
) -> None:
    """Copy ``tensors`` into ``model``, which must expect exactly these names and shapes.

    ``tied_names`` are expected absent: they are stored once, as the token embedding (by
    default the GPT's lm_head.weight when tied). Any missing or unexpected name, a shape that
    differs from the config's, a tensor that is not floating-point or holds NaN or infinity,
    is a CheckpointError naming it (an int8 model's quantised weights are int8 instead, each
    with its float scale).
    """
    if tied_names is None:
        tied_names = ["lm_head.weight", "lm_head.weight" + SCALE_SUFFIX]
        tied_names = tied_names if model.config.tie_embeddings else []
    expected = dict(model.state_dict())
    for name in tied_names:
        expected.pop(name, None)
    copy_checked(expected, tensors, source)


def copy_checked(
    expected: Mapping[str, torch.Tensor], tensors: Mapping[str, torch.Tensor], source: Path
) -> None:
    """Copy each of ``tensors`` into the tensor of its name in ``expected``, once every name,
    shape and floating-point dtype is checked (:func:`check_stored_tensors`) and every value
    is finite; CheckpointError naming the first that is not."""
    shapes = {name: tuple(target.shape) for name, target in expected.items()}
    stored = {name: StoredTensor.of(tensor) for name, tensor in tensors.items()}
    int8 = [name for name, target in expected.items() if target.dtype == torch.int8]
    check_stored_tensors(stored, shapes, source, int8=int8)
    for name, target in expected.items():
        found = tensors[name]
        if not bool(torch.isfinite(found).all()):
            raise CheckpointError(
                f"{source}: tensor {name} holds NaN or infinite values, so every output of the "
                "model would be meaningless; the checkpoint is corrupt."
            )
        with torch.no_grad():
            target.copy_(found)


def contiguous_transpose(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.t().contiguous()


def load_gpt(
    folder: ModelFolder, device: str | torch.device = "cpu", dequantize: bool = False
) -> GPT:
    """A :class:`~light_llm.models.gpt.GPT` in eval mode, on ``device``, from a light-llm
    checkpoint or a HuggingFace GPT-2, Llama or Qwen3 folder (its config validated before
    anything is allocated). An int8 checkpoint (``light-llm quantize``) gives the int8 model
    (:mod:`light_llm.models.quantize`), or with ``dequantize`` a float GPT holding its
    weights W_hat = q s (for the commands that look inside the weights)."""
    config = gpt_config(folder)
    check_model_fits(config)  # before the weights are read
    check_gpt_weights(folder, config)  # names, shapes, dtypes; an int8 one's scales too
    tensors = read_weights(folder.path)
    if folder.is_hf_gpt2:
        tensors = tensors_from_hf(tensors, config.tie_embeddings, contiguous_transpose)
    elif folder.is_hf_llama:
        tensors = tensors_from_hf_llama(tensors, config, torch.cat, folder.weights_path)
    if folder.quantization is not None:
        check_codes(tensors, config, folder.weights_path)
    if folder.quantization is not None and dequantize:
        tensors = dequantize_tensors(tensors, config)
    if folder.quantization is not None and not dequantize:
        model = empty_quantized_gpt(config)
    else:
        model = GPT(config)
    load_weights_into(model, tensors, folder.weights_path)
    return model.to(device).eval()


def dequantize_tensors(tensors: dict[str, torch.Tensor], config) -> dict[str, torch.Tensor]:
    """An int8 checkpoint's tensors as float32 weights W_hat = q s, the scales dropped (the
    formula's NumPy form: :func:`light_llm.reference.quantize.dequantize_params`)."""
    arrays = {
        name: (tensor.float() if tensor.dtype == torch.bfloat16 else tensor).numpy()
        for name, tensor in tensors.items()
    }
    return {
        name: torch.from_numpy(array) for name, array in dequantize_params(arrays, config).items()
    }


def check_float_weights_only(model: torch.nn.Module, architecture: str) -> None:
    """ConfigError when ``model`` holds what a HuggingFace ``architecture`` folder has no
    place for: int8 codes and their scales, or LoRA adapters beside the weights they adapt."""
    if is_quantized(model):
        raise ConfigError(
            f"this model's weights are int8, and a HuggingFace {architecture} folder holds "
            "float weights: load it with dequantize=True (W_hat = q s), as light-llm export does."
        )
    if lora_layers(model):
        raise ConfigError(
            f"this model holds LoRA adapters, which a HuggingFace {architecture} folder has no "
            "place for: fold them into its weights first with light_llm.nn.lora.merge_lora, "
            "as light-llm export does."
        )


def weights_to_save(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The model's state dict on the CPU, contiguous, with a tied lm_head.weight left out."""
    state = model.state_dict()
    if model.config.tie_embeddings:
        state.pop("lm_head.weight", None)
        state.pop("lm_head.weight" + SCALE_SUFFIX, None)  # an int8 head's: the table's
    return {name: tensor.detach().cpu().contiguous() for name, tensor in state.items()}


def save_gpt(
    model: GPT,
    folder: str | os.PathLike,
    tokenizer=None,
    extra_files: Mapping[str, bytes] | None = None,
    overwrite: bool = False,
) -> None:
    """Write ``model`` (and its tokenizer, and ``extra_files`` such as training state) as a
    light-llm checkpoint folder, replacing any previous one atomically (a folder holding
    other files only with ``overwrite``)."""
    weights = safetensors.torch.save(weights_to_save(model), metadata={"format": "pt"})
    config = model.config.to_dict()
    marks = {"quantization": "int8"} if is_quantized(model) else None
    write_checkpoint(
        folder,
        GPT_ARCHITECTURE,
        config,
        weights,
        tokenizer,
        extra_files,
        overwrite,
        extra_config=marks,
    )
