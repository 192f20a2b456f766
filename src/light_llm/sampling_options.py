"""The sampling options both engines accept, checked by one rule: temperature τ >= 0 (0 is
greedy), top-k an integer >= 1, top-p in (0, 1] (seed 000 §8, seed 002 §11.2). No tensor
library needed.
"""

from __future__ import annotations

from light_llm.errors import SamplingError


def validate_sampling(temperature: float, top_k: int | None, top_p: float | None) -> None:
    """Raise :class:`SamplingError` for options outside their range (seed 000 §8: τ, top-k,
    top-p)."""
    if temperature is None or not temperature >= 0.0:  # also rejects NaN
        raise SamplingError(f"temperature must be 0 (greedy) or positive, got {temperature}.")
    if top_k is not None and (isinstance(top_k, bool) or int(top_k) != top_k or top_k < 1):
        raise SamplingError(f"top_k must be an integer of at least 1, got {top_k}.")
    if top_p is not None and not 0.0 < top_p <= 1.0:
        raise SamplingError(f"top_p must be in (0, 1], got {top_p}.")
