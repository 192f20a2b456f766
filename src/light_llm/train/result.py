"""What a training run returns, and the names both training loops share (the PyTorch
:mod:`~light_llm.train.trainer` and the NumPy :mod:`~light_llm.train.numpy_trainer`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from light_llm.sampling_options import DEFAULT_TEMPERATURE

SAMPLE_TEMPERATURE = DEFAULT_TEMPERATURE  # the final sample's: generate's default


@dataclass
class TrainResult:
    """What a training run did."""

    out: Path
    checkpoint: Path
    iteration: int  # optimiser steps taken in all, counting those before a resume
    losses: dict[int, float] = field(default_factory=dict)  # iteration -> training loss
    evaluations: list[dict[str, Any]] = field(default_factory=list)  # as in metrics.jsonl
    interrupted: bool = False
    sample: str | None = None
