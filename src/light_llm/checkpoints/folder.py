"""What a folder holds, decided once: a light-llm checkpoint (GPT or encoder), a training
output folder (its checkpoint is ``OUT/checkpoint``), a HuggingFace GPT-2, Llama or Qwen3
folder, or a HuggingFace BERT folder (a sentence-transformers model is one, with its pooling
files beside).

:func:`inspect_folder` resolves the path a user gave and reads its ``config.json`` once; the
loaders then only ask the :class:`ModelFolder` what it is. A config is checked here, before
any weight is read or any tensor allocated.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from light_llm.atomic import existing_folder, refuse_working_folder, write_folder_atomically
from light_llm.checkpoints.hf_architectures import LLAMA_MODEL_TYPES
from light_llm.checkpoints.run import (
    CHECKPOINT_SUBFOLDER,
    CONFIG_FILE,
    DATA_SUBFOLDER,
    LOCK_FILE,
    METRICS_FILE,
    TRAINER_STATE_FILE,
    WEIGHTS_FILE,
)
from light_llm.config import ModelConfig
from light_llm.errors import CheckpointError, ConfigError, reason
from light_llm.reference.quantize import check_quantization
from light_llm.tokenizers.registry import read_json

PICKLED_WEIGHTS = ("pytorch_model.bin", "pytorch_model.bin.index.json")
# where a training output folder's weights lie under a folder, OUT up to two levels down
RUN_PATTERNS = tuple(
    "/".join(["*"] * depth + [CHECKPOINT_SUBFOLDER, WEIGHTS_FILE]) for depth in range(3)
)
# every file name light-llm writes into a checkpoint folder: the config, the weights (or a
# LoRA run's adapters), the tokenizer (light_tokenizer.json, and vocab.txt for WordPiece),
# and a training run's state (trainer_state.json, the PyTorch optimizer's two files)
CHECKPOINT_NAMES = frozenset(
    {
        CONFIG_FILE,
        WEIGHTS_FILE,
        "adapters.safetensors",
        "light_tokenizer.json",
        "vocab.txt",
        "trainer_state.json",
        "optimizer.safetensors",
        "optimizer.json",
    }
)
FORMAT_NAME = "light-llm"
HF_ENCODER_MODEL_TYPES = ("bert", "roformer")  # config.json model_types light-llm reads
GPT_ARCHITECTURE = "gpt"
ENCODER_ARCHITECTURE = "bert"
ENCODER_USE = (  # where an encoder's folder is read
    "light-llm fill-mask, embed and eval (in Python: light_llm.checkpoints.load(folder, "
    'architecture="bert"))'
)


def resolve_checkpoint_dir(path: str | os.PathLike) -> Path:
    """The checkpoint folder ``path`` names: ``path`` itself, or ``path/checkpoint`` when
    ``path`` is a training output folder (no config.json of its own), falling back to the
    previous version of either when a write was interrupted."""
    if not isinstance(path, str | os.PathLike) or isinstance(os.fspath(path), bytes):
        raise CheckpointError(
            f"a checkpoint path is a str or a pathlib.Path, not {type(path).__name__}."
        )
    path = Path(path)
    try:
        folder = existing_folder(path)
    except OSError as exc:  # a name longer than the file system takes, a folder not readable
        raise CheckpointError(f"cannot read the checkpoint folder {path}: {reason(exc)}.") from None
    if folder is None:
        raise CheckpointError(f"no checkpoint folder at {path}.")
    if (folder / CONFIG_FILE).is_file():
        return folder
    inner = existing_folder(folder / CHECKPOINT_SUBFOLDER)
    if inner is not None:
        return inner
    return folder


def run_name(folder: Path) -> str:
    """What a picture or a card calls the model in ``folder``: the training run's folder name
    for a run's checkpoint (OUT/checkpoint, or a previous version beside it), else the
    folder's own name."""
    folder = Path(folder).absolute()
    is_checkpoint = folder.name == CHECKPOINT_SUBFOLDER or folder.name.startswith(
        f".{CHECKPOINT_SUBFOLDER}.old-"
    )
    return folder.parent.name if is_checkpoint and folder.parent.name else folder.name


