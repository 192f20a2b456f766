"""Checking a trainer state before a resume restores anything from it. The file itself,
``trainer_state.json``, is named, written and read by :mod:`light_llm.checkpoints.run`; the
optimizer files and generator states beside it are :mod:`light_llm.train.optimizer_state`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from light_llm.errors import CheckpointError, ConfigError
from light_llm.train.config import TrainConfig

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
