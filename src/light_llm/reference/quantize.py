"""Weight-only int8 quantisation in NumPy, the readable form (the PyTorch engine's fast one is
``light_llm/nn/int8.py``; the two are tested equal).

A weight matrix W (out, in) is stored as int8 integers q and one float scale per output channel
(row) i, symmetric around 0:

    s_i = max_j |W_ij| / 127                     the row's largest weight maps to ±127
    q_ij = clip(round(W_ij / s_i), -127, 127)    round to the nearest integer
    W_hat_ij = q_ij s_i                           |W_hat_ij - W_ij| <= s_i / 2  (rounding error)

and a linear layer's product needs only q and s, the scale taken out of the sum:

    y_i = Σ_j x_j W_hat_ij + b_i = (Σ_j x_j q_ij) s_i + b_i,   i.e.  y = (x q^T) s + b

What is quantised in a GPT (:func:`quantized_names`): the linear layers of every block, the output
head and the token table (a tied head is the token table: one matrix, quantised once).
"""

from __future__ import annotations

import numpy as np

from light_llm.config import ModelConfig
from light_llm.errors import CheckpointError, ConfigError

QMAX = 127
QUANTIZATIONS = ("int8",)
SCALE_SUFFIX = "_scale"  # transformer.h.0.attn.c_attn.weight -> ...c_attn.weight_scale


def check_quantization(name: object) -> None:
    """ConfigError unless ``name`` is a quantisation light-llm knows."""
    if name not in QUANTIZATIONS:
        raise ConfigError(
            f"unknown quantization {name!r}; light-llm knows {', '.join(QUANTIZATIONS)}."
        )


def check_quantizable(folder, what: str) -> None:
    """ConfigError when the model folder ``folder`` (a ModelFolder) holds a BERT-style encoder:
    light-llm quantises GPTs. ``what`` names the command or flag asking."""
    if folder.holds_encoder:
        raise ConfigError(
            f"{what} works on GPTs; {folder.path} holds a BERT-style encoder, which light-llm "
            "does not quantize."
        )


def quantize_rows(weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """s_i = max_j |W_ij| / 127 and q_ij = clip(round(W_ij / s_i), -127, 127), row by row.
    W: (out, in) -> q (out, in) int8, s (out,) float32. A row of zeros gets s = 1/127 (q = 0
    whatever s is), so that every scale is positive. Computed in float64."""
    w = np.asarray(weight, dtype=np.float64)  # (out, in)
    absmax = np.abs(w).max(axis=1)  # (out,)
    scale = (np.where(absmax > 0, absmax, 1.0) / QMAX).astype(np.float32)  # (out,)
    q = np.clip(np.rint(w / scale.astype(np.float64)[:, None]), -QMAX, QMAX)  # (out, in)
    return q.astype(np.int8), scale


def check_codes(tensors, config: ModelConfig, source: object) -> None:
    """CheckpointError unless every int8 code of ``tensors`` (name -> array or CPU tensor)
    lies in [-127, 127], the range quantize_rows writes: |q_ij| = |round(W_ij / s_i)| <= 127
    since |W_ij| <= max_j |W_ij| = 127 s_i. A -128, which int8 can hold, is a weight beyond its
    row's largest; the checkpoint did not come from quantize_rows. ``source`` names the file."""
    for name in quantized_names(config):
        codes = np.asarray(tensors[name])
        if codes.size and int(codes.min()) < -QMAX:
            raise CheckpointError(
                f"{source}: int8 tensor {name} holds the code {int(codes.min())}, outside the "
                f"-{QMAX} to {QMAX} that quantization writes (|q| = |round(W / s)| <= {QMAX}); "
                "the checkpoint is damaged."
            )


def dequantize_rows(q: np.ndarray, scale: np.ndarray, dtype=np.float32) -> np.ndarray:
    """W_hat = q s: row i of q times s_i. (out, in) int8, (out,) -> (out, in) ``dtype``."""
    return q.astype(dtype) * scale.astype(dtype)[:, None]


def int8_linear_forward(
    x: np.ndarray, q: np.ndarray, scale: np.ndarray, bias: np.ndarray | None = None
) -> np.ndarray:
    """y = (x q^T) s + b: the integer weights first, each output column then times its row's
    scale. x: (..., in), q: (out, in) int8, s: (out,), b: (out,) -> (..., out) in x's dtype."""
    rows = x.reshape(-1, x.shape[-1])  # (N, in)
    y = (rows @ q.T.astype(x.dtype)) * scale.astype(x.dtype)  # (N, out)
    if bias is not None:
        y = y + bias
    return y.reshape(*x.shape[:-1], q.shape[0])


def quantized_names(config: ModelConfig) -> list[str]:
    """The weight names a GPT of ``config`` stores as int8 (each with ``<name>_scale`` of
    shape (out,) beside it): the token table, every block's linear layers (W^QKV, W^O, W_1,
    SwiGLU's V, W_2) and an untied head (a tied one is the token table)."""
    names = ["transformer.wte.weight"]
    for i in range(config.n_layer):
        linears = ["attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj"]
        if config.activation == "swiglu":
            linears.insert(3, "mlp.c_v")
        names += [f"transformer.h.{i}.{linear}.weight" for linear in linears]
    if not config.tie_embeddings:
        names.append("lm_head.weight")
    return names


def quantize_params(params: dict[str, np.ndarray], config: ModelConfig) -> dict[str, np.ndarray]:
    """A float GPT's parameters (by the PyTorch names) -> the int8 checkpoint's tensors: each of
    :func:`quantized_names` as q (int8) and ``<name>_scale`` s, the rest unchanged. ConfigError
    naming the first tensor that holds NaN or infinity (it has no scale)."""
    check_finite(params)
    out = dict(params)
    for name in quantized_names(config):
        out[name], out[name + SCALE_SUFFIX] = quantize_rows(params[name])
    return out


def dequantize_params(
    tensors: dict[str, np.ndarray], config: ModelConfig, dtype=np.float32
) -> dict[str, np.ndarray]:
    """An int8 checkpoint's tensors -> float parameters W_hat = q s (the inverse of
    :func:`quantize_params` up to the rounding, |W_hat - W| <= s/2), the scales dropped."""
    out = {name: value for name, value in tensors.items() if not name.endswith(SCALE_SUFFIX)}
    for name in quantized_names(config):
        out[name] = dequantize_rows(tensors[name], tensors[name + SCALE_SUFFIX], dtype)
    return out


def check_finite(params: dict[str, np.ndarray]) -> None:
    """ConfigError naming the first floating-point tensor that holds NaN or infinity."""
    for name, value in params.items():
        value = np.asarray(value)
        if value.dtype.kind == "f" and not np.isfinite(value).all():
            raise ConfigError(non_finite_weight_message(name))


def non_finite_weight_message(name: str) -> str:
    """The one sentence refusing to quantise a tensor that holds NaN or infinity."""
    return (
        f"tensor {name} holds NaN or infinite values, so it has no int8 scale (absmax / 127); "
        "the model's weights are corrupt, nothing was quantized."
    )
