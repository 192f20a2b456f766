"""Worked examples of seed 002 §12-13: inverted dropout keeping the expectation (eqs. 49-50),
label smoothing (eq. 51), Xavier and GPT-2 initialisation variances (eq. 52), and what float16
and bfloat16 lose in mixed precision (§13.2).

Dropout comes from the NumPy engine (``light_llm.reference.dropout``) and from the attention
code the models use (``light_llm.nn.attention.attention_explicit``); the smoothed loss from the
NumPy engine's cross-entropy and PyTorch's; the GPT's initial weights from
``light_llm.models.gpt``. Random draws are seeded, so every run shows the same numbers.
"""

from __future__ import annotations

import functools
import math
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from light_llm.config import preset
from light_llm.explain import plots
from light_llm.explain.attention_examples import CAT_SAT_Q, CAT_SAT_TOKENS, CAT_SAT_V, matrix
from light_llm.explain.steps import Example, Step
from light_llm.models.gpt import GPT, INIT_STD
from light_llm.nn.attention import attention_explicit, attention_mask
from light_llm.reference.dropout import dropout_forward
from light_llm.reference.loss import cross_entropy_forward

SEED = 0
SEED_002_DROPOUT = "seed 002 §12.1"
DROPOUT_P = 0.5
DROPOUT_INPUT = [1.0, -2.0, 0.5, 3.0, -1.5, 2.0, 0.25, -0.75]
DROPOUT_DRAWS = 20000  # copies averaged to show the expectation


@functools.cache
def dropout_draws() -> np.ndarray:
    """(Computed once, read-only.) DROPOUT_DRAWS dropped copies of DROPOUT_INPUT by the NumPy
    engine, from default_rng([SEED, 12]); the first row is the example's single draw."""
    rng = np.random.default_rng([SEED, 12])
    x = np.array(DROPOUT_INPUT)
    draws = np.stack([dropout_forward(x, DROPOUT_P, rng)[0] for _ in range(DROPOUT_DRAWS)])
    draws.setflags(write=False)
    return draws


def dropout() -> list[Step]:
    """Inverted dropout (seed 002 §12.1, eqs. 49-50): zero each entry with probability p, scale
    the survivors by 1/(1-p), so the expectation is kept and evaluation needs no change."""
    x = np.array(DROPOUT_INPUT)
    draws = dropout_draws()
    torch.manual_seed(SEED)
    q, v = matrix(CAT_SAT_Q)[None, None], matrix(CAT_SAT_V)[None, None]
    allowed = attention_mask(3, 3, 0, causal=True, key_padding=None, device=q.device)
    _, weights = attention_explicit(q, q, v, allowed)
    _, dropped_weights = attention_explicit(q, q, v, allowed, dropout_p=DROPOUT_P)
    columns = tuple(f"x{i}" for i in range(len(x)))
    square = {"rows": CAT_SAT_TOKENS, "columns": CAT_SAT_TOKENS}
    return [
        Step(
            "Inverted dropout of x, p = 0.5",
            f"Assumed: x = {DROPOUT_INPUT}. The NumPy engine's dropout: each entry is kept with "
            "probability 1 - p and then multiplied by 1/(1-p) = 2, or set to 0. Row 1: x; row "
            "2: one draw; row 3: the mask it used (0 or 2).",
            np.stack([x, draws[0], draws[0] / x]),
            f"{SEED_002_DROPOUT}, eq. 50",
            rows=("x", "dropped", "mask"),
            columns=columns,
            key="inverted-dropout-of-x-p-0-5",
        ),
        Step(
            f"Mean of {DROPOUT_DRAWS} dropped copies against x",
            "E[dropout(x)] = (1-p) · x/(1-p) + p · 0 = x: the scaling keeps the expected value, "
            "so at evaluation, with dropout off, the next layer sees inputs of the size it was "
            "trained on. The average of many draws approaches x (standard error "
            "|x_i| sqrt(p/(1-p)/N)).",
            np.stack([draws.mean(axis=0), x]),
            SEED_002_DROPOUT,
            rows=("mean of draws", "x"),
            columns=columns,
            key="mean-of-dropped-copies",
        ),
        Step(
            'Attention weights before dropout ("The cat sat", causal)',
            "The weights of seed 001's attention example, each row summing to 1.",
            weights[0, 0],
            f"{SEED_002_DROPOUT}, eq. 49",
            **square,
            key="attention-weights-before-dropout-the-cat-sat",
        ),
        Step(
            "Attention weights after dropout, p = 0.5",
            "Eq. 49 by the models' attention code in training (torch seed 0): some weights "
            "are dropped, the others doubled, so a row no longer sums to 1, only on average.",
            dropped_weights[0, 0],
            f"{SEED_002_DROPOUT}, eq. 49",
            **square,
            key="attention-weights-after-dropout-p-0-5",
        ),
        Step(
            "Row sums after dropout",
            "What each token's output is scaled by in this draw; 1 in expectation.",
            dropped_weights[0, 0].sum(-1),
            SEED_002_DROPOUT,
            columns=CAT_SAT_TOKENS,
            key="row-sums-after-dropout",
        ),
    ]