def read_config_json(folder: Path) -> dict:
    """The JSON object in ``folder/config.json``."""
    path = folder / CONFIG_FILE
    if not path.is_file():
        if any((folder / name).exists() for name in (METRICS_FILE, LOCK_FILE, DATA_SUBFOLDER)):
            raise CheckpointError(  # OUT of a run that has not reached its first checkpoint
                f"{folder} is a training run's folder with no checkpoint yet (a run writes its "
                "first at its first evaluation); `light-llm train --serve PORT` shows a run as "
                "it trains."
            )
        if path.exists() or path.is_symlink():  # a folder, a device, a FIFO, a dangling link
            raise CheckpointError(
                f"{path} is not a regular file, so it cannot be read as a config."
            )
        raise CheckpointError(f"{folder} is not a checkpoint: it has no {CONFIG_FILE}.")
    return read_json(path)


@dataclass(frozen=True)
class ModelFolder:
    """A resolved model folder and its parsed ``config.json``."""

    path: Path
    config_json: dict

    @property
    def is_light_llm(self) -> bool:
        return self.config_json.get("format") == FORMAT_NAME

    @property
    def architecture(self) -> str | None:
        """ "gpt" or "bert" for a light-llm checkpoint, else None."""
        return self.config_json.get("architecture") if self.is_light_llm else None

    @property
    def is_hf_gpt2(self) -> bool:
        return self.config_json.get("model_type") == "gpt2"

    @property
    def is_hf_llama(self) -> bool:
        """A HuggingFace Llama or Qwen3 folder (:mod:`~light_llm.checkpoints.hf_llama_config`)."""
        return self.config_json.get("model_type") in LLAMA_MODEL_TYPES

    @property
    def is_hf_bert(self) -> bool:
        """A HuggingFace BERT folder, or a RoFormer one (BERT with rotary positions)."""
        return self.config_json.get("model_type") in HF_ENCODER_MODEL_TYPES

    @property
    def holds_encoder(self) -> bool:
        """A BERT-style encoder: a light-llm one or a HuggingFace BERT or RoFormer."""
        return self.architecture == ENCODER_ARCHITECTURE or self.is_hf_bert

    @property
    def weights_path(self) -> Path:
        return self.path / WEIGHTS_FILE

    @property
    def quantization(self) -> str | None:
        """ "int8" for a checkpoint written by ``light-llm quantize``, else None (float
        weights); CheckpointError for a quantisation light-llm does not know."""
        name = self.config_json.get("quantization") if self.is_light_llm else None
        if name is None:
            return None
        try:
            check_quantization(name)
        except ConfigError as exc:
            raise CheckpointError(f"{self.path / CONFIG_FILE}: {exc}") from None
        return name

    @property
    def holds_adapters(self) -> bool:
        """A LoRA run's checkpoint: adapters over a base model it names (checkpoints/lora.py)."""
        return self.is_light_llm and isinstance(self.config_json.get("lora"), dict)


def check_trainable(folder: ModelFolder, how: str) -> None:
    """CheckpointError when ``folder`` holds int8 weights: training (``how``: resumed,
    fine-tuned) moves the weights by small steps, which needs the float weights."""
    if folder.quantization is None:
        return
    raise CheckpointError(
        f"{folder.path} holds int8 weights (light-llm quantize) and cannot be {how}: training "
        "needs float weights; use the float checkpoint it was quantized from, or write these "
        f"back as float with light-llm quantize --checkpoint {folder.path} --out DIR "
        "--dequantize."
    )


def inspect_folder(path: str | os.PathLike | ModelFolder) -> ModelFolder:
    """The model folder ``path`` names (see :func:`resolve_checkpoint_dir`), its config.json
    read once; a folder inspected already is returned as it is, so that a command that hands
    it on to the loaders reads its config.json once."""
    if isinstance(path, ModelFolder):
        return path
    folder = resolve_checkpoint_dir(path)
    return ModelFolder(folder, read_config_json(folder))


def model_settings(folder: ModelFolder, config_class):
    """``config_class`` (ModelConfig, EncoderConfig) built and validated from the "model"
    object of a light-llm config.json; CheckpointError when that object is missing or
    invalid."""
    model = folder.config_json.get("model")
    source = folder.path / CONFIG_FILE
    if not isinstance(model, dict):
        raise CheckpointError(f'{source} lacks the "model" settings object.')
    try:
        return config_class.from_dict(model)
    except (ConfigError, TypeError) as exc:
        raise CheckpointError(f"{source} holds an invalid model config: {exc}") from None


