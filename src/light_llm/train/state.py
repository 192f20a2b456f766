"""Everything besides the weights that a run needs to continue exactly where it stopped.

A training checkpoint is a model checkpoint folder (see :mod:`light_llm.checkpoints`) with
three more files, all written with the folder as one unit:

    optimizer.safetensors   per parameter, AdamW's moments m, v and step t, or Muon's momentum
    optimizer.json          which parameter each tensor belongs to (the rest of the state dict)
    trainer_state.json      iteration, losses so far, the configuration, the random-number
                            generator states of every rank, the data position, the fp16 scaler

This module reads and writes ``trainer_state.json``, which both engines write (no torch
needed); the optimizer files and generator states are :mod:`light_llm.train.optimizer_state`.
Nothing is unpickled: tensors travel as safetensors, everything else as JSON.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from light_llm.errors import CheckpointError, ConfigError
from light_llm.train.config import TrainConfig
from light_llm.untrusted import read_json_object

TRAINER_STATE_FILE = "trainer_state.json"
TRAINER_STATE_FORMAT = "light-llm-trainer"
TRAINER_STATE_VERSION = 1


# --------------------------------------------------------------------------- trainer state
def trainer_state_file(state: dict[str, Any]) -> dict[str, bytes]:
    """``trainer_state.json`` holding ``state`` (tagged with its format and version)."""
    tagged = {"format": TRAINER_STATE_FORMAT, "version": TRAINER_STATE_VERSION, **state}
    return {TRAINER_STATE_FILE: json.dumps(tagged, indent=1).encode("utf-8")}


def read_trainer_state(folder: Path) -> dict[str, Any]:
    """The JSON object of ``folder/trainer_state.json``; CheckpointError when it is missing,
    unreadable or of another format."""
    path = folder / TRAINER_STATE_FILE
    if not path.is_file():
        raise CheckpointError(
            f"{folder} has no {TRAINER_STATE_FILE}, so it is a model, not a training run "
            "that can be continued."
        )
    state = read_json_object(path)
    if state.get("format") != TRAINER_STATE_FORMAT:
        raise CheckpointError(f"{path} is not a light-llm trainer state.")
    if state.get("version") != TRAINER_STATE_VERSION:
        raise CheckpointError(
            f"{path} has trainer-state version {state.get('version')}, but this light-llm "
            f"reads version {TRAINER_STATE_VERSION}."
        )
    return state


# what a run needs from its trainer state to continue: key -> the types its value may have
REQUIRED_FIELDS: dict[str, tuple[type, ...]] = {
    "iteration": (int,),
    "last_eval_iteration": (int,),
    "best_val_loss": (int, float),
    "elapsed_s": (int, float),
    "tokens_seen": (int,),
    "config": (dict,),
    "resolved_config": (dict,),
    "rng": (list,),
    "scaler": (dict,),
}


def check_fields(state: dict[str, Any], path: Path) -> None:
    """CheckpointError naming the first field of a trainer state that is missing or of the
    wrong type (a damaged trainer_state.json is refused before anything is restored)."""
    for key, types in REQUIRED_FIELDS.items():
        if key not in state:
            raise CheckpointError(f"{path} is damaged: it lacks {key!r}.")
        value = state[key]
        if isinstance(value, bool) or not isinstance(value, types):
            raise CheckpointError(
                f"{path} is damaged: {key!r} should be "
                f"{' or '.join(t.__name__ for t in types)}, not {value!r:.40}."
            )
    if state["iteration"] < 0 or state["tokens_seen"] < 0:
        raise CheckpointError(f"{path} is damaged: a negative iteration or token count.")
    if not all(isinstance(entry, dict) for entry in state["rng"]):
        raise CheckpointError(f"{path} is damaged: 'rng' should list one object per process.")
    for key in ("config", "resolved_config"):
        try:
            TrainConfig.from_dict(state[key])
        except ConfigError as exc:
            raise CheckpointError(f"{path} is damaged: its {key} is invalid ({exc})") from None
