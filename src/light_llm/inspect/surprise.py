"""Surprise: how unexpected each token of a text was to the model.

    surprise_t = -ln p(x_t | x_<t)        in nats (seed 000 §7: one token's cross-entropy)

with the model's own top guess at that point and the rank of the actual token among all.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from light_llm.inspect.ablation import next_token_probs
from light_llm.inspect.inspector import Inspector
from light_llm.inspect.text import batch_tokens, text_windows, token_array


@dataclass
class Surprise:
    """For tokens 1..N-1 of the text ``ids`` (the first has no context): ``losses`` (N-1,)
    -ln p of the actual token, its ``probs`` and ``ranks`` (0 = the top guess), the model's
    ``top_ids`` and ``top_probs``; ``mean_loss`` over them."""

    ids: np.ndarray
    losses: np.ndarray
    probs: np.ndarray
    ranks: np.ndarray
    top_ids: np.ndarray
    top_probs: np.ndarray
    mean_loss: float


def surprise(model, ids) -> Surprise:
    """Each token's loss, probability and rank under ``model``, and the model's top guess, over
    the text ``ids`` (in consecutive windows of the context, as ``light-llm eval`` scores)."""
    inspector = Inspector(model)
    inspector.require_gpt(
        "surprise",
        "it scores each token from the tokens before it; an encoder predicts no next token "
        "(`light-llm inspect ablate` scores its masked-LM loss over a text).",
    )
    ids = token_array(ids, inspector.config, "text", 2)
    n = len(ids) - 1
    losses, probs, ranks = np.empty(n), np.empty(n), np.empty(n, dtype=np.int64)
    top_ids, top_probs = np.empty(n, dtype=np.int64), np.empty(n)
    config = inspector.config
    for inputs, targets, starts in text_windows(ids, config.block_size, batch_tokens(config)):
        trace = inspector.run(inputs, targets=targets)
        window_probs = next_token_probs(trace.logits)  # (B, T, V)
        actual = np.take_along_axis(window_probs, targets[..., None], -1)[..., 0]  # (B, T)
        for row, start in enumerate(starts):
            span = slice(start, start + inputs.shape[1])
            losses[span] = trace.token_losses[row]
            probs[span] = actual[row]
            ranks[span] = (window_probs[row] > actual[row][:, None]).sum(-1)
            top_ids[span] = window_probs[row].argmax(-1)
            top_probs[span] = window_probs[row].max(-1)
    return Surprise(ids, losses, probs, ranks, top_ids, top_probs, float(losses.mean()))
