"""Checkpoint folders: save and load a model as ``model.safetensors`` + ``config.json`` + tokenizer.

A light-llm checkpoint is a folder::

    config.json           {"format": "light-llm", "architecture": "gpt", "model": {ModelConfig}}
    model.safetensors     the weights, by GPT-2's names; a tied lm_head.weight is stored once
    light_tokenizer.json  the tokenizer (and any file it refers to)

:func:`load_model` also reads a HuggingFace GPT-2 folder (``config.json`` with ``"model_type":
"gpt2"`` and ``model.safetensors``), through :mod:`light_llm.interop.hf_gpt2`. Weights are
read from safetensors only: a pickle (``pytorch_model.bin``) can run code when it is loaded,
so it is refused, never opened.

The whole folder is replaced as a unit (:func:`write_folder_atomically`): a crash or a kill at
any moment leaves either the previous checkpoint or the new one, and the loader finds it.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import safetensors
import safetensors.torch
import torch

from light_llm.atomic import fsync_folder
from light_llm.config import ModelConfig
from light_llm.errors import CheckpointError, ConfigError
from light_llm.tokenizers.registry import read_json

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
SHARDED_WEIGHTS_INDEX = "model.safetensors.index.json"
PICKLED_WEIGHTS = ("pytorch_model.bin", "pytorch_model.bin.index.json")
CHECKPOINT_SUBFOLDER = "checkpoint"  # where training writes its checkpoint inside OUT
FORMAT_NAME = "light-llm"
ENCODER_COMMANDS = "light-llm fill-mask, embed and eval"


# --------------------------------------------------------------------------- atomic folders
def old_folder_prefix(folder: Path) -> str:
    """Name prefix of a previous version moved aside during a swap: ``.NAME.old-``."""
    return f".{folder.name}.old-"


def new_folder_prefix(folder: Path) -> str:
    """Name prefix of a version being written: ``.NAME.new-``."""
    return f".{folder.name}.new-"


def default_folder_mode() -> int:
    """0o777 less the process umask: what ``os.mkdir`` would have given (``tempfile.mkdtemp``
    makes its folders private, 0o700, which a checkpoint should not be)."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o777 & ~umask


def check_file_name(name: str) -> None:
    """File names in a checkpoint are plain names: no folders, nothing hidden."""
    if not name or name != Path(name).name or name.startswith("."):
        raise CheckpointError(f"checkpoint file names must be plain file names, got {name!r}.")


def write_folder_atomically(folder: str | os.PathLike, files: Mapping[str, bytes]) -> None:
    """Replace ``folder`` by a folder holding exactly ``files`` (name -> contents), as a unit.

    1. write every file into a fresh sibling ``.NAME.new-XXXX``, fsync each file and the folder;
    2. rename the current ``folder`` (if any) to ``.NAME.old-<time>-XXXX``;
    3. rename the new folder to ``folder`` and fsync the parent;
    4. remove the old folder (and any leftover of an earlier interrupted swap).

    A kill between 2 and 3 leaves no ``folder`` but a complete ``.old`` sibling, which
    :func:`existing_folder` (and so every loader here) falls back to.
    """
    folder = Path(folder)
    for name in files:
        check_file_name(name)
    parent = folder.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=parent, prefix=new_folder_prefix(folder)))
        os.chmod(staging, default_folder_mode())
    except OSError as exc:
        raise CheckpointError(f"cannot write the checkpoint {folder}: {exc.strerror}.") from None
    moved_aside: Path | None = None
    try:
        for name, data in files.items():
            with open(staging / name, "wb") as file:
                file.write(data)
                file.flush()
                os.fsync(file.fileno())
        fsync_folder(staging)
        if folder.exists():
            stamp = f"{time.time_ns():020d}-{secrets.token_hex(4)}"
            moved_aside = parent / f"{old_folder_prefix(folder)}{stamp}"
            os.replace(folder, moved_aside)
        os.replace(staging, folder)
        fsync_folder(parent)
    except BaseException as exc:
        if moved_aside is not None and not folder.exists():
            os.replace(moved_aside, folder)  # put the previous version back
        shutil.rmtree(staging, ignore_errors=True)
        if isinstance(exc, OSError):
            raise CheckpointError(
                f"cannot write the checkpoint {folder}: {exc.strerror or exc}; "
                "the previous one is unchanged."
            ) from None
        raise
    remove_leftovers(folder)


def remove_leftovers(folder: Path) -> None:
    """Delete ``.NAME.old-*`` and ``.NAME.new-*`` siblings: earlier versions and the staging
    folders of interrupted writes, all superseded once ``folder`` is in place."""
    prefixes = (old_folder_prefix(folder), new_folder_prefix(folder))
    for sibling in folder.parent.iterdir():
        if sibling.name.startswith(prefixes):
            shutil.rmtree(sibling, ignore_errors=True)


