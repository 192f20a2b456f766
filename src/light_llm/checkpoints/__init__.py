"""Model folders: one layer that reads and writes every model light-llm knows.

    load(path)             a GPT (or with architecture="bert" an encoder) from any folder a
                           user may give: a light-llm checkpoint, a training output folder, a
                           HuggingFace GPT-2, Llama, Qwen3 or BERT folder (a
                           sentence-transformers model is one), a LoRA run's adapters (its
                           base loaded, checked and adapted)
    load_config(path)      its validated config, without reading the weights
    save(model, folder)    a light-llm checkpoint folder, written as a unit
    load_tokenizer(path)   the tokenizer that goes with it

The folder is inspected once (:mod:`~light_llm.checkpoints.folder`) and its config checked
before anything is allocated. ``engine="numpy"`` loads the NumPy engine's GPT; that path (and
this module) imports no torch.

    folder.py          what a folder is; config.json; writing a checkpoint folder
    tensors.py         safetensors files (PyTorch or NumPy tensors); pickles refused
    gpt.py             the PyTorch GPT
    encoder.py         the PyTorch BERT-style encoder
    numpy_gpt.py       the NumPy engine's GPT
    hf_architectures.py  which HuggingFace architecture computes what a config computes
    hf_gpt2_config.py    GPT-2's config.json and tensor names <-> light-llm's
    hf_gpt2.py           HuggingFace GPT-2 folders, read and written
    hf_llama_config.py   Llama's and Qwen3's config.json and tensor names <-> light-llm's
    hf_llama.py          HuggingFace Llama and Qwen3 folders, written (read by load)
    hf_tokenizer.py      a tokenizer as transformers' AutoTokenizer reads it
    hf_bert.py           HuggingFace BERT folders, read
    lora.py              a LoRA run's adapters over the base model they name
    run.py               a training run's output folder: its names, lock, records, trainer state
    discovery.py         which model a command uses when no --checkpoint names one
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from light_llm.checkpoints.folder import (
    ENCODER_ARCHITECTURE,
    GPT_ARCHITECTURE,
    ModelFolder,
    check_same_ids,
    gpt_config,
    inspect_folder,
    resolve_checkpoint_dir,
)
from light_llm.checkpoints.run import CHECKPOINT_SUBFOLDER, TRAINER_STATE_FILE
from light_llm.errors import CheckpointError, ConfigError, OutputError
from light_llm.limits import check_flag
from light_llm.reference.model import NumpyGPT

__all__ = [
    "CHECKPOINT_SUBFOLDER",
    "ModelFolder",
    "inspect_folder",
    "load",
    "load_config",
    "load_tokenizer",
    "resolve_checkpoint_dir",
    "save",
]

ARCHITECTURES = (GPT_ARCHITECTURE, ENCODER_ARCHITECTURE)
ENGINES = ("torch", "numpy")


def check_architecture(architecture: str) -> None:
    if architecture not in ARCHITECTURES:
        raise CheckpointError(
            f"unknown architecture {architecture!r}; expected one of {', '.join(ARCHITECTURES)}."
        )


def load(
    path: str | os.PathLike | ModelFolder,
    *,
    architecture: str = GPT_ARCHITECTURE,
    engine: str = "torch",
    device: str = "cpu",
    dtype=None,
    dequantize: bool = False,
):
    """The model in the folder ``path`` names, in eval mode.

    ``architecture`` "gpt" (a light-llm GPT or a HuggingFace GPT-2, Llama or Qwen3) or
    "bert" (a light-llm or HuggingFace BERT encoder) says which kind is wanted; a folder
    holding the other kind is a CheckpointError saying what it holds. ``engine="numpy"``
    gives a :class:`NumpyGPT` (``dtype`` float32 or float64, by default that of the weights);
    ``device`` ("cpu", "cuda", "cuda:1", "mps", "auto" or a torch.device) and ``dtype``
    (float32, float16, bfloat16 or float64, by name or as the torch dtype; default: as
    stored) are the PyTorch engine's. An argument this machine cannot honour is a
    ConfigError naming it, before anything is read. An int8 checkpoint (``light-llm
    quantize``) loads as the int8 GPT, or with ``dequantize`` (and always in the NumPy
    engine) as float weights W_hat = q s.
    """
    check_architecture(architecture)
    if engine not in ENGINES:
        raise CheckpointError(f"unknown engine {engine!r}; expected one of {', '.join(ENGINES)}.")
    if engine == "numpy":
        if not (isinstance(device, str) and device in ("cpu", "auto")):
            raise ConfigError(
                f"the NumPy engine runs on the CPU: device must be cpu, got {device!r}."
            )
        return load_model(path, architecture, engine, device, dtype, dequantize)
    from light_llm.device import check_device

    cast = None if dtype is None else torch_dtype(dtype)  # checked before anything is read
    model = load_model(path, architecture, engine, check_device(device), dtype, dequantize)
    return model if cast is None else model.to(cast)


def torch_dtype(dtype: object):
    """``dtype`` (a torch floating-point dtype or its name: "float32", "float16",
    "bfloat16", "float64") as a torch dtype; ConfigError naming the argument else."""
    import torch

    names = {
        "float32": torch.float32,
        "float16": torch.float16,
        "bfloat16": torch.bfloat16,
        "float64": torch.float64,
    }
    if isinstance(dtype, str) and dtype in names:
        return names[dtype]
    if dtype in names.values():
        return dtype
    raise ConfigError(f"dtype must be one of {', '.join(names)}, got {dtype!r}.")


def load_model(path, architecture: str, engine: str, device, dtype, dequantize: bool):
    """:func:`load` once its arguments are checked."""
    folder = inspect_folder(path)
    wants_encoder = architecture == ENCODER_ARCHITECTURE or (
        architecture is None and folder.holds_encoder and engine == "torch"
    )
    if engine == "numpy":
        if wants_encoder:
            raise CheckpointError("the numpy engine has no encoder; load it with engine='torch'.")
        if folder.holds_adapters:
            raise CheckpointError(
                f"{folder.path} holds LoRA adapters, which the numpy engine does not apply; "
                "fold them into the weights first with light-llm merge."
            )
        from light_llm.checkpoints.numpy_gpt import load_numpy_gpt

        return load_numpy_gpt(folder, dtype)
    if not wants_encoder and folder.holds_adapters:
        from light_llm.checkpoints.lora import load_lora_gpt

        return load_lora_gpt(folder, device)
    if not wants_encoder:
        from light_llm.checkpoints.gpt import load_gpt

        return load_gpt(folder, device, dequantize)
    if folder.is_hf_bert:
        from light_llm.checkpoints.hf_bert import load_hf_bert

        return load_hf_bert(folder.path, device)
    from light_llm.checkpoints.encoder import load_encoder

    return load_encoder(folder, device)


def load_config(path: str | os.PathLike | ModelFolder, architecture: str = GPT_ARCHITECTURE):
    """The validated config of the model in ``path`` (a GPT's :class:`ModelConfig`, or with
    ``architecture="bert"`` a light-llm encoder's EncoderConfig), without reading weights."""
    check_architecture(architecture)
    folder = inspect_folder(path)
    if architecture == GPT_ARCHITECTURE:
        return gpt_config(folder)
    from light_llm.checkpoints.encoder import encoder_config

    return encoder_config(folder)


def save(
    model, folder: str | os.PathLike, tokenizer=None, extra_files=None, *, overwrite=False
) -> None:
    """Write ``model`` (a GPT, a BertEncoder or a NumpyGPT), its tokenizer and any
    ``extra_files`` (name -> bytes) as a light-llm checkpoint folder, replacing any previous
    one as a unit. Saving never deletes a file light-llm did not write: a folder holding
    other files is an OutputError unless ``overwrite=True``, and so is a training run's
    checkpoint (its trainer state and optimizer, which ``train --resume`` continues from)
    unless what is saved carries a trainer state of its own (a trainer's checkpoint)."""
    check_flag("overwrite", overwrite)  # "no" is true: it would replace the user's files
    if not isinstance(folder, (str, os.PathLike)):
        raise ConfigError(f"folder must be a path (a str or a Path), got {folder!r}.")
    if extra_files is not None and not (
        isinstance(extra_files, Mapping)
        and all(
            isinstance(name, str) and isinstance(data, (bytes, bytearray))
            for name, data in extra_files.items()
        )
    ):
        raise ConfigError(
            f"extra_files must map file names to their bytes (a dict of str -> bytes), got "
            f"{extra_files!r:.80}."
        )
    check_no_run_ended(folder, extra_files, overwrite)
    if tokenizer is not None and not callable(getattr(tokenizer, "save", None)):
        raise ConfigError(
            "tokenizer must be a light-llm tokenizer (CharTokenizer, BPETokenizer, "
            f"GPT2Tokenizer, BertTokenizer: one with a save method) or None, got {tokenizer!r}."
        )
    if isinstance(model, NumpyGPT):
        from light_llm.checkpoints.numpy_gpt import save_numpy_gpt

        check_saveable(model, tokenizer, model.params)
        save_numpy_gpt(model, folder, tokenizer, extra_files, overwrite)
        return
    from light_llm.models.bert import BertEncoder

    if isinstance(model, BertEncoder):
        from light_llm.checkpoints.encoder import save_encoder

        check_saveable(model, tokenizer, model.state_dict())
        save_encoder(model, folder, tokenizer, extra_files, overwrite)
        return
    from light_llm.checkpoints.gpt import save_gpt
    from light_llm.models.gpt import GPT

    if not isinstance(model, GPT):
        raise CheckpointError(
            f"save writes a GPT, a BertEncoder or a NumpyGPT, not {type(model).__name__}."
        )
    check_saveable(model, tokenizer, model.state_dict())
    save_gpt(model, folder, tokenizer, extra_files, overwrite)


def check_no_run_ended(folder: str | os.PathLike, extra_files, overwrite: bool) -> None:
    """OutputError, unless ``overwrite``, when saving into ``folder`` would remove a training
    run's checkpoint (the trainer state and optimizer ``train --resume`` continues from):
    ``folder`` is that checkpoint and what is saved carries no trainer state of its own (a
    trainer's next checkpoint does), or ``folder`` is the run's folder holding it."""
    if overwrite:
        return
    if os.path.isfile(os.path.join(folder, TRAINER_STATE_FILE)):
        if extra_files and TRAINER_STATE_FILE in extra_files:
            return
        raise OutputError(
            f"{folder} holds a training run's checkpoint, whose trainer state and optimizer "
            "`light-llm train --resume` continues from and saving a model there would remove: "
            "give another folder, or overwrite=True to end that run."
        )
    if os.path.isfile(os.path.join(folder, CHECKPOINT_SUBFOLDER, TRAINER_STATE_FILE)):
        raise OutputError(
            f"{folder} is a training run's folder (its checkpoint, metrics and token cache), "
            "which saving a model there would replace: give another folder."
        )


def check_saveable(model, tokenizer, tensors: Mapping) -> None:
    """ConfigError, before anything is written, for a checkpoint that every loader would
    refuse: a tokenizer without exactly the model's ids (:func:`check_tokenizer_matches_model`)
    or weights holding NaN or infinite values (``tensors``: name -> array or tensor, of either
    engine)."""
    import numpy as np

    check_same_ids(
        tokenizer,
        model.config.vocab_size,
        ", so the saved checkpoint could not be loaded; save the model with the tokenizer it "
        "was trained with.",
    )
    for name, values in tensors.items():
        array = values if isinstance(values, np.ndarray) else values.detach().float().cpu().numpy()
        if array.dtype.kind == "f" and not np.isfinite(array).all():
            raise ConfigError(
                f"the model's {name} holds NaN or infinite values, so the saved checkpoint "
                "could not be loaded (its outputs would be meaningless); nothing was written."
            )


def load_tokenizer(path: str | os.PathLike | ModelFolder, check_model: bool = False):
    """The tokenizer of the model folder ``path`` names: a checkpoint, a training output
    folder (its checkpoint's tokenizer) or a HuggingFace folder (or one inspected already,
    :func:`inspect_folder`). ``check_model``: a CheckpointError unless it has as many ids as
    the folder's model (:func:`check_tokenizer_matches_model`; what every command that runs
    the model asks)."""
    from light_llm.tokenizers import load_tokenizer as load_tokenizer_files

    folder = path.path if isinstance(path, ModelFolder) else resolve_checkpoint_dir(path)
    tokenizer = load_tokenizer_files(folder)
    if check_model:
        config = model_config_of(inspect_folder(path))
        check_tokenizer_matches_model(tokenizer, config.vocab_size, folder)
        longest = getattr(tokenizer, "model_max_length", None)  # a WordPiece tokenizer's
        if longest is not None and longest > config.block_size >= 3:
            tokenizer.model_max_length = config.block_size  # the model has no more positions
    return tokenizer


def model_config_of(folder: ModelFolder):
    """The validated config of the model in ``folder``, without reading weights: a GPT
    (light-llm, GPT-2, Llama, Qwen3, LoRA), a light-llm encoder or a HF BERT or RoFormer (its
    head's tying, which only its weights show, left as the config says)."""
    if folder.is_hf_bert:
        from light_llm.checkpoints.hf_bert import encoder_config_from_hf

        return encoder_config_from_hf(folder.config_json, False, folder.path)
    architecture = ENCODER_ARCHITECTURE if folder.holds_encoder else GPT_ARCHITECTURE
    return load_config(folder, architecture)


def check_tokenizer_matches_model(tokenizer, vocab_size: int, folder) -> None:
    """CheckpointError unless ``tokenizer`` has exactly ``vocab_size`` ids, the model's: a
    tokenizer with more could encode text to ids the model has no row for, one with fewer
    could not turn some of the model's predictions into text. Said before any output."""
    if tokenizer.vocab_size == vocab_size:
        return
    consequence = (
        "text could encode to ids the model has no embedding for"
        if tokenizer.vocab_size > vocab_size
        else "some of the model's predictions could not be turned into text"
    )
    raise CheckpointError(
        f"the tokenizer in {folder} has {tokenizer.vocab_size:,} ids but the model has "
        f"{vocab_size:,}, so {consequence}; the checkpoint is inconsistent."
    )