def dropout_figures(folder: Path) -> list[Path]:
    draws = dropout_draws()
    labels = [f"x{i}" for i in range(len(DROPOUT_INPUT))]
    series = [
        ("x", np.array(DROPOUT_INPUT)),
        ("one dropped draw", draws[0]),
        (f"mean of {DROPOUT_DRAWS} draws", draws.mean(axis=0)),
    ]
    title = f"Inverted dropout, p = {DROPOUT_P}: survivors doubled, the expectation kept"
    return [plots.grouped_bars(folder / "dropout.png", series, labels, title, "value")]


# ----------------------------------------------------------------------- label smoothing
SEED_002_SMOOTHING = "seed 002 §12.2"
SMOOTHING_LOGITS = [2.0, 0.5, 4.0, -1.0, 1.0]
SMOOTHING_TARGET = 2
SMOOTHING_ALPHA = 0.1


def smoothed_target(vocab: int, target: int, alpha: float) -> np.ndarray:
    """y_smooth = (1 - α) y + α/V (seed 002 §12.2, eq. 51) for a one-hot y at ``target``."""
    return (1 - alpha) * np.eye(vocab)[target] + alpha / vocab


def confidence_losses(alpha: float, confidences: np.ndarray) -> np.ndarray:
    """The smoothed loss -Σ y_smooth log p when the target gets probability c and the other
    V - 1 classes share 1 - c equally, for each c in ``confidences``."""
    vocab = len(SMOOTHING_LOGITS)
    y = smoothed_target(vocab, SMOOTHING_TARGET, alpha)
    losses = []
    for c in confidences:
        p = np.full(vocab, (1 - c) / (vocab - 1))
        p[SMOOTHING_TARGET] = c
        losses.append(-(y * np.log(p)).sum())
    return np.array(losses)