def existing_folder(folder: Path) -> Path | None:
    """``folder`` if it exists, else the newest complete previous version left beside it by an
    interrupted :func:`write_folder_atomically`, else None."""
    if folder.is_dir():
        return folder
    if not folder.parent.is_dir():
        return None
    previous = sorted(
        sibling
        for sibling in folder.parent.iterdir()
        if sibling.name.startswith(old_folder_prefix(folder)) and sibling.is_dir()
    )
    return previous[-1] if previous else None  # names sort by the time they were moved aside


def resolve_checkpoint_dir(path: str | os.PathLike) -> Path:
    """The checkpoint folder ``path`` names: ``path`` itself, or ``path/checkpoint`` when
    ``path`` is a training output folder (no config.json of its own), falling back to the
    previous version of either when a write was interrupted."""
    path = Path(path)
    folder = existing_folder(path)
    if folder is None:
        raise CheckpointError(f"no checkpoint folder at {path}.")
    if (folder / CONFIG_FILE).is_file():
        return folder
    inner = existing_folder(folder / CHECKPOINT_SUBFOLDER)
    if inner is not None:
        return inner
    return folder


# --------------------------------------------------------------------------- reading
def read_config_json(folder: Path) -> dict:
    """The JSON object in ``folder/config.json``."""
    path = folder / CONFIG_FILE
    if not path.is_file():
        raise CheckpointError(f"{folder} is not a checkpoint: it has no {CONFIG_FILE}.")
    return read_json(path)


def is_hf_gpt2(config_json: dict) -> bool:
    return config_json.get("model_type") == "gpt2"


def gpt_config_from_json(config_json: dict, folder: Path) -> ModelConfig:
    """The GPT ModelConfig a checkpoint's config.json describes (light-llm or HF GPT-2)."""
    if is_hf_gpt2(config_json):
        from light_llm.interop.hf_gpt2 import config_from_hf

        try:
            return config_from_hf(config_json)
        except ConfigError as exc:
            raise CheckpointError(f"{folder} cannot be loaded: {exc}") from None
    if config_json.get("format") != FORMAT_NAME:
        model_type = config_json.get("model_type")
        if model_type in ("bert", "distilbert"):
            raise CheckpointError(
                f"{folder} holds a HuggingFace {model_type} encoder, not a GPT: "
                f"use it with {ENCODER_COMMANDS}."
            )
        raise CheckpointError(
            f'{folder / CONFIG_FILE} is neither a light-llm checkpoint ("format": '
            f'"{FORMAT_NAME}") nor a HuggingFace GPT-2 one ("model_type": "gpt2").'
        )
    architecture = config_json.get("architecture")
    if architecture == "bert":
        raise CheckpointError(
            f"{folder} holds a BERT-style encoder, not a GPT: use it with {ENCODER_COMMANDS}."
        )
    if architecture != "gpt":
        raise CheckpointError(
            f"{folder / CONFIG_FILE} names an unknown architecture {architecture!r} "
            '(expected "gpt" or "bert").'
        )
    return model_settings(config_json, folder, ModelConfig)


def model_settings(config_json: dict, folder: Path, config_class):
    """``config_class`` (ModelConfig, EncoderConfig) built from the "model" object of a
    light-llm config.json; CheckpointError when that object is missing or invalid."""
    model = config_json.get("model")
    if not isinstance(model, dict):
        raise CheckpointError(f'{folder / CONFIG_FILE} lacks the "model" settings object.')
    try:
        return config_class.from_dict(model)
    except (ConfigError, TypeError) as exc:
        raise CheckpointError(
            f"{folder / CONFIG_FILE} holds an invalid model config: {exc}"
        ) from None


def load_config(path: str | os.PathLike) -> ModelConfig:
    """The GPT :class:`ModelConfig` of a checkpoint folder (light-llm or HF GPT-2), without
    reading its weights."""
    folder = resolve_checkpoint_dir(path)
    return gpt_config_from_json(read_config_json(folder), folder)


def refuse_pickled_weights(folder: Path) -> None:
    """CheckpointError when ``folder`` has PyTorch pickles but no safetensors weights."""
    for name in PICKLED_WEIGHTS:
        if (folder / name).exists():
            raise CheckpointError(
                f"{folder} holds its weights as {name}, a pickle that could run code when "
                "loaded; light-llm accepts only safetensors (re-save it with "
                "save_pretrained(..., safe_serialization=True))."
            )


def read_safetensors_file(path: Path) -> dict[str, torch.Tensor]:
    """Every tensor in one safetensors file (on the CPU)."""
    try:
        return safetensors.torch.load_file(path)
    except (safetensors.SafetensorError, OSError, ValueError) as exc:
        raise CheckpointError(f"{path} is not a readable safetensors file ({exc}).") from None


