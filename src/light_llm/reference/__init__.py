"""The NumPy engine: the transformer with every forward and backward pass written by hand.

One file per concept, each operation a pair ``*_forward(...) -> (out, cache)`` and
``*_backward(dout, cache) -> gradients`` side by side (gradients named with a ``d`` prefix):

    linear.py            y = x W^T + b                          seed 002 §5
    embedding.py         E[idx]                                 seed 000 §2, 002 §10.2
    norms.py             LayerNorm, RMSNorm, x / RMS(x)         seed 000 §5, 001
    activations.py       GELU (exact, tanh), ReLU(²), SwiGLU    seed 000 §4, 001, 002 §9.2
    softmax.py           softmax (its Jacobian), log-softmax    seed 002 §4.4, §7.3, App. B.1
    attention.py         softmax(QK^T/sqrt(d_k))V, masks, heads seed 002 §7, §8.1
    linear_attention.py  causal linear attention                seed 002 §11.3
    positions.py         sinusoidal table, RoPE                 seed 002 §8.2
    dropout.py           inverted dropout                       seed 002 §12.1
    loss.py              cross-entropy, label smoothing         seed 000 §7, 002 §12.2
    softcap.py           logit soft-capping c tanh(z / c)       (Gemma 2)
    blocks.py            attention layer, FFN, block            seed 002 §9.1
    model.py             NumpyGPT: forward, backward            seed 000
    kv_cache.py          cached keys and values                 seed 002 §11.2
    optim.py             SGD + momentum, Adam, AdamW, clipping  seed 002 §4
    sampling.py          KV-cache generation, top-k / top-p     seed 000 §8, 002 §11.2
    gradcheck.py         central finite differences             seed 002 §2.2

Every array follows the dtype of its inputs: float64 for checking, float32 for speed.
"""

from light_llm.reference.model import NumpyGPT, parameter_shapes

__all__ = ["NumpyGPT", "parameter_shapes"]