def label_smoothing() -> list[Step]:
    """Label smoothing (seed 002 §12.2, eq. 51): the smoothed target, the loss by the NumPy
    engine and by PyTorch, its gradient p - y_smooth, and the confidence it rewards."""
    vocab = len(SMOOTHING_LOGITS)
    logits = torch.tensor([SMOOTHING_LOGITS], dtype=torch.float64, requires_grad=True)
    target = torch.tensor([SMOOTHING_TARGET])
    y_smooth = smoothed_target(vocab, SMOOTHING_TARGET, SMOOTHING_ALPHA)
    torch_loss = F.cross_entropy(logits, target, label_smoothing=SMOOTHING_ALPHA)
    torch_loss.backward()
    engine_loss, _ = cross_entropy_forward(
        np.array([SMOOTHING_LOGITS]), np.array([SMOOTHING_TARGET]), label_smoothing=SMOOTHING_ALPHA
    )
    engine_plain, _ = cross_entropy_forward(
        np.array([SMOOTHING_LOGITS]), np.array([SMOOTHING_TARGET])
    )
    p = torch.softmax(logits.detach()[0], -1)
    confidences = np.array(
        [0.5, 0.8, 0.9, 1 - SMOOTHING_ALPHA + SMOOTHING_ALPHA / vocab, 0.99, 0.999]
    )
    classes = tuple(f"class {i}" for i in range(vocab))
    return [
        Step(
            "Logits z and p = softmax(z), target class 2",
            "Assumed: five classes and these logits; the true class is 2.",
            torch.stack([logits.detach()[0], p]),
            SEED_002_SMOOTHING,
            rows=("z", "p"),
            columns=classes,
            key="logits-z-and-p-softmax-z-target-class-2",
        ),
        Step(
            "y_smooth = (1 - α) y + α / V",
            f"Eq. 51 with α = {SMOOTHING_ALPHA}, V = {vocab}: the one-hot target gives up α of "
            f"its mass, spread evenly: 1 - α + α/V = {y_smooth[SMOOTHING_TARGET]:g} on the true "
            f"class, α/V = {SMOOTHING_ALPHA / vocab:g} on every other.",
            y_smooth,
            f"{SEED_002_SMOOTHING}, eq. 51",
            columns=classes,
            key="y-smooth-1-alpha-y-alpha-v",
        ),
        Step(
            "Loss -Σ y_smooth log p: NumPy engine, PyTorch, and without smoothing",
            "The NumPy engine's cross-entropy and PyTorch's (label_smoothing = 0.1) agree; "
            "without smoothing the loss is -log p_2 alone.",
            [engine_loss, torch_loss.item(), engine_plain],
            SEED_002_SMOOTHING,
            columns=("engine", "PyTorch", "α = 0"),
            key="loss-sigma-y-smooth-log-p-numpy",
        ),
        Step(
            "Gradient at the logits: p - y_smooth",
            "By autograd: the smoothed target replaces the one-hot in 'predicted minus true'. "
            "It stops pushing once p equals y_smooth, instead of pushing p_2 towards 1 forever.",
            logits.grad[0],
            f"{SEED_002_SMOOTHING}; seed 002 §2.3",
            columns=classes,
            key="gradient-at-the-logits-p-y-smooth",
        ),
        Step(
            "Smoothed loss against the confidence c in the true class",
            "The rest of the mass spread evenly. Without smoothing the loss -log c falls all "
            "the way to c = 1 (infinite logits); with it, the minimum is at c = 1 - α + α/V "
            "= 0.92 and rises beyond: over-confidence costs.",
            np.stack(
                [
                    confidence_losses(0.0, confidences),
                    confidence_losses(SMOOTHING_ALPHA, confidences),
                ]
            ),
            SEED_002_SMOOTHING,
            rows=("α = 0", f"α = {SMOOTHING_ALPHA}"),
            columns=tuple(f"c={c:g}" for c in confidences),
            key="smoothed-loss-against-the-confidence-c-in",
        ),
    ]


def label_smoothing_figures(folder: Path) -> list[Path]:
    confidences = np.linspace(0.3, 0.999, 300)
    best = 1 - SMOOTHING_ALPHA + SMOOTHING_ALPHA / len(SMOOTHING_LOGITS)
    return [
        plots.lines_figure(
            folder / "label_smoothing.png",
            confidences,
            [
                ("no smoothing: -log c", confidence_losses(0.0, confidences), "-"),
                (
                    f"α = {SMOOTHING_ALPHA} (minimum at c = {best:g})",
                    confidence_losses(SMOOTHING_ALPHA, confidences),
                    "-",
                ),
            ],
            "Label smoothing (seed 002 §12.2, eq. 51): the loss no longer rewards certainty",
            "probability c given to the true class",
            "loss",
        )
    ]


# ------------------------------------------------------------------------ initialisation
SEED_002_INIT = "seed 002 §13.1"
XAVIER_SHAPES = ((64, 64), (384, 1152), (1536, 384), (256, 16))  # (n_in, n_out)
DEPTH = 12  # layers of the signal-propagation table
WIDTH = 256


