"""The weights of a model folder checked against its config.json from the safetensors headers
alone: names, shapes and dtypes, before any tensor is read or any model is built. A
config.json that fits in memory but does not describe the weights beside it (another width,
another vocabulary, a layer too many) is one sentence naming the first tensor that differs and
both shapes, not a model of the wrong size allocated and then thrown away. No tensor library
needed (the NumPy engine's loader uses it too).

A safetensors file starts with an 8-byte length and a JSON header giving each tensor's dtype,
shape and byte range; ``safe_open`` reads that header and nothing else until a tensor is asked
for.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import safetensors

from light_llm.checkpoints.hf_gpt2_config import tensors_from_hf
from light_llm.checkpoints.hf_llama_config import hf_llama_shapes
from light_llm.checkpoints.run import SHARDED_WEIGHTS_INDEX
from light_llm.checkpoints.tensors import describe_names, weight_files
from light_llm.errors import CheckpointError
from light_llm.reference.model import parameter_shapes
from light_llm.reference.quantize import SCALE_SUFFIX, quantized_names
from light_llm.untrusted import check_regular_file

# safetensors' dtype names, as PyTorch and NumPy spell them
DTYPE_NAMES = {
    "BOOL": "bool",
    "U8": "uint8",
    "I8": "int8",
    "U16": "uint16",
    "I16": "int16",
    "U32": "uint32",
    "I32": "int32",
    "U64": "uint64",
    "I64": "int64",
    "F8_E4M3": "float8_e4m3fn",
    "F8_E5M2": "float8_e5m2",
    "F16": "float16",
    "BF16": "bfloat16",
    "F32": "float32",
    "F64": "float64",
}


@dataclass(frozen=True)
class StoredTensor:
    """What is known of a tensor without its values: its shape and its dtype's name
    ("float32", "int64", "bool" ...)."""

    shape: tuple[int, ...]
    dtype: str

    @classmethod
    def of(cls, tensor) -> StoredTensor:
        """The shape and dtype of a PyTorch tensor or a NumPy array."""
        return cls(tuple(tensor.shape), str(tensor.dtype).removeprefix("torch."))

    @property
    def is_floating_point(self) -> bool:
        return self.dtype.startswith(("float", "bfloat"))

    def transposed(self) -> StoredTensor:
        """The shape of W^T (a GPT-2 Conv1D weight read as nn.Linear's)."""
        return StoredTensor(self.shape[::-1], self.dtype)


def stack_rows(parts: Sequence[StoredTensor], names: Sequence[str], source: Path) -> StoredTensor:
    """The shape of ``torch.cat(parts)`` along the rows (HuggingFace BERT's query, key and
    value fused into W^QKV); CheckpointError when the parts cannot be stacked."""
    first = parts[0]
    for name, part in zip(names[1:], parts[1:], strict=True):
        if part.shape[1:] != first.shape[1:] or not part.shape:
            raise CheckpointError(
                f"{source}: tensor {name} has shape {part.shape} but {names[0]} has "
                f"{first.shape}; the two must have the same columns."
            )
    return StoredTensor((sum(part.shape[0] for part in parts), *first.shape[1:]), first.dtype)


def read_header(path: Path) -> dict[str, StoredTensor]:
    """Every tensor of one safetensors file as a :class:`StoredTensor`, from its header."""
    check_regular_file(path)  # safetensors would block on a FIFO
    try:
        with safetensors.safe_open(path, framework="numpy") as file:
            header = {}
            for name in file.keys():  # noqa: SIM118 (safe_open is not a dict)
                stored = file.get_slice(name)
                dtype = stored.get_dtype()
                header[name] = StoredTensor(
                    tuple(stored.get_shape()), DTYPE_NAMES.get(dtype, dtype)
                )
            return header
    except (safetensors.SafetensorError, OSError, ValueError, TypeError) as exc:
        raise CheckpointError(f"{path} is not a readable safetensors file ({exc}).") from None


def stored_tensors(folder: Path) -> dict[str, StoredTensor]:
    """Every tensor of ``folder``'s weights (model.safetensors or its shards), by name."""
    tensors = {}
    for path in weight_files(folder):
        if path.name != SHARDED_WEIGHTS_INDEX:
            tensors.update(read_header(path))
    return tensors


def check_stored_tensors(
    stored: Mapping[str, StoredTensor],
    expected: Mapping[str, tuple[int, ...]],
    source: Path,
    optional: Iterable[str] = (),
    int8: Collection[str] = (),
) -> None:
    """CheckpointError unless ``stored`` holds exactly the tensors ``expected`` names (those
    in ``optional`` may be absent: a tied weight stored once), each of floating-point values
    (int8 for those in ``int8``: an int8 checkpoint's weights) and of its expected shape. The
    sentence names the first tensor that differs."""
    missing = sorted(set(expected) - set(stored) - set(optional))
    if missing:
        raise CheckpointError(
            f"{source} lacks the tensor(s) {describe_names(missing)} that its config needs."
        )
    unexpected = sorted(set(stored) - set(expected))
    if unexpected:
        raise CheckpointError(
            f"{source} holds tensor(s) {describe_names(unexpected)} that its config does not have."
        )
    for name, shape in expected.items():
        found = stored.get(name)
        if found is None:
            continue
        if name in int8:
            if found.dtype != "int8":
                raise CheckpointError(
                    f"{source}: tensor {name} holds {found.dtype} values; an int8 checkpoint "
                    "stores it as int8."
                )
        elif not found.is_floating_point:
            raise CheckpointError(
                f"{source}: tensor {name} holds {found.dtype} values; model weights are "
                "floating-point numbers."
            )
        if tuple(found.shape) != tuple(shape):
            raise CheckpointError(
                f"{source}: tensor {name} has shape {tuple(found.shape)} but the config "
                f"needs {tuple(shape)}; config.json does not describe these weights."
            )


def check_gpt_weights(folder, config) -> None:
    """The header of a GPT folder (light-llm or HuggingFace GPT-2, Llama or Qwen3, ``folder``
    a :class:`~light_llm.checkpoints.folder.ModelFolder`) against its ``config``'s
    parameters, before the weights are read (:func:`check_stored_tensors`). A Llama or Qwen3
    folder is checked by its own tensor names, which the sentence then names."""
    stored = stored_tensors(folder.path)
    if folder.is_hf_llama:
        tied = ["lm_head.weight"] if config.tie_embeddings else []
        check_stored_tensors(stored, hf_llama_shapes(config), folder.weights_path, tied)
        return
    if folder.is_hf_gpt2:
        stored = tensors_from_hf(stored, config.tie_embeddings, StoredTensor.transposed)
    if folder.quantization is None:
        check_stored_tensors(stored, parameter_shapes(config), folder.weights_path)
        return
    shapes = parameter_shapes(config)
    int8 = quantized_names(config)
    for name in int8:  # s: one scale per row of q (out, in)
        shapes[name + SCALE_SUFFIX] = shapes[name][:1]
    check_stored_tensors(stored, shapes, folder.weights_path, int8=int8)
    check_scales(folder.path, [name + SCALE_SUFFIX for name in int8])


def check_scales(folder: Path, names: Sequence[str]) -> None:
    """CheckpointError unless every int8 scale tensor ``names`` holds only finite positive
    numbers (s = absmax / 127 > 0): a scale of 0, a negative, NaN or infinite one would turn its
    whole row into zeros, flipped signs or NaN. Reads the scales alone, before the weights."""
    wanted = set(names)
    for path in weight_files(folder):
        if path.name == SHARDED_WEIGHTS_INDEX:
            continue
        try:
            with safetensors.safe_open(path, framework="numpy") as file:
                found = {name: file.get_tensor(name) for name in wanted.intersection(file.keys())}
        except (safetensors.SafetensorError, OSError, ValueError, TypeError) as exc:
            raise CheckpointError(f"{path} is not a readable safetensors file ({exc}).") from None
        for name in sorted(found):
            scale = found[name].astype(np.float64)
            if not (np.isfinite(scale).all() and (scale > 0).all()):
                raise CheckpointError(
                    f"{path}: int8 scale {name} holds values that are not finite positive "
                    "numbers (absmax / 127 > 0); the checkpoint is damaged."
                )