def read_weights(folder: Path) -> dict[str, torch.Tensor]:
    """The tensors of ``folder/model.safetensors``, or of the shards its index lists."""
    path = folder / WEIGHTS_FILE
    if path.is_file():
        return read_safetensors_file(path)
    index_path = folder / SHARDED_WEIGHTS_INDEX
    if index_path.is_file():
        try:
            weight_map = json.loads(index_path.read_text(encoding="utf-8"))["weight_map"]
            shards = sorted(set(weight_map.values()))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError) as exc:
            raise CheckpointError(f"{index_path} is not a valid shard index ({exc}).") from None
        tensors: dict[str, torch.Tensor] = {}
        for shard in shards:
            check_file_name(shard)
            tensors.update(read_safetensors_file(folder / shard))
        return tensors
    refuse_pickled_weights(folder)
    raise CheckpointError(f"{folder} has no weights: {WEIGHTS_FILE} is missing.")


def describe_names(names: list[str], limit: int = 3) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def load_weights_into(
    model: torch.nn.Module,
    tensors: dict[str, torch.Tensor],
    source: Path,
    tied_names: Sequence[str] | None = None,
) -> None:
    """Copy ``tensors`` into ``model``, which must expect exactly these names and shapes.

    ``tied_names`` are expected absent: they are stored once, as the token embedding (by
    default the GPT's lm_head.weight when tied). Any missing or unexpected name, or a shape
    that differs from the config's, is a CheckpointError naming it.
    """
    if tied_names is None:
        tied_names = ["lm_head.weight"] if model.config.tie_embeddings else []
    expected = dict(model.state_dict())
    for name in tied_names:
        expected.pop(name, None)
    missing = sorted(set(expected) - set(tensors))
    if missing:
        raise CheckpointError(
            f"{source} lacks the tensor(s) {describe_names(missing)} that its config needs."
        )
    unexpected = sorted(set(tensors) - set(expected))
    if unexpected:
        raise CheckpointError(
            f"{source} holds tensor(s) {describe_names(unexpected)} that its config does not have."
        )
    for name, target in expected.items():
        found = tensors[name]
        if found.shape != target.shape:
            raise CheckpointError(
                f"{source}: tensor {name} has shape {tuple(found.shape)} but the config "
                f"needs {tuple(target.shape)}."
            )
        with torch.no_grad():
            target.copy_(found)


def load_model(path: str | os.PathLike, device: str | torch.device = "cpu"):
    """A :class:`~light_llm.models.gpt.GPT` in eval mode from a light-llm checkpoint folder,
    a training output folder, or a HuggingFace GPT-2 folder, on ``device``."""
    from light_llm.models.gpt import GPT

    folder = resolve_checkpoint_dir(path)
    config_json = read_config_json(folder)
    if is_hf_gpt2(config_json):
        from light_llm.interop.hf_gpt2 import load_hf_gpt2

        return load_hf_gpt2(folder, device=device)
    config = gpt_config_from_json(config_json, folder)
    tensors = read_weights(folder)
    model = GPT(config)
    load_weights_into(model, tensors, folder / WEIGHTS_FILE)
    return model.to(device).eval()


# --------------------------------------------------------------------------- writing
def weights_to_save(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The model's state dict on the CPU, contiguous, with a tied lm_head.weight left out."""
    state = model.state_dict()
    if model.config.tie_embeddings:
        state.pop("lm_head.weight", None)
    return {name: tensor.detach().cpu().contiguous() for name, tensor in state.items()}


def tokenizer_files(tokenizer) -> dict[str, bytes]:
    """The files ``tokenizer.save`` writes, read back as bytes (it writes into a folder)."""
    with tempfile.TemporaryDirectory() as scratch:
        tokenizer.save(scratch)
        return {path.name: path.read_bytes() for path in Path(scratch).iterdir()}


def save_model(
    model: torch.nn.Module,
    folder: str | os.PathLike,
    tokenizer=None,
    extra_files: Mapping[str, bytes] | None = None,
) -> None:
    """Write ``model`` (and its tokenizer, and ``extra_files`` such as training state) as a
    light-llm checkpoint folder, replacing any previous one atomically."""
    weights = safetensors.torch.save(weights_to_save(model), metadata={"format": "pt"})
    write_checkpoint(folder, "gpt", model.config.to_dict(), weights, tokenizer, extra_files)


def write_checkpoint(
    folder: str | os.PathLike,
    architecture: str,
    model_config: dict,
    weights: bytes,
    tokenizer=None,
    extra_files: Mapping[str, bytes] | None = None,
) -> None:
    """Write a light-llm checkpoint folder as a unit: config.json ({"format": "light-llm",
    "architecture": ..., "model": ``model_config``}), model.safetensors (``weights``, already
    serialised), the tokenizer's files and ``extra_files``. Every model of either engine is
    saved through here."""
    config_json = {"format": FORMAT_NAME, "architecture": architecture, "model": model_config}
    files = {
        CONFIG_FILE: json.dumps(config_json, indent=2).encode("utf-8"),
        WEIGHTS_FILE: weights,
    }
    if tokenizer is not None:
        files.update(tokenizer_files(tokenizer))
    for name, data in (extra_files or {}).items():
        if name in files:
            raise CheckpointError(f"extra checkpoint file {name!r} would overwrite the model's.")
        files[name] = data
    write_folder_atomically(folder, files)