def xavier_weight(n_in: int, n_out: int) -> torch.Tensor:
    """A (n_out, n_in) weight drawn by torch.nn.init.xavier_normal_ (torch seed 0)."""
    torch.manual_seed(SEED)
    weight = torch.empty(n_out, n_in, dtype=torch.float64)
    return torch.nn.init.xavier_normal_(weight)


@functools.cache
def signal_variances() -> np.ndarray:
    """(Computed once, read-only.) Variance of the activations after each of DEPTH linear
    layers of width WIDTH (no non-linearity), for inputs N(0, 1), under three inits: Xavier,
    N(0, 0.02²) (GPT-2's), N(0, 1); (DEPTH + 1, 3)."""
    generator = torch.Generator().manual_seed(SEED)
    x0 = torch.randn(256, WIDTH, generator=generator, dtype=torch.float64)
    stds = (math.sqrt(2 / (WIDTH + WIDTH)), INIT_STD, 1.0)
    table = []
    for std in stds:
        x, row = x0, [float(x0.var())]
        for _ in range(DEPTH):
            weight = torch.randn(WIDTH, WIDTH, generator=generator, dtype=torch.float64) * std
            x = x @ weight.T
            row.append(float(x.var()))
        table.append(row)
    result = np.array(table).T
    result.setflags(write=False)
    return result


@functools.cache
def weight_variances() -> tuple[np.ndarray, np.ndarray, int]:
    """(Computed once, read-only.) Measured and formula variances of Xavier-normal weights of
    each shape in XAVIER_SHAPES; of a fresh GPT's (seed 000's width, one layer) attention and
    MLP input matrices against 0.02²; and that GPT's width."""
    xavier = np.array(
        [
            [float(xavier_weight(n_in, n_out).var()), 2 / (n_in + n_out)]
            for n_in, n_out in XAVIER_SHAPES
        ]
    )
    torch.manual_seed(SEED)
    model = GPT(preset("seed-30m", vocab_size=512, n_layer=1))
    gpt = np.array(
        [
            [float(parameter.detach().double().var()), INIT_STD**2]
            for name, parameter in model.named_parameters()
            if name in ("transformer.h.0.attn.c_attn.weight", "transformer.h.0.mlp.c_fc.weight")
        ]
    )
    xavier.setflags(write=False)
    gpt.setflags(write=False)
    return xavier, gpt, model.config.n_embd


def initialization() -> list[Step]:
    """Xavier/Glorot's N(0, 2/(n_in + n_out)) (seed 002 §13.1, eq. 52) measured on drawn
    weights, GPT-2's N(0, 0.02²) in the GPT (seed 000 §10), and the activation variance each
    gives through a deep linear stack."""
    xavier, gpt_rows, d = weight_variances()
    variances = signal_variances()
    return [
        Step(
            "Variance of the weights: measured and formula",
            "Matrices drawn by PyTorch's Xavier-normal initialiser for several shapes "
            "(n_in, n_out): the measured variance of their entries against 2 / (n_in + n_out).",
            np.array([[*row, row[0] / row[1]] for row in xavier]),
            f"{SEED_002_INIT}, eq. 52",
            rows=tuple(f"{n_in} x {n_out}" for n_in, n_out in XAVIER_SHAPES),
            columns=("measured", "2/(n_in+n_out)", "ratio"),
            key="variance-of-the-weights-measured-and-formula",
        ),
        Step(
            "The GPT's initial weights: variance against 0.02²",
            f"light-llm's GPT (seed 000's shape, d = {d}) draws every matrix from N(0, 0.02²) "
            "like GPT-2 (seed 000 §10): measured on layer 0's attention and MLP inputs. "
            f"Xavier would give {2 / (d + 3 * d):.6f} for the d x 3d attention matrix.",
            np.array(gpt_rows),
            "seed 000 §10; seed 002 §13.1",
            scientific=True,
            rows=("attention W^QKV", "MLP W_1"),
            columns=("measured", "0.02²"),
            key="the-gpt-s-initial-weights-variance-against",
        ),
        Step(
            f"Activation variance through {DEPTH} linear layers of width {WIDTH}",
            "Inputs N(0, 1). With Xavier's variance 2/(n_in + n_out) = 1/n the signal keeps "
            "its size from layer to layer; weights of variance 1 multiply it by n = 256 at each "
            "layer, 0.02² shrinks it (by n · 0.0004 = 0.1): why the init's variance must match "
            "the width (GPT-2's 0.02 suits d ≈ 768-2500, and its residual stream and "
            "LayerNorms keep the signal in range).",
            variances,
            SEED_002_INIT,
            rows=tuple(f"layer {i}" for i in range(DEPTH + 1)),
            columns=("Xavier", "N(0, 0.02²)", "N(0, 1)"),
            key="activation-variance-through-the-stack",
        ),
    ]