def gpt_config(folder: ModelFolder) -> ModelConfig:
    """The validated GPT ModelConfig a folder describes (light-llm, HF GPT-2, Llama or
    Qwen3); CheckpointError naming what the folder holds instead."""
    if folder.is_hf_gpt2 or folder.is_hf_llama:
        from light_llm.checkpoints.hf_gpt2_config import config_from_hf
        from light_llm.checkpoints.hf_llama_config import config_from_hf_llama

        read = config_from_hf if folder.is_hf_gpt2 else config_from_hf_llama
        try:
            return read(folder.config_json)
        except ConfigError as exc:
            raise CheckpointError(f"{folder.path} cannot be loaded: {exc}") from None
    if not folder.is_light_llm:
        model_type = folder.config_json.get("model_type")
        if model_type in HF_ENCODER_MODEL_TYPES:
            raise CheckpointError(
                f"{folder.path} holds a HuggingFace {model_type} encoder, not a GPT: "
                f"use it with {ENCODER_USE}."
            )
        raise CheckpointError(
            f'{folder.path / CONFIG_FILE} is neither a light-llm checkpoint ("format": '
            f'"{FORMAT_NAME}") nor a HuggingFace GPT-2, Llama or Qwen3 one ("model_type": '
            '"gpt2", "llama" or "qwen3").'
        )
    if folder.architecture == ENCODER_ARCHITECTURE:
        raise CheckpointError(
            f"{folder.path} holds a BERT-style encoder, not a GPT: use it with {ENCODER_USE}."
        )
    if folder.architecture != GPT_ARCHITECTURE:
        raise CheckpointError(
            f"{folder.path / CONFIG_FILE} names an unknown architecture "
            f'{folder.architecture!r} (expected "gpt" or "bert").'
        )
    return model_settings(folder, ModelConfig)


def check_replaceable(out: str | os.PathLike, *sources: str | os.PathLike) -> None:
    """CheckpointError when writing a model folder at ``out`` (which replaces it as a unit)
    would destroy something: one of the model folders ``sources`` being read, a folder inside
    one (a file light-llm did not write there, which stops the next save into it), a
    folder that holds files but no model (no config.json), or a training run's checkpoint
    (its trainer state and optimizer, which ``train --resume`` continues from)."""
    out = Path(out)
    refuse_working_folder(out, f"--out {out}")
    target = out.resolve()
    for source in sources:
        if target == Path(source).resolve():
            raise CheckpointError(f"--out {out} is a model folder this command reads from.")
        if Path(source).resolve() in target.parents:
            raise CheckpointError(
                f"--out {out} is inside {source}, a model folder this command reads from; "
                "write it outside that folder."
            )
        if target in Path(source).resolve().parents:  # a run's folder, which holds its checkpoint
            raise CheckpointError(
                f"--out {out} holds {source}, a model folder this command reads from, which "
                "writing there would replace; give another folder."
            )
    if (out / TRAINER_STATE_FILE).is_file():
        raise CheckpointError(
            f"--out {out} holds a training run's checkpoint, which `light-llm train --resume` "
            "continues from; writing a model there would end that run: give another folder."
        )
    if out.is_dir() and any(out.iterdir()) and not (out / CONFIG_FILE).is_file():
        raise CheckpointError(
            f"--out {out} is a folder with files in it and no model; give a new folder or an "
            "existing model folder to replace."
        )


def refuse_pickled_weights(folder: Path) -> None:
    """CheckpointError when ``folder`` has PyTorch pickles but no safetensors weights."""
    for name in PICKLED_WEIGHTS:
        if (folder / name).exists():
            raise CheckpointError(
                f"{folder} holds its weights as {name}, a pickle that could run code when "
                "loaded; light-llm accepts only safetensors (re-save it with "
                "save_pretrained(..., safe_serialization=True))."
            )


