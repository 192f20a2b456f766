"""Worked example of weight-only int8 quantisation: one weight matrix of a trained model rounded
to 8-bit integers step by step (its scales, the rounding error, the error in a product), then
the whole model quantised, its loss and its greedy text against the float model's.

The model is the small character GPT the perplexity example trains (2 layers, width 32, tied
head; ``language_model_examples.trained_model``, trained once a process); it is copied before
it is quantised. The formula is the NumPy engine's (``light_llm/reference/quantize.py``); the
whole model is quantised by the PyTorch engine's (``light_llm/models/quantize.py``).
"""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import torch

from light_llm.explain import plots
from light_llm.explain.language_model_examples import TRAIN_BYTES, trained_model
from light_llm.explain.steps import Example, Step
from light_llm.generate import generate
from light_llm.models.quantize import quantize_gpt
from light_llm.reference.quantize import QMAX, dequantize_rows, quantize_rows
from light_llm.shakespeare import shakespeare_slice

SOURCE = "weight-only int8 (not in the seeds): s = absmax / 127, q = round(W / s)"
MATRIX = "transformer.h.0.mlp.c_fc.weight"  # W_1 of the first block: (128, 32)
SHOWN_ROWS, SHOWN_COLUMNS = 4, 6
HELD_OUT_BYTES = 6_000  # the text after the training slice, for the loss
PROMPT = "ROMEO:"
GREEDY_TOKENS = 200


def held_out_ids(tokenizer) -> list[int]:
    """The Shakespeare that follows the model's training slice, its unknown characters
    dropped (the tokenizer knows only those of the training slice)."""
    text = shakespeare_slice(TRAIN_BYTES + HELD_OUT_BYTES)[TRAIN_BYTES:]
    known = set(tokenizer.chars)
    return tokenizer.encode("".join(c for c in text if c in known))


def scored_characters(model, ids: list[int]) -> int:
    """How many of ``ids`` :func:`mean_loss` scores: its whole windows' targets."""
    block = model.config.block_size
    return (len(ids) - 1) // block * block


def mean_loss(model, ids: list[int]) -> float:
    """Mean next-token cross-entropy over ``ids`` cut into windows of the model's context."""
    block = model.config.block_size
    n = (len(ids) - 1) // block
    x = torch.tensor(ids[: n * block]).view(n, block)  # (n, T)
    y = torch.tensor(ids[1 : n * block + 1]).view(n, block)
    with torch.no_grad():
        return float(model(x, y)[1])


def stored_bytes(model) -> int:
    """The bytes of the model's tensors, each storage once: the tied head is the token table,
    which ``state_dict`` lists under both names."""
    tensors = {t.data_ptr(): t for t in model.state_dict().values()}
    return sum(t.numel() * t.element_size() for t in tensors.values())


def greedy_agreement(model, other, prompt_ids: list[int], n: int) -> tuple[int, float, list]:
    """How far greedy decoding of ``other`` follows ``model``'s: the count of leading tokens
    that are equal, the share of positions where ``other``'s argmax equals ``model``'s on
    ``model``'s own text (teacher-forced), and both token lists."""
    idx = torch.tensor([prompt_ids])
    ours = generate(model, idx, n, temperature=0.0)[0, len(prompt_ids) :]
    theirs = generate(other, idx, n, temperature=0.0)[0, len(prompt_ids) :]
    differ = (ours != theirs).nonzero()
    leading = int(differ[0]) if len(differ) else n
    text = torch.cat((idx[0], ours))[None, -model.config.block_size :]
    with torch.no_grad():
        same = model(text)[0].argmax(-1) == other(text)[0].argmax(-1)
    return leading, float(same.float().mean()), [ours.tolist(), theirs.tolist()]


