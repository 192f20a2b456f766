"""A text (a token-id sequence of any length) scored by a model whose context is shorter: cut
into consecutive windows of the context length, each token predicted once from the tokens
before it in its window, as ``light-llm eval`` scores a validation split."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from light_llm.errors import InspectError

BATCH_TOKENS = 16_384  # tokens per forward pass when a text is scored in windows
BATCH_VALUES = 2**25  # values (logits, recorded activations) one such forward may hold


def batch_tokens(config, values_per_token: int | None = None) -> int:
    """Tokens per forward when a text is scored in windows: at most :data:`BATCH_TOKENS`, and
    few enough that ``values_per_token`` (default: the logits, V) x tokens stays under
    :data:`BATCH_VALUES` (about 128 MB of float32), and at least one window."""
    per_token = config.vocab_size if values_per_token is None else values_per_token
    return int(max(config.block_size, min(BATCH_TOKENS, BATCH_VALUES // max(1, per_token))))


def prompt_ids(ids: object, config, at_least: int = 1) -> np.ndarray:
    """``ids`` as a 1-D int64 array of token ids of the model's vocabulary, at most its context
    long and at least ``at_least`` tokens; InspectError otherwise."""
    array = token_array(ids, config, "prompt", at_least)
    if len(array) > config.block_size:
        raise InspectError(
            f"the prompt is {len(array)} tokens long, more than the model's context of "
            f"{config.block_size} tokens."
        )
    return array


def token_array(ids: object, config, what: str = "text", at_least: int = 2) -> np.ndarray:
    """``ids`` as a 1-D int64 array of ids in [0, vocab_size) with at least ``at_least``
    tokens, else InspectError."""
    try:
        array = np.asarray(ids)
    except (TypeError, ValueError) as error:
        raise InspectError(f"the {what} must be a list of token ids ({error}).") from None
    if array.ndim != 1 or (array.size and not np.issubdtype(array.dtype, np.integer)):
        raise InspectError(f"the {what} must be a 1-D list of integer token ids.")
    if array.size < at_least:
        need = "a token" if at_least == 1 else f"at least {at_least} tokens"
        raise InspectError(f"the {what} is empty: it needs {need}, got {array.size}.")
    if array.min() < 0 or array.max() >= config.vocab_size:
        bad = array.min() if array.min() < 0 else array.max()
        raise InspectError(
            f"token id {bad} of the {what} is outside the model's vocabulary (0 to "
            f"{config.vocab_size - 1})."
        )
    return array.astype(np.int64)


def text_windows(
    ids: np.ndarray, block_size: int, tokens_per_batch: int = BATCH_TOKENS
) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Batches (inputs (B, T), targets (B, T), start (B,)) of consecutive windows covering
    ``ids``: window w holds ids[w T : (w+1) T] and predicts ids[w T + 1 : (w+1) T + 1]; the
    tail shorter than T comes last, alone. ``start`` is each window's offset in ``ids``."""
    n_predicted = len(ids) - 1
    full = n_predicted // block_size
    per_batch = max(1, tokens_per_batch // block_size)
    for first in range(0, full, per_batch):
        starts = np.arange(first, min(full, first + per_batch)) * block_size
        rows = starts[:, None] + np.arange(block_size)  # (B, T)
        yield ids[rows], ids[rows + 1], starts
    tail = n_predicted - full * block_size
    if tail:
        start = full * block_size
        yield ids[None, start : start + tail], ids[None, start + 1 :], np.array([start])


def text_loss(inspector, ids: np.ndarray, patches=()) -> tuple[float, int]:
    """(mean next-token loss over every token of ``ids`` but the first, tokens scored), under
    ``patches``: L = -(1/N) Σ_t log p(x_{t+1} | x_{<=t} in its window) (seed 000 §7)."""
    total, count = 0.0, 0
    config = inspector.config
    for inputs, targets, _ in text_windows(ids, config.block_size, batch_tokens(config)):
        losses = inspector.run(inputs, patches=patches, targets=targets).token_losses
        total += float(np.sum(losses, dtype=np.float64))
        count += losses.size
    return total / count, count