def initialization_figures(folder: Path) -> list[Path]:
    variances = signal_variances()
    layers = np.arange(DEPTH + 1, dtype=float)
    return [
        plots.lines_figure(
            folder / "initialization_signal.png",
            layers,
            [
                ("Xavier: N(0, 2/(n_in + n_out))", variances[:, 0], "o-"),
                ("N(0, 0.02²)", variances[:, 1], "s-"),
                ("N(0, 1)", variances[:, 2], "^-"),
            ],
            f"Activation variance through linear layers of width {WIDTH} (seed 002 §13.1)",
            "layer",
            "variance of the activations",
            log_y=True,
        )
    ]


# ------------------------------------------------------------------------ mixed precision
SEED_002_PRECISION = "seed 002 §13.2"
PRECISION_NUMBERS = (1 / 3, 0.1, 1.001, math.pi, 1000.5, 70000.0, 1e-5, 1e-8)
PRECISION_NAMES = ("1/3", "0.1", "1.001", "π", "1000.5", "70000", "1e-5", "1e-8")
SMALL_UPDATES = 1000  # additions of 1e-4 to 1


def rounded(dtype: torch.dtype) -> np.ndarray:
    """PRECISION_NUMBERS stored in ``dtype`` and read back as float64."""
    return torch.tensor(PRECISION_NUMBERS, dtype=torch.float64).to(dtype).double().numpy()


def accumulate(dtype: torch.dtype, step: float = 1e-4) -> float:
    """1 + step added SMALL_UPDATES times, every sum rounded to ``dtype``."""
    total = torch.tensor(1.0, dtype=dtype)
    increment = torch.tensor(step, dtype=dtype)
    for _ in range(SMALL_UPDATES):
        total = total + increment
    return float(total)


