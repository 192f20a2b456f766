"""What a training run returns, and the names both training loops share (the PyTorch
:mod:`~light_llm.train.trainer` and the NumPy :mod:`~light_llm.train.numpy_trainer`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SAMPLE_TEMPERATURE = 0.8


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
