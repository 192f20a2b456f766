"""The sampling options both engines accept, checked by one rule: temperature τ >= 0 (0 is
greedy), top-k an integer >= 1, top-p in (0, 1] (seed 000 §8, seed 002 §11.2). No tensor
library needed.
"""

from __future__ import annotations

import math

from light_llm.errors import SamplingError
from light_llm.limits import is_real

# the temperature of every generation that is not given one: `light-llm generate`,
# generate_text, the explorer's generation and its next-token view
DEFAULT_TEMPERATURE = 0.8
# both engines' sentence for logits that leave no token to choose
NO_DISTRIBUTION = (
    "the logits hold NaN or +inf, or a row is -inf everywhere, so there is no distribution to "
    "sample from."
)


def validate_sampling(temperature: float, top_k: int | None, top_p: float | None) -> None:
    """Raise :class:`SamplingError` for options outside their range (seed 000 §8: τ, top-k,
    top-p)."""
    # also rejects NaN, "1" and infinity (logits / inf are 0, and a masked -inf / inf is NaN)
    if not is_real(temperature) or not 0.0 <= temperature < math.inf:
        raise SamplingError(
            f"temperature must be 0 (greedy) or a finite positive number, got {temperature!r}."
        )
    whole = is_real(top_k) and math.isfinite(top_k) and float(top_k).is_integer()
    if top_k is not None and (not whole or top_k < 1):
        raise SamplingError(f"top_k must be an integer of at least 1, got {top_k!r}.")
    if top_p is not None and (not is_real(top_p) or not 0.0 < top_p <= 1.0):
        raise SamplingError(f"top_p must be in (0, 1], got {top_p!r}.")


def check_text_tokenizer(tokenizer, vocab_size: int) -> None:
    """SamplingError unless ``tokenizer`` turns text into ids and back as light-llm's
    tokenizers do (``encode``, ``decode`` and ``eos_id``), every id of it a row of the model's
    embedding table of ``vocab_size`` rows: a generation from text needs one."""
    usable = callable(getattr(tokenizer, "encode", None)) and callable(
        getattr(tokenizer, "decode", None)
    )
    if not usable or not hasattr(tokenizer, "eos_id"):
        raise SamplingError(
            "tokenizer must be a light-llm tokenizer (light_llm.tokenizers.load_tokenizer(folder) "
            f"reads a checkpoint's), got {type(tokenizer).__name__}."
        )
    ids = getattr(tokenizer, "vocab_size", None)
    if isinstance(ids, int) and ids > vocab_size:
        raise SamplingError(
            f"the tokenizer has {ids:,} ids and the model {vocab_size:,}: they are not each "
            "other's (load both from one checkpoint folder)."
        )


def check_prompt_mask(mask) -> None:
    """SamplingError unless the attention mask (B, T) of a batch of prompts, a tensor or an
    array (either engine's: anything with ``tolist``), holds only 1 (a real token) and 0
    (padding), pads each prompt on its left (the newest token last, where the next one is
    drawn from: a row ending in padding would go on from a pad) and leaves every prompt a
    token (seed 003 §4)."""
    rows = [[float(value) for value in row] for row in mask.tolist()]
    if any(value not in (0.0, 1.0) for row in rows for value in row):
        raise SamplingError("the attention mask must hold only 1 (a real token) and 0 (padding).")
    for number, row in enumerate(rows):
        if not any(row):  # a row of padding alone is as empty as no column at all
            raise SamplingError("the prompt is empty: give at least one token.")
        if row[-1] == 0.0:
            raise SamplingError(
                f"the attention mask of prompt {number} ends in padding: pad prompts on the "
                "left, so that each one's newest token is last, where the next is drawn from."
            )