def check_export_arguments(
    model: object,
    model_class: type,
    folder: object,
    tokenizer: object,
    overwrite: object = False,
    tokenizer_class: type | None = None,
) -> None:
    """ConfigError, before anything is written, for what an export cannot use: ``model`` not
    a ``model_class`` (a PyTorch GPT or encoder), ``folder`` not a path, ``overwrite`` not a
    bool ("no" is true, and would replace the user's files), or a ``tokenizer`` that is not a
    light-llm one (of ``tokenizer_class`` when given) with exactly the model's ids (the folder
    written would load in transformers and fail on the first text)."""
    if not isinstance(model, model_class):
        raise ConfigError(
            f"the model to export must be a {model_class.__name__}, got {type(model).__name__}."
        )
    if not isinstance(folder, str | os.PathLike):
        raise ConfigError(
            f"the folder to export to must be a path (a str or a Path), got {folder!r}."
        )
    if not isinstance(overwrite, bool):
        raise ConfigError(f"overwrite must be true or false, got {overwrite!r}.")
    if tokenizer is None:
        return
    expected = tokenizer_class or object
    if not (isinstance(tokenizer, expected) and callable(getattr(tokenizer, "save", None))):
        kind = f"a {tokenizer_class.__name__}" if tokenizer_class else "a light-llm tokenizer"
        raise ConfigError(f"the tokenizer must be {kind}, got {type(tokenizer).__name__}.")
    check_same_ids(
        tokenizer,
        model.config.vocab_size,
        ": export the model with the tokenizer it was trained with.",
    )


def check_same_ids(tokenizer, vocab_size: int, consequence: str) -> None:
    """ConfigError, before a folder is written, unless ``tokenizer`` has exactly the model's
    ``vocab_size`` ids (every loader refuses such a pair); ``consequence`` ends the sentence."""
    if tokenizer is not None and tokenizer.vocab_size != vocab_size:
        raise ConfigError(
            f"the tokenizer has {tokenizer.vocab_size:,} ids but the model has "
            f"{vocab_size:,}{consequence}"
        )


def tokenizer_files(tokenizer) -> dict[str, bytes]:
    """The files ``tokenizer.save`` writes, read back as bytes (it writes into a folder)."""
    with tempfile.TemporaryDirectory() as scratch:
        tokenizer.save(scratch)
        return {path.name: path.read_bytes() for path in Path(scratch).iterdir()}


def write_checkpoint(
    folder: str | os.PathLike,
    architecture: str,
    model_config: dict,
    weights: bytes,
    tokenizer=None,
    extra_files: Mapping[str, bytes] | None = None,
    overwrite: bool = False,
    *,
    weights_file: str = WEIGHTS_FILE,
    extra_config: Mapping | None = None,
) -> None:
    """Write a light-llm checkpoint folder as a unit: config.json ({"format": "light-llm",
    "architecture": ..., "model": ``model_config``, and ``extra_config``'s keys}),
    ``weights_file`` (``weights``, already serialised; model.safetensors unless the folder
    holds only LoRA adapters), the tokenizer's files and ``extra_files``. Every model of
    either engine is saved through here. A folder that holds files light-llm did not write
    is refused unless ``overwrite`` (:func:`light_llm.atomic.check_replaceable`)."""
    config_json = {"format": FORMAT_NAME, "architecture": architecture, "model": model_config}
    config_json.update(extra_config or {})
    files = {
        CONFIG_FILE: json.dumps(config_json, indent=2).encode("utf-8"),
        weights_file: weights,
    }
    if tokenizer is not None:
        files.update(tokenizer_files(tokenizer))
    for name, data in (extra_files or {}).items():
        if name in files:
            raise CheckpointError(f"extra checkpoint file {name!r} would overwrite the model's.")
        files[name] = data
    write_folder_atomically(folder, files, overwrite, names_before_manifests)


def is_light_llm_checkpoint(folder: Path) -> bool:
    """Whether ``folder`` holds a light-llm checkpoint (its config.json says so)."""
    try:
        return read_config_json(folder).get("format") == FORMAT_NAME
    except CheckpointError:
        return False


def names_before_manifests(folder: Path) -> frozenset[str]:
    """The file names light-llm may replace in ``folder`` when it has no manifest
    (``.light-llm-files``, which every checkpoint written before them lacks): the names a
    light-llm checkpoint holds (:data:`CHECKPOINT_NAMES`) when ``folder`` is one, none else;
    a user's ``notes.txt`` beside them is never light-llm's."""
    return CHECKPOINT_NAMES if is_light_llm_checkpoint(folder) else frozenset()