def quantization_example() -> list[Step]:
    """s_i = max_j |W_ij| / 127, q_ij = round(W_ij / s_i), W_hat = q s, y = (x q^T) s on one
    matrix of a trained model; then the whole model in int8: loss and greedy text."""
    trained = trained_model()
    model, tokenizer = trained.model, trained.tokenizer
    w = model.state_dict()[MATRIX].numpy().astype(np.float64)  # (out, in)
    q, s = quantize_rows(w)
    error = dequantize_rows(q, s, np.float64) - w  # (out, in)
    r, c = SHOWN_ROWS, SHOWN_COLUMNS
    rows = [f"row {i}" for i in range(r)]
    columns = [f"col {j}" for j in range(c)]
    x = np.random.default_rng(0).normal(size=w.shape[1])  # one activation row
    y, y_int8 = x @ w.T, (x @ q.T.astype(np.float64)) * s  # (out,)
    int8_model = quantize_gpt(copy.deepcopy(model))
    ids = held_out_ids(tokenizer)
    loss, loss_int8 = mean_loss(model, ids), mean_loss(int8_model, ids)
    prompt = tokenizer.encode(PROMPT)
    leading, forced, (ours, theirs) = greedy_agreement(model, int8_model, prompt, GREEDY_TOKENS)
    float_bytes, int8_bytes = stored_bytes(model), stored_bytes(int8_model)
    return [
        Step(
            "W: the first rows and columns of one weight matrix",
            f"W_1 of the first block ({MATRIX}, {w.shape[0]} x {w.shape[1]}) of a small trained "
            "character GPT, in float32. Each row i makes output i.",
            w[:r, :c],
            SOURCE,
            rows=rows,
            columns=columns,
            key="w-slice",
        ),
        Step(
            "s_i = max_j |W_ij| / 127: one scale per row",
            f"The largest weight of each row (over all its {w.shape[1]} columns) divided by 127, "
            "so that it maps to ±127; symmetric, no zero point. These floats are stored beside "
            "the integers.",
            np.stack([np.abs(w[:r]).max(axis=1), s[:r]], axis=1),
            SOURCE,
            rows=rows,
            columns=("max |W_ij|", "s_i"),
            scientific=True,
            key="scales",
        ),
        Step(
            "W / s: each row in units of its scale",
            "Every weight divided by its row's scale: now between -127 and 127.",
            (w / s.astype(np.float64)[:, None])[:r, :c],
            SOURCE,
            rows=rows,
            columns=columns,
            key="w-over-s",
        ),
        Step(
            "q = round(W / s): the int8 weights",
            f"Rounded to the nearest integer, clipped to [-{QMAX}, {QMAX}]: one byte a weight "
            "instead of four.",
            q[:r, :c],
            SOURCE,
            rows=rows,
            columns=columns,
            key="q",
        ),
        Step(
            "W_hat - W = q s - W: the rounding error",
            "What rounding moved each weight: never more than half a step, |q s - W| <= s/2.",
            error[:r, :c],
            SOURCE,
            rows=rows,
            columns=columns,
            scientific=True,
            key="rounding-error",
        ),
        Step(
            "Largest |q s - W| / (s/2) over the whole matrix, and its mean",
            "The bound checked on every weight of the matrix: the largest error is at most 1 "
            "half-step (rounding to nearest); the mean near 0.5 (errors spread evenly).",
            [
                float((np.abs(error) / (s[:, None] / 2)).max()),
                float((np.abs(error) / (s[:, None] / 2)).mean()),
            ],
            SOURCE,
            columns=("largest", "mean"),
            key="error-in-half-steps",
        ),
        Step(
            "y = x W^T against (x q^T) s: the product",
            "One random activation row x times the float matrix, and times the integers with "
            "each output then multiplied by its row's scale (the scale leaves the sum): the "
            "first outputs, and the largest difference over all of them.",
            np.stack([y[:c], y_int8[:c], y_int8[:c] - y[:c]]),
            SOURCE,
            rows=("x W^T", "(x q^T) s", "difference"),
            columns=[f"y_{j}" for j in range(c)],
            scientific=True,
            key="product",
        ),
        Step(
            "The whole model in int8: bytes of weights",
            "Every linear layer and the tied head / token table in int8 with their scales; norms, "
            "biases and positions stay float32.",
            [float_bytes, int8_bytes, int8_bytes / float_bytes],
            SOURCE,
            columns=("float32", "int8", "ratio"),
            key="bytes",
        ),
        Step(
            "Loss on held-out text: float32, int8, difference (nats per character)",
            f"Mean cross-entropy on {scored_characters(model, ids):,} characters of "
            "Shakespeare after the training slice (whole windows of the model's context), "
            "each model on the same windows.",
            [loss, loss_int8, loss_int8 - loss],
            SOURCE,
            columns=("float32", "int8", "int8 - float32"),
            scientific=True,
            key="loss",
        ),
        Step(
            "Greedy text: leading characters equal, and top-1 agreement",
            f"Greedy decoding of {GREEDY_TOKENS} characters after {PROMPT!r}. float32: "
            f"{tokenizer.decode(ours)[:80]!r}... int8: {tokenizer.decode(theirs)[:80]!r}... "
            "The second number: the share of positions of the float model's text where both "
            "models' most likely next character is the same.",
            [leading, forced],
            SOURCE,
            columns=("equal leading characters", "top-1 agreement"),
            key="greedy",
        ),
    ]


def quantization_figures(folder: Path) -> list[Path]:
    """Row 0 of the matrix: W / s (the float weights in units of the scale) and q = round(W/s),
    the staircase rounding makes of it."""
    w = trained_model().model.state_dict()[MATRIX].numpy().astype(np.float64)
    q, s = quantize_rows(w)
    order = np.argsort(w[0])
    ratio = w[0, order] / float(s[0])
    path = plots.lines_figure(
        folder / "int8_rounding.png",
        np.arange(len(order)),
        [("W / s (float)", ratio, "-"), ("q = round(W / s) (int8)", q[0, order], "o")],
        f"Row 0 of {MATRIX}, its weights sorted: int8 rounding is a staircase of step s",
        "weight (sorted by value)",
        "units of s = max |W| / 127",
    )
    return [path]


EXAMPLES = (
    Example(
        "quantization",
        "weight-only int8: one trained matrix rounded to 8 bits step by step (scales, error, "
        "product), then the whole model's loss and greedy text before and after",
        quantization_example,
        quantization_figures,
    ),
)
