"""Reading and writing the weights of a model folder: safetensors only.

A pickle (``pytorch_model.bin``) can run code when it is loaded, so it is refused, never
opened. Tensors come back as PyTorch tensors (``framework="pt"``) or NumPy arrays
(``framework="numpy"``, which needs no torch).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import safetensors

from light_llm.atomic import check_file_name
from light_llm.checkpoints.folder import WEIGHTS_FILE, refuse_pickled_weights
from light_llm.checkpoints.run import SHARDED_WEIGHTS_INDEX
from light_llm.errors import CheckpointError, reason
from light_llm.untrusted import check_regular_file, open_regular_file, read_json_object


def read_safetensors_file(path: Path, framework: str = "pt") -> dict:
    """Every tensor in one safetensors file (on the CPU), as ``framework`` tensors."""
    check_regular_file(path)  # safetensors would block on a FIFO
    try:
        with safetensors.safe_open(path, framework=framework) as file:
            return {name: file.get_tensor(name) for name in file.keys()}  # noqa: SIM118
    except (safetensors.SafetensorError, OSError, ValueError, TypeError) as exc:
        raise CheckpointError(f"{path} is not a readable safetensors file ({exc}).") from None


def weight_files(folder: Path) -> list[Path]:
    """The files holding the weights of ``folder``: model.safetensors, or the shard index
    followed by the shards it lists (sorted); CheckpointError when there are none (a
    pickle is named and refused)."""
    path = folder / WEIGHTS_FILE
    if path.is_file():
        return [path]
    index_path = folder / SHARDED_WEIGHTS_INDEX
    if index_path.is_file():
        try:
            weight_map = read_json_object(index_path)["weight_map"]
            shards = sorted(set(weight_map.values()))
        except (KeyError, TypeError, AttributeError) as exc:
            raise CheckpointError(f"{index_path} is not a valid shard index ({exc}).") from None
        for shard in shards:
            check_file_name(shard)
        return [index_path, *(folder / shard for shard in shards)]
    refuse_pickled_weights(folder)
    if path.exists() or path.is_symlink():  # a folder, a device, a FIFO, a dangling link
        raise CheckpointError(f"{path} is not a regular file, so it holds no weights to read.")
    raise CheckpointError(f"{folder} has no weights: {WEIGHTS_FILE} is missing.")


def read_weights(folder: Path, framework: str = "pt") -> dict:
    """The tensors of ``folder/model.safetensors``, or of the shards its index lists."""
    tensors = {}
    for path in weight_files(folder):
        if path.name != SHARDED_WEIGHTS_INDEX:
            tensors.update(read_safetensors_file(path, framework))
    return tensors


def weights_checksum(folder: Path) -> str:
    """The SHA-256 (hex) of the bytes of ``folder``'s weight files (:func:`weight_files`):
    what a LoRA checkpoint records of its base, to know it unchanged when loading."""
    digest = hashlib.sha256()
    for path in weight_files(folder):
        try:
            with open_regular_file(path) as (descriptor, _):
                while block := os.read(descriptor, 1 << 20):
                    digest.update(block)
        except OSError as exc:
            raise CheckpointError(f"cannot read {path}: {reason(exc)}.") from None
    return digest.hexdigest()


def describe_names(names: list[str], limit: int = 3) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")
