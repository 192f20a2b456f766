"""The PyTorch trainer's optimizer state and random-number generator states, for an exact
resume (the rest of the run's state is ``trainer_state.json``, :mod:`light_llm.train.state`).

    optimizer.safetensors   AdamW's moments m and v and step count t per parameter (tensors)
    optimizer.json          which parameter each tensor belongs to (the rest of the state dict)
    raw_weights.safetensors with --ema-beta, the trained weights beside the model file's average
                            (:mod:`light_llm.train.averaging`)
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import safetensors
import safetensors.torch
import torch

from light_llm.checkpoints.run import OPTIMIZER_TENSORS_FILE
from light_llm.errors import CheckpointError
from light_llm.train.averaging import RAW_WEIGHTS_FILE
from light_llm.untrusted import check_regular_file, read_json_object

OPTIMIZER_JSON_FILE = "optimizer.json"


def optimizer_files(state: dict[int, dict[str, Any]]) -> dict[str, bytes]:
    """An optimizer's per-parameter state (its state dict's ``"state"``) as
    ``optimizer.safetensors`` (tensor ``"{index}.{name}"``, e.g. ``"3.exp_avg"``) and
    ``optimizer.json`` (non-tensor entries)."""
    tensors: dict[str, torch.Tensor] = {}
    scalars: dict[str, dict[str, Any]] = {}
    for index, entries in state.items():
        for name, value in entries.items():
            if isinstance(value, torch.Tensor):
                tensors[f"{index}.{name}"] = value.detach().cpu().contiguous()
            else:
                scalars.setdefault(str(index), {})[name] = value
    return {
        OPTIMIZER_TENSORS_FILE: safetensors.torch.save(tensors),
        OPTIMIZER_JSON_FILE: json.dumps({"scalars": scalars}).encode("utf-8"),
    }


def load_optimizer_state(optimizer: torch.optim.Optimizer, folder: Path) -> None:
    """Put the state saved by :func:`optimizer_files` back into ``optimizer``.

    Only the per-parameter state is restored; the hyperparameters (betas, decay, learning
    rate) stay those of ``optimizer``, which the current configuration built.
    """
    try:
        check_regular_file(folder / OPTIMIZER_TENSORS_FILE)  # not a FIFO, not /dev/zero
        tensors = safetensors.torch.load_file(folder / OPTIMIZER_TENSORS_FILE)
        scalars = read_json_object(folder / OPTIMIZER_JSON_FILE)["scalars"]
    except (
        OSError,
        ValueError,
        KeyError,
        TypeError,
        RecursionError,
        safetensors.SafetensorError,
    ) as exc:
        raise CheckpointError(f"the optimizer state in {folder} is unreadable ({exc}).") from None
    state: dict[int, dict[str, Any]] = {}
    try:
        for key, tensor in tensors.items():
            index, name = key.split(".", 1)
            state.setdefault(int(index), {})[name] = tensor
        for index, entries in scalars.items():
            state.setdefault(int(index), {}).update(entries)
    except (ValueError, TypeError, AttributeError) as exc:
        raise CheckpointError(f"the optimizer state in {folder} is damaged ({exc}).") from None
    n_parameters = sum(len(group["params"]) for group in optimizer.param_groups)
    if state and max(state) >= n_parameters:
        raise CheckpointError(
            f"the optimizer state in {folder} is for more parameters than the model has."
        )
    full = optimizer.state_dict()
    full["state"] = state
    try:
        optimizer.load_state_dict(full)
    except (KeyError, TypeError, ValueError, RuntimeError) as exc:
        raise CheckpointError(f"the optimizer state in {folder} is damaged ({exc}).") from None


def raw_weights_file(raw: dict[str, torch.Tensor]) -> dict[str, bytes]:
    """The raw (trained) weights of a run that saves its weight average as the model."""
    tensors = {name: value.detach().cpu().contiguous() for name, value in raw.items()}
    return {RAW_WEIGHTS_FILE: safetensors.torch.save(tensors)}


def load_raw_weights(weights: dict[str, torch.Tensor], folder: Path) -> None:
    """Copy the raw weights :func:`raw_weights_file` saved in ``folder`` into ``weights``
    (the model's trainable parameters by name)."""
    try:
        check_regular_file(folder / RAW_WEIGHTS_FILE)
        saved = safetensors.torch.load_file(folder / RAW_WEIGHTS_FILE)
    except (OSError, ValueError, safetensors.SafetensorError) as exc:
        raise CheckpointError(f"the raw weights in {folder} are unreadable ({exc}).") from None
    if saved.keys() != weights.keys() or any(
        saved[name].shape != value.shape for name, value in weights.items()
    ):
        raise CheckpointError(
            f"the raw weights in {folder / RAW_WEIGHTS_FILE} do not fit the model's parameters."
        )
    for name, value in weights.items():
        value.copy_(saved[name])


# --------------------------------------------------------------------------- random numbers
def capture_rng_states() -> dict[str, Any]:
    """This process's generator states (Python, NumPy, torch CPU and CUDA), as JSON values."""
    numpy_state = np.random.get_state()
    python_state = random.getstate()
    states = {
        "python": [python_state[0], list(python_state[1]), python_state[2]],
        "numpy": [
            numpy_state[0],
            numpy_state[1].tolist(),
            int(numpy_state[2]),
            int(numpy_state[3]),
            float(numpy_state[4]),
        ],
        "torch": torch.get_rng_state().tolist(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        states["cuda"] = [state.tolist() for state in torch.cuda.get_rng_state_all()]
    return states


def restore_rng_states(states: dict[str, Any]) -> None:
    """Set the generators back to the states :func:`capture_rng_states` returned."""
    version, internal, gauss = states["python"]
    random.setstate((version, tuple(internal), gauss))
    name, keys, position, has_gauss, cached = states["numpy"]
    np.random.set_state((name, np.asarray(keys, dtype=np.uint32), position, has_gauss, cached))
    torch.set_rng_state(torch.tensor(states["torch"], dtype=torch.uint8))
    cuda_states = states.get("cuda")
    if cuda_states and torch.cuda.is_available():
        if len(cuda_states) == torch.cuda.device_count():
            torch.cuda.set_rng_state_all(
                [torch.tensor(state, dtype=torch.uint8) for state in cuda_states]
            )
