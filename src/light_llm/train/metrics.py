"""The numbers and the picture of a run's record (the records themselves, ``metrics.jsonl``,
are :mod:`light_llm.checkpoints.run`): perplexity, bits per byte, the throughput meter and the
loss curve.

Losses are in nats per token; bits per byte / per character are the same losses spread over the
split's text (:func:`bits_per_unit`), comparable across tokenizers.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from light_llm.atomic import atomic_file
from light_llm.checkpoints.run import evaluation_records, probe_records, training_records
from light_llm.errors import TrainingError, reason


def perplexity(loss: float) -> float:
    """PPL = exp(mean negative log-likelihood per token) (seed 002 §10.2, eq. 44); inf when
    the loss is too large for a float."""
    try:
        return math.exp(loss)
    except OverflowError:
        return math.inf


def bits_per_unit(loss: float, n_tokens: int, n_units: int) -> float:
    """A mean loss in nats per token as bits per byte (or per character) of the text those
    tokens encode: the total information n_tokens * loss, in bits (divided by ln 2, as
    log2 x = ln x / ln 2), spread over n_units:

        bpb = loss * n_tokens / (ln 2 * n_bytes)

    (seed 000 §7: the loss is the mean negative log-likelihood per token). Over a split
    whose tokens are its bytes (a character tokenizer on ASCII text) it is loss / ln 2."""
    if n_units <= 0:
        return math.nan
    return loss * n_tokens / (math.log(2) * n_units)


def centred_mean(values: list[float], points: int = 60) -> list[float]:
    """Each value replaced by the mean of a window centred on it, ``2h + 1`` values wide with
    h = len(values) / points (cut at the ends): s_k = mean(x_(k-h) .. x_(k+h)). Unlike a
    moving average of the past it does not lag: on a straight line it is the line itself."""
    half = max(1, round(len(values) / points))
    sums = [0.0]
    for value in values:
        sums.append(sums[-1] + value)
    out = []
    for k in range(len(values)):
        low, high = max(0, k - half), min(len(values), k + half + 1)
        out.append((sums[high] - sums[low]) / (high - low))
    return out


def bits_per_byte_factor(evaluations: list[dict[str, Any]]) -> float | None:
    """Bits per byte of the validation text per nat per token, val_bpb / val_loss (the split's
    tokens / (ln 2 x its bytes), see :func:`bits_per_unit`), from the last evaluation that has
    both; None when none has (an encoder's masked-LM loss, an older log)."""
    for record in reversed(evaluations):
        if record.get("val_bpb") and record.get("val_loss"):
            return record["val_bpb"] / record["val_loss"]
    return None


def plot_loss_curve(records: list[dict[str, Any]], path: Path, title: str = "") -> None:
    """The training loss of every logged iteration (faint) and its centred mean
    (:func:`centred_mean`, no lag), with the evaluations' train and validation losses on top,
    against iteration, as a PNG written atomically to ``path``; where the evaluations give bits per
    byte, a right-hand axis reads the validation losses in those units."""
    from matplotlib.figure import Figure  # no pyplot: no global state, no backend to choose

    figure = Figure(figsize=(9, 4.2), dpi=120)
    axes = figure.subplots()
    logged = training_records(records)
    if logged:
        steps, losses = [r["iter"] for r in logged], [r["loss"] for r in logged]
        axes.plot(steps, losses, color="tab:blue", alpha=0.25, linewidth=0.8)
        axes.plot(steps, centred_mean(losses), color="tab:blue", label="train batch (centred mean)")
    evaluations = evaluation_records(records)
    iterations = [record["iter"] for record in evaluations]
    for key, color, label in (
        ("train_loss", "tab:cyan", "train (evaluation)"),
        ("val_loss", "tab:orange", "validation"),
    ):
        # the evaluations' train loss as points alone where the logged steps draw the line
        style = {"linestyle": "none"} if logged and key == "train_loss" else {}
        values = [math.nan if r.get(key) is None else r[key] for r in evaluations]
        axes.plot(iterations, values, marker="o", color=color, label=label, **style)
    probes = probe_records(records)
    if probes:  # the probes' slice of validation text: a point every --probe-interval steps
        axes.plot(
            [r["iter"] for r in probes],
            [r["loss"] for r in probes],
            linestyle="none",
            marker=".",
            color="tab:red",
            label="validation slice (probes)",
        )
    axes.set_xlabel("iteration")
    axes.set_ylabel("cross-entropy loss (nats per token)")
    per_byte = bits_per_byte_factor(evaluations)
    if per_byte is not None:  # a right-hand scale in bits per byte of the validation text
        right = axes.secondary_yaxis(
            "right", functions=(lambda nats: nats * per_byte, lambda bits: bits / per_byte)
        )
        right.set_ylabel("validation bits per byte")
    axes.set_title(title or "loss curve")
    axes.grid(alpha=0.3)
    axes.legend(loc="upper left", bbox_to_anchor=(1.12, 1.0), fontsize=8)
    figure.tight_layout()
    try:
        with atomic_file(path) as file:
            figure.savefig(file, format="png")
    except OSError as exc:
        raise TrainingError(f"cannot write the loss curve {path}: {reason(exc)}.") from None


class ThroughputMeter:
    """Training tokens per second: over the last few iterations (for the progress bar) and
    since the previous evaluation (the ``tokens_per_s`` of metrics.jsonl, in both training
    loops) and over the whole run (``run_rate``); only the time of training steps is
    counted, evaluation and saving are not."""

    def __init__(self, smoothing: float = 0.1) -> None:
        self.smoothing = smoothing
        self.recent_rate = 0.0
        self.tokens = 0
        self.seconds = 0.0
        self.run_tokens = 0
        self.run_seconds = 0.0

    def add(self, tokens: int, seconds: float) -> None:
        rate = tokens / max(seconds, 1e-9)
        if self.recent_rate == 0.0:
            self.recent_rate = rate
        else:
            self.recent_rate += self.smoothing * (rate - self.recent_rate)
        self.tokens += tokens
        self.seconds += seconds
        self.run_tokens += tokens
        self.run_seconds += seconds

    @property
    def run_rate(self) -> float:
        """Tokens per second over every step added so far."""
        return self.run_tokens / self.run_seconds if self.run_seconds > 0 else 0.0

    def rate_since_last_call(self) -> float:
        rate = self.tokens / self.seconds if self.seconds > 0 else 0.0
        self.tokens, self.seconds = 0, 0.0
        return rate
