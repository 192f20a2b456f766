"""Weight averaging (``--ema-beta B``, ``--ema-start N``): an exponential moving average of
the weights beside the ones the optimizer trains, the same in both trainers.

With θ_k the weights after k optimiser steps and s = ``ema_start``, the average starts as a
copy of the weights at step s and follows them after every later step:

    θ̄_s = θ_s
    θ̄_k = β θ̄_{k-1} + (1 - β) θ_k          (k > s, 0 < β < 1)

so θ̄_k = β^(k-s) θ_s + (1 - β) Σ_{j=s+1..k} β^(k-j) θ_j, a mean over about the last
1 / (1 - β) steps. The optimizer keeps training the raw weights θ (the average never feeds back
into training: the training losses are the run's without it); what the run reports and
produces is the average, as timm's ``ModelEmaV3`` and modded-nanogpt's averaged runs do: every
evaluation (from step s on; before it the raw weights), the saved model, the probes and the
final sample are those of θ̄. Only the trainable parameters are averaged (a LoRA run's
adapters, not the frozen base).

The checkpoint therefore holds both: ``model.safetensors`` is the average (what ``generate``,
``export`` and ``serve`` read, like any model), and ``RAW_WEIGHTS_FILE`` holds the raw
weights θ_k the optimizer's state belongs to, so that ``--resume`` restores both and goes on
bit for bit as the run never stopped. Before step s no average exists: the model file is the
raw weights and there is no raw-weights file. A resume keeps the run's β and s (a change is
refused, :func:`light_llm.train.resume.setting_differences`).

:class:`WeightAverage` holds θ̄ for any arrays that multiply and add in place (NumPy arrays,
PyTorch tensors under ``torch.no_grad()``); it imports no tensor library, and each trainer
gives it its way of copying an array.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, MutableMapping
from pathlib import Path
from typing import Any

from light_llm.errors import CheckpointError

# the raw (trained) weights beside model.safetensors, the average, in a checkpoint
RAW_WEIGHTS_FILE = "raw_weights.safetensors"

Weights = MutableMapping[str, Any]


def ema_update(average: Weights, weights: Weights, beta: float) -> None:
    """θ̄ ← β θ̄ + (1 - β) θ, in place, for every array of ``average``."""
    for name, value in average.items():
        value *= beta
        value += (1.0 - beta) * weights[name]


class WeightAverage:
    """The moving average θ̄ of a run's weights (the module docstring): ``beta`` β,
    ``start`` s, ``copy`` a function returning a copy of one array."""

    def __init__(self, beta: float, start: int, copy: Callable[[Any], Any]) -> None:
        self.beta = beta
        self.start = start
        self.copy = copy
        self.average: dict[str, Any] | None = None

    def observe(self, weights: Weights, iteration: int) -> None:
        """Take in the weights after ``iteration`` optimiser steps (also at step 0, before
        the first): nothing before step s, θ̄_s = θ_s at it, then θ̄ = β θ̄ + (1 - β) θ."""
        if iteration < self.start:
            return
        if self.average is None:
            self.average = {name: self.copy(value) for name, value in weights.items()}
        else:
            ema_update(self.average, weights, self.beta)

    @contextlib.contextmanager
    def swapped_in(self, weights: Weights) -> Iterator[dict[str, Any] | None]:
        """Inside the block ``weights`` hold the average (when there is one yet) and the
        block is given a copy of the raw weights (None without an average); after it they
        hold the raw weights again, bit for bit."""
        if self.average is None:
            yield None
            return
        raw = {name: self.copy(value) for name, value in weights.items()}
        for name, value in weights.items():
            value[...] = self.average[name]
        try:
            yield raw
        finally:
            for name, value in weights.items():
                value[...] = raw[name]

    def resume(
        self,
        weights: Weights,
        checkpoint: Path,
        iteration: int,
        load_raw: Callable[[Weights, Path], None],
    ) -> None:
        """Take up the average a checkpoint of ``iteration`` saved: ``weights`` hold its model
        file, which is the average once it has begun, and become the raw weights beside it
        (``load_raw`` copies them in); before the average begins the file is the raw weights.
        CheckpointError when a checkpoint past the start has no raw weights."""
        if (checkpoint / RAW_WEIGHTS_FILE).exists():
            self.average = {name: self.copy(value) for name, value in weights.items()}
            load_raw(weights, checkpoint)
        elif iteration >= self.start:
            raise CheckpointError(
                f"{checkpoint} holds no {RAW_WEIGHTS_FILE} beside its weight average (from "
                f"iteration {self.start}), so it cannot be resumed."
            )
