"""The KV cache of the NumPy engine: each layer's keys and values for the tokens seen so far,
so that decoding one more token costs one token's work (seed 002 §11.2, eqs. 45-47).
Linear attention keeps its running sums instead (:class:`LinearAttentionState`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from light_llm.config import ModelConfig
from light_llm.reference.linear_attention import LinearAttentionState


@dataclass
class LayerKV:
    """One layer's keys and values, allocated to the full context:
    K_cache = [K_cache; k_new], V_cache = [V_cache; v_new] (seed 002 §11.2, eqs. 45-46)."""

    keys: np.ndarray  # (B, nh, T_max, hs)
    values: np.ndarray  # (B, nh, T_max, hs)

    def append(self, k: np.ndarray, v: np.ndarray, offset: int) -> tuple[np.ndarray, np.ndarray]:
        """Write the new keys and values at positions offset.. and return every cached one."""
        end = offset + k.shape[2]
        self.keys[:, :, offset:end] = k
        self.values[:, :, offset:end] = v
        return self.keys[:, :, :end], self.values[:, :, :end]


@dataclass
class KVCache:
    """Every layer's cache; ``length`` counts the cached positions."""

    layers: list = field(default_factory=list)
    length: int = 0
    previous_embedding: np.ndarray | None = None  # the smear's X_0 of the last token (B, d)

    @classmethod
    def allocate(cls, config: ModelConfig, batch_size: int, dtype=np.float32) -> KVCache:
        shape = (batch_size, config.n_head, config.block_size, config.head_dim)
        if config.attention == "linear":
            layers = [LinearAttentionState() for _ in range(config.n_layer)]
        else:
            layers = [
                LayerKV(np.zeros(shape, dtype=dtype), np.zeros(shape, dtype=dtype))
                for _ in range(config.n_layer)
            ]
        return cls(layers=layers, length=0)
