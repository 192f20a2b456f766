"""The record of a run: ``metrics.jsonl`` (one JSON object per evaluation) and its loss curve.

Each evaluation appends one line ``{"iter", "train_loss", "val_loss", "lr", "tokens_per_s",
"elapsed_s", ...}`` and flushes it, like a log: a run killed at any moment keeps every line
written before, and a resumed run goes on appending to the same file.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from light_llm.atomic import append_line, atomic_file
from light_llm.errors import TrainingError

METRICS_FILE = "metrics.jsonl"
LOSS_CURVE_FILE = "loss_curve.png"


def perplexity(loss: float) -> float:
    """PPL = exp(mean negative log-likelihood per token) (seed 002 §10.2, eq. 44); inf when
    the loss is too large for a float."""
    try:
        return math.exp(loss)
    except OverflowError:
        return math.inf


class MetricsLog:
    """Appends one JSON object a line to ``folder/metrics.jsonl``."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / METRICS_FILE

    def start_fresh(self) -> None:
        """Empty the log (a new run in a folder where an old one was overwritten)."""
        try:
            self.path.unlink(missing_ok=True)
        except OSError as exc:
            raise TrainingError(f"cannot remove the old {self.path}: {exc.strerror}.") from None

    def append(self, record: dict[str, Any]) -> None:
        try:
            append_line(self.path, json.dumps(record))
        except OSError as exc:
            raise TrainingError(f"cannot append to {self.path}: {exc.strerror}.") from None

    def records(self) -> list[dict[str, Any]]:
        """Every complete line written so far (a line cut short by a kill is skipped)."""
        if not self.path.is_file():
            return []
        records = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                continue
        return records


def plot_loss_curve(records: list[dict[str, Any]], path: Path, title: str = "") -> None:
    """Train and validation loss against iteration, as a PNG written atomically to ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    iterations = [record["iter"] for record in records]
    figure, axes = plt.subplots(figsize=(7, 4.2), dpi=120)
    axes.plot(iterations, [r["train_loss"] for r in records], marker=".", label="train")
    axes.plot(iterations, [r["val_loss"] for r in records], marker=".", label="validation")
    axes.set_xlabel("iteration")
    axes.set_ylabel("cross-entropy loss (nats per token)")
    axes.set_title(title or "loss curve")
    axes.grid(alpha=0.3)
    axes.legend()
    figure.tight_layout()
    try:
        with atomic_file(path) as file:
            figure.savefig(file, format="png")
    except OSError as exc:
        raise TrainingError(f"cannot write the loss curve {path}: {exc.strerror}.") from None
    finally:
        plt.close(figure)


class ThroughputMeter:
    """Training tokens per second: over the last few iterations (for the progress bar) and
    since the previous evaluation (the ``tokens_per_s`` of metrics.jsonl, in both training
    loops); only the time of training steps is counted, evaluation and saving are not."""

    def __init__(self, smoothing: float = 0.1) -> None:
        self.smoothing = smoothing
        self.recent_rate = 0.0
        self.tokens = 0
        self.seconds = 0.0

    def add(self, tokens: int, seconds: float) -> None:
        rate = tokens / max(seconds, 1e-9)
        if self.recent_rate == 0.0:
            self.recent_rate = rate
        else:
            self.recent_rate += self.smoothing * (rate - self.recent_rate)
        self.tokens += tokens
        self.seconds += seconds

    def rate_since_last_call(self) -> float:
        rate = self.tokens / self.seconds if self.seconds > 0 else 0.0
        self.tokens, self.seconds = 0, 0.0
        return rate
