"""Head roles: scores that name what an attention head does, read off its pattern A (seed 000
§3), each the mean of one entry of a row over the positions where it exists:

    previous-token score  = mean_t A[t, t-1]      (t >= 1): attends to the token just before
    first-token score     = mean_t A[t, 0]        (t >= 1): parks its attention on the first token
    induction score       = mean_t A[t, t-n+1]    over the second copy of a random sequence of
                            n tokens repeated twice: at token x in the second copy it attends to
                            the token that followed x's first occurrence (Olsson et al. 2022,
                            "In-context Learning and Induction Heads")

An induction circuit lets the model predict the second copy from the first, so its loss there
falls far below the first copy's (random tokens: about ln V), which is reported beside.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from light_llm.errors import InspectError
from light_llm.inspect.inspector import Inspector
from light_llm.inspect.text import is_whole, token_array
from light_llm.limits import check_seed


@dataclass
class HeadRoles:
    """(L, nh) scores: ``previous_token``, ``first_token`` (on the text, or the random
    sequences when no text was given), ``induction``; and the mean loss on the first and the
    second copy of the repeated random sequences (``n_sequences`` of ``length`` tokens);
    ``text_windows`` windows of ``text_window_length`` tokens of the text were read (0 and 0
    without a text)."""

    previous_token: np.ndarray
    first_token: np.ndarray
    induction: np.ndarray
    loss_first_copy: float
    loss_second_copy: float
    length: int
    n_sequences: int
    text_windows: int = 0
    text_window_length: int = 0


def patterns(inspector: Inspector, ids: np.ndarray, targets=None):
    """Every layer's attention weights on ``ids`` (B, T), (L, B, nh, T, T), and the token
    losses against ``targets`` (None without)."""
    config = inspector.config
    names = [f"pattern.{layer}" for layer in range(config.n_layer)]
    trace = inspector.run(ids, record=names, targets=targets)
    return np.stack([trace.activations[name] for name in names]), trace.token_losses


def diagonal_score(pattern: np.ndarray, offset: int, start: int) -> np.ndarray:
    """mean over rows t >= ``start`` of A[t, t - offset]: (L, B, nh, T, T) -> (L, nh)."""
    T = pattern.shape[-1]
    rows = np.arange(start, T)
    return pattern[..., rows, rows - offset].mean(axis=(1, 3))


def head_roles(
    model, ids=None, *, length: int | None = None, n_sequences: int = 8, seed: int = 0
) -> HeadRoles:
    """Previous-token, first-token and induction scores of every head of a causal GPT.
    ``ids``: a text (token ids: its first ``n_sequences`` windows of the context) for the first
    two scores;
    the induction test draws ``n_sequences`` random sequences of ``length`` tokens (default:
    half the context, at most 64) with ``seed``, each repeated twice."""
    inspector = Inspector(model)
    inspector.require_gpt(
        "head roles",
        "previous-token, first-token and induction heads belong to causal attention; an "
        "encoder attends both ways.",
    )
    config = inspector.config
    if isinstance(seed, np.integer):  # a NumPy integer, as every other count here takes
        seed = int(seed)
    check_seed(seed, InspectError)
    if config.block_size < 4:
        raise InspectError(
            f"head roles need a context of at least 4 tokens, this model's is {config.block_size}."
        )
    if length is None:
        length = min(64, config.block_size // 2)
    if not is_whole(length) or not 2 <= length <= config.block_size // 2:
        raise InspectError(
            f"the repeated sequence's length must be an integer from 2 to {config.block_size // 2} "
            f"(twice it must fit the context of {config.block_size}), got {length!r}."
        )
    if not is_whole(n_sequences) or not 1 <= n_sequences <= 1024:
        raise InspectError(f"n_sequences must be an integer from 1 to 1024, got {n_sequences!r}.")
    length, n_sequences = int(length), int(n_sequences)
    rng = np.random.default_rng(seed)
    first = rng.integers(0, config.vocab_size, size=(n_sequences, length))
    repeated = np.concatenate([first, first], axis=1)  # (n, 2 length)
    pattern, losses = patterns(inspector, repeated[:, :-1], repeated[:, 1:])  # t -> t+1
    induction = diagonal_score(pattern, length - 1, length)
    loss_first = float(losses[:, : length - 1].mean())  # tokens 1..n-1 of the first copy
    loss_second = float(losses[:, length:].mean())  # the tokens an induction head can copy
    rows = width = 0
    if ids is not None:  # up to n_sequences consecutive windows of the text
        text = token_array(ids, config, "text", 2)
        width = min(config.block_size, len(text))
        rows = max(1, min(n_sequences, len(text) // width))
        pattern, _ = patterns(inspector, text[: rows * width].reshape(rows, width))
    return HeadRoles(
        diagonal_score(pattern, 1, 1),
        first_token_score(pattern),
        induction,
        loss_first,
        loss_second,
        length,
        n_sequences,
        rows,
        width,
    )


def first_token_score(pattern: np.ndarray) -> np.ndarray:
    """mean over rows t >= 1 of A[t, 0]: (L, B, nh, T, T) -> (L, nh)."""
    return pattern[..., 1:, 0].mean(axis=(1, 3))
