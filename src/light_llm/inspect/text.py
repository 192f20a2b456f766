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


def is_whole(value: object) -> bool:
    """An integer, a NumPy one too, that is not a bool (``True`` is never a count)."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def check_position(position: object, length: int) -> int:
    """``position`` (negative counts from the end) as an index into a prompt of ``length``
    tokens, else InspectError naming the range."""
    if not is_whole(position):
        raise InspectError(f"the position must be an integer, got {position!r}.")
    if not -length <= position < length:
        raise InspectError(
            f"position {position!r} is out of range: this prompt's positions run from 0 to "
            f"{length - 1} (or -{length} to -1 from the end)."
        )
    return int(position) + length if position < 0 else int(position)


def check_token(name: str, token: object, config) -> int:
    """``token`` as an int if it is an id of the model's vocabulary, else InspectError naming
    ``name`` and the range."""
    if not is_whole(token):
        raise InspectError(f"the {name} must be a token id, got {token!r}.")
    if not 0 <= token < config.vocab_size:
        raise InspectError(
            f"the {name} {token!r} is out of range: it is outside the model's vocabulary "
            f"(token ids run from 0 to {config.vocab_size - 1})."
        )
    return int(token)


def token_array(ids: object, config, what: str = "text", at_least: int = 2) -> np.ndarray:
    """``ids`` as a 1-D int64 array of ids in [0, vocab_size) with at least ``at_least``
    tokens, else InspectError."""
    array = id_array(ids, what, ndim=1)
    if array.size < at_least:
        need = "a token" if at_least == 1 else f"at least {at_least} tokens"
        if array.size == 0:
            raise InspectError(f"the {what} is empty: it needs {need}.")
        tokens = "token" if array.size == 1 else "tokens"
        raise InspectError(f"the {what} is {array.size} {tokens} long; it needs {need}.")
    check_id_range(array, config.vocab_size, what)
    return array.astype(np.int64)


def id_array(ids: object, what: str, ndim: int) -> np.ndarray:
    """``ids`` as a NumPy array of ``ndim`` dimensions (1: a text, 2: a batch (B, T)) of
    integers, else InspectError naming ``what``; it may be empty."""
    try:
        array = np.asarray(ids)
    except (TypeError, ValueError) as error:
        raise InspectError(f"the {what} must be a list of token ids ({error}).") from None
    shape = "1-D list" if ndim == 1 else "(B, T) array"
    if array.ndim != ndim or (array.size and not np.issubdtype(array.dtype, np.integer)):
        raise InspectError(f"the {what} must be a {shape} of integer token ids.")
    return array


def check_id_range(array: np.ndarray, vocab_size: int, what: str) -> None:
    """InspectError unless every id of the non-empty ``array`` lies in [0, vocab_size): the
    embedding lookup E[ids] (seed 000 §2) is defined for nothing else."""
    lowest, highest = array.min(), array.max()
    if lowest < 0 or highest >= vocab_size:
        bad = lowest if lowest < 0 else highest
        raise InspectError(
            f"token id {bad} of the {what} is outside the model's vocabulary (0 to "
            f"{vocab_size - 1})."
        )


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


def masked_windows(
    ids: np.ndarray, block_size: int, tokenizer, tokens_per_batch: int = BATCH_TOKENS
) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Batches (inputs, labels, start) for an encoder: ``[CLS] w [SEP]`` for consecutive
    windows w of ``block_size`` - 2 ids, masked by BERT's rule (15% chosen; of those 80%
    [MASK], 10% a random id, 10% kept: seed 003 §29), window k with the generator seeded
    (0, k) as ``light-llm eval`` masks, so the masks depend on nothing else. Labels are the
    chosen positions' ids, -1 elsewhere."""
    from light_llm.train.mlm import SEQUENTIAL_MASK_SEED, mask_tokens

    if getattr(tokenizer, "mask_id", None) is None:
        raise InspectError(
            "the masked-LM loss needs the encoder's WordPiece tokenizer (with [MASK])."
        )
    n = block_size - 2
    special = frozenset(
        {tokenizer.cls_id, tokenizer.sep_id, tokenizer.pad_id, tokenizer.mask_id, tokenizer.unk_id}
    )
    windows = [ids[start : start + n] for start in range(0, len(ids), n)]  # every id in one
    per_batch = max(1, tokens_per_batch // block_size)
    for first in range(0, len(windows), per_batch):
        rows, labels, starts = [], [], []
        for k in range(first, min(len(windows), first + per_batch)):
            example = np.concatenate([[tokenizer.cls_id], windows[k], [tokenizer.sep_id]])
            inputs, chosen = mask_tokens(
                torch_ids(example),
                mask_id=tokenizer.mask_id,
                vocab_size=tokenizer.vocab_size,
                special_ids=special,
                generator=np.random.default_rng([SEQUENTIAL_MASK_SEED, k]),
            )
            rows.append(inputs[0].numpy())
            labels.append(chosen[0].numpy())
            starts.append(k * n)
        width = max(len(row) for row in rows)
        if any(len(row) != width for row in rows):  # the short tail window: a batch of its own
            for row, label, start in zip(rows, labels, starts, strict=True):
                yield row[None], label[None], np.array([start])
            continue
        yield np.stack(rows), np.stack(labels), np.array(starts)


def torch_ids(example: np.ndarray):
    import torch

    return torch.as_tensor(example[None], dtype=torch.int64)


def scoring_batches(inspector, ids: np.ndarray, tokenizer=None, values_per_token=None):
    """The batches a text is scored in: next-token windows for a GPT (:func:`text_windows`),
    masked windows for an encoder (:func:`masked_windows`, which needs its ``tokenizer``)."""
    config = inspector.config
    tokens = batch_tokens(config, values_per_token)
    if inspector.encoder:
        return masked_windows(ids, config.block_size, tokenizer, tokens)
    return text_windows(ids, config.block_size, tokens)


def check_scored(count: int, ids: np.ndarray) -> int:
    """``count``, the tokens a text's loss is over, unless it is 0: an encoder's text whose
    masking chose none of its tokens (special ones such as [MASK] never are, and of the others
    15%), where there is no loss to measure: InspectError."""
    if count == 0:
        raise InspectError(
            f"no token of the text was chosen to be masked (of its {len(ids)}, special tokens "
            "such as [MASK] never are, the others 15% of the time), so there is no masked-LM "
            "loss to measure; give a longer text."
        )
    return count


def text_loss(inspector, ids: np.ndarray, patches=(), tokenizer=None) -> tuple[float, int]:
    """(mean loss, tokens scored) over the text ``ids`` under ``patches``: a GPT's next-token
    loss L = -(1/N) Σ_t log p(x_{t+1} | x_{<=t} in its window) over every token but the first
    (seed 000 §7); an encoder's masked-LM loss over the masked positions (seed 003 §29)."""
    total, count = 0.0, 0
    for inputs, targets, _ in scoring_batches(inspector, ids, tokenizer):
        losses = inspector.run(inputs, patches=patches, targets=targets).token_losses
        scored = ~np.isnan(losses)
        total += float(np.sum(losses[scored], dtype=np.float64))
        count += int(scored.sum())
    return total / check_scored(count, ids), count
