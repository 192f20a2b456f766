"""Logit soft-capping, forward and backward: logits = c tanh(z / c) (Gemma 2; the NumPy twin of
``light_llm.nn.softcap``)."""

from __future__ import annotations

import numpy as np

from light_llm.errors import ConfigError


def softcap_forward(z: np.ndarray, cap: float) -> tuple[np.ndarray, np.ndarray]:
    """c · tanh(z / c): the identity near 0 (slope 1), bounded by ±c. An element-wise formula
    with no seed section of its own (the tanh of seed 000 §4's GELU approximation)."""
    if not cap > 0.0:
        raise ConfigError(f"the soft-cap c must be positive, got {cap}.")
    tanh = np.tanh(z / cap)
    return cap * tanh, tanh


def softcap_backward(dout: np.ndarray, cache: np.ndarray) -> np.ndarray:
    """d/dz c tanh(z / c) = 1 - tanh²(z / c): the chain rule, the c and 1/c cancelling."""
    tanh = cache
    return dout * (1.0 - tanh * tanh)