def mixed_precision() -> list[Step]:
    """float16 and bfloat16 against float32 (seed 002 §13.2): rounding, range (overflow and
    underflow), the updates lost when adding small numbers to large ones, and loss scaling."""
    exact = np.array(PRECISION_NUMBERS)
    stored = np.stack([rounded(torch.float32), rounded(torch.float16), rounded(torch.bfloat16)])
    with np.errstate(divide="ignore", invalid="ignore"):
        relative = np.abs(stored - exact) / np.abs(exact)
    info = [
        [torch.finfo(t).eps, torch.finfo(t).max, torch.finfo(t).tiny]
        for t in (torch.float32, torch.float16, torch.bfloat16)
    ]
    sums = [accumulate(torch.float32), accumulate(torch.float16), accumulate(torch.bfloat16)]
    gradient = 1e-8
    scale = 2.0**16
    scaled = [
        float(torch.tensor(gradient, dtype=torch.float16)),
        float(torch.tensor(gradient * scale, dtype=torch.float16)) / scale,
    ]
    formats = ("float32", "float16", "bfloat16")
    return [
        Step(
            "Numbers as each format stores them",
            "float32 has 24 significant bits, float16 11, bfloat16 8. float16 cannot hold "
            "70000 (its largest number is 65504: inf) and 1e-8 (below its smallest, 6e-8: 0); "
            "bfloat16 has float32's range but only 2-3 significant digits (1.001 -> 1).",
            stored,
            SEED_002_PRECISION,
            rows=formats,
            columns=PRECISION_NAMES,
            scientific=True,
            key="numbers-as-each-format-stores-them",
        ),
        Step(
            "Relative rounding error |stored - x| / |x|",
            "About 2^-24 = 6e-8 for float32, 2^-11 = 5e-4 for float16, 2^-8 = 4e-3 for bfloat16 "
            "(inf: overflow; 1: the number became 0).",
            relative,
            SEED_002_PRECISION,
            rows=formats,
            columns=PRECISION_NAMES,
            scientific=True,
            key="relative-rounding-error-stored-x-x",
        ),
        Step(
            "Machine epsilon, largest and smallest normal number",
            "PyTorch's finfo of each format (32, 16 and 16 bits): epsilon is the gap after 1.",
            np.array(info),
            SEED_002_PRECISION,
            rows=formats,
            columns=("eps", "max", "smallest normal"),
            key="machine-epsilon-largest-and-smallest-normal-number",
        ),
        Step(
            f"1 + 1e-4 added {SMALL_UPDATES} times (exact: {1 + SMALL_UPDATES * 1e-4:g})",
            "Small updates to a large number vanish when the sum is rounded to few bits: in "
            "float16 1 + 1e-4 rounds back to 1 (eps/2 = 4.9e-4) and the sum never moves; in "
            "bfloat16 too. Why mixed precision keeps a float32 master copy of the weights and "
            "applies the optimiser's small steps to it.",
            sums,
            SEED_002_PRECISION,
            columns=formats,
            key="small-updates-added",
        ),
        Step(
            "A gradient of 1e-8 in float16, without and with loss scaling 2^16",
            "Stored as is it underflows to 0 and the update is lost; the loss is multiplied by "
            "2^16 before the backward pass (PyTorch's GradScaler, which the trainer uses for "
            "float16) and the gradient divided back in float32: it survives, rounded.",
            scaled,
            SEED_002_PRECISION,
            columns=("unscaled", "scaled"),
            key="a-gradient-of-1e-8-in-float16",
        ),
    ]


def mixed_precision_figures(folder: Path) -> list[Path]:
    exact = np.array(PRECISION_NUMBERS)
    finite = [i for i, name in enumerate(PRECISION_NAMES) if name not in ("70000", "1e-8")]
    series = []
    for name, dtype in (
        ("float32", torch.float32),
        ("float16", torch.float16),
        ("bfloat16", torch.bfloat16),
    ):
        error = np.abs(rounded(dtype) - exact) / np.abs(exact)
        series.append((name, np.maximum(error[finite], 1e-12), "o-"))
    return [
        plots.lines_figure(
            folder / "mixed_precision_rounding.png",
            np.arange(len(finite), dtype=float),
            series,
            "Relative rounding error of a few numbers in each format (seed 002 §13.2; "
            "exact values floored at 1e-12)",
            "number",
            "relative error",
            log_y=True,
            tick_labels=[PRECISION_NAMES[i] for i in finite],
        )
    ]


# the worked examples of this module, in the order light-llm explain lists them
EXAMPLES = (
    Example(
        "dropout",
        "inverted dropout keeps the expectation: one draw, the mean of many, attention "
        "dropout (seed 002 §12.1, eqs. 49-50)",
        dropout,
        dropout_figures,
    ),
    Example(
        "label-smoothing",
        "label smoothing on a five-class distribution: the target, the loss, its gradient, "
        "the confidence it rewards (seed 002 §12.2, eq. 51)",
        label_smoothing,
        label_smoothing_figures,
    ),
    Example(
        "initialization",
        "Xavier/Glorot and GPT-2 initialisation variances, measured, and the signal "
        "through a deep stack (seed 002 §13.1, eq. 52)",
        initialization,
        initialization_figures,
    ),
    Example(
        "mixed-precision",
        "float16 and bfloat16 against float32: rounding, range, lost small updates, "
        "loss scaling (seed 002 §13.2)",
        mixed_precision,
        mixed_precision_figures,
    ),
)
