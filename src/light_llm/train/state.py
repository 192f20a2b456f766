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

from light_llm.errors import CheckpointError

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
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"{path} is unreadable or not valid JSON ({exc}).") from None
    if not isinstance(state, dict) or state.get("format") != TRAINER_STATE_FORMAT:
        raise CheckpointError(f"{path} is not a light-llm trainer state.")
    if state.get("version") != TRAINER_STATE_VERSION:
        raise CheckpointError(
            f"{path} has trainer-state version {state.get('version')}, but this light-llm "
            f"reads version {TRAINER_STATE_VERSION}."
        )
    return state
