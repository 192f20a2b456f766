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
