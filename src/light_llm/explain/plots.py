"""Pictures as PNG files: attention weights, positional encodings, the learning-rate schedule,
softmax at several temperatures, activations, filtered distributions and Muon's
Newton-Schulz iteration.

Figures are drawn with matplotlib's object API on the Agg renderer (no pyplot, no display, no
global state) at a fixed size, so a figure of given content always has the same pixel size.
Each file is written atomically: rendered in memory, then written to a temporary file in the
same folder and renamed over the target.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from matplotlib.figure import Figure

from light_llm.atomic import save_figure
from light_llm.generate import filter_logits
from light_llm.nn.feedforward import activation_fn
from light_llm.nn.positions import rope_angles, sinusoidal_table
from light_llm.schedule import learning_rate

DPI = 100
PANEL_INCHES = 3.2  # one heatmap panel in a grid
MARGIN_INCHES = 1.2  # room for the title and axis labels
MIN_WIDTH_INCHES = 6.0  # so that a one-panel figure still has room for its title
MAX_PANEL_INCHES = 10.0  # a lone attention panel grows with the prompt up to this
INCHES_PER_TOKEN = 0.25
TICK_LABEL_POINTS = 9  # vertical room one tick label needs
WIDE_FIGURE = (10.0, 5.0)  # (width, height) in inches of the single-plot figures


def grid_size_inches(n_rows: int, n_cols: int, panel_inches: float = PANEL_INCHES):
    """(width, height) in inches of a grid of heatmap panels."""
    width = max(MIN_WIDTH_INCHES, panel_inches * n_cols + MARGIN_INCHES)
    return (width, panel_inches * n_rows + MARGIN_INCHES)


def label_ticks(axes, labels: Sequence[str], axis: str, panel_inches: float) -> None:
    """Put token labels on an axis, every k-th one when they would not fit the panel."""
    room = max(4, int(panel_inches * 72 / TICK_LABEL_POINTS))
    every = -(-len(labels) // room)
    positions = list(range(0, len(labels), every))
    shown = [labels[i] for i in positions]
    if axis == "x":
        axes.set_xticks(positions, shown, rotation=90, fontsize=7)
    else:
        axes.set_yticks(positions, shown, fontsize=7)


def heatmap_grid(
    path: str | Path,
    panels: Sequence[Sequence[tuple[str, np.ndarray]]],
    row_labels: Sequence[str],
    column_labels: Sequence[str],
    title: str,
    value_range: tuple[float, float] | None = (0.0, 1.0),
    x_label: str = "key (attended to)",
    y_label: str = "query (attending)",
    panel_inches: float = PANEL_INCHES,
    number_format: str = ".2f",
) -> Path:
    """A grid of labelled heatmaps, ``panels[r][c] = (panel title, matrix)``, one colour scale.

    Values are written in the cells (with ``number_format``) when the matrices are at most
    10 x 10 (up to 16 rows for a single column pair). ``value_range`` fixes the colour scale
    (attention weights lie in [0, 1]); None spans the data.
    """
    n_rows, n_cols = len(panels), max(len(row) for row in panels)
    figure = Figure(figsize=grid_size_inches(n_rows, n_cols, panel_inches), layout="constrained")
    figure.suptitle(title)
    axes_grid = figure.subplots(n_rows, n_cols, squeeze=False)
    finite = [m[np.isfinite(m)] for row in panels for _, m in row]
    low, high = value_range or (min(v.min() for v in finite), max(v.max() for v in finite))
    annotate = (
        len(row_labels) <= (16 if len(column_labels) <= 3 else 10) and len(column_labels) <= 10
    )
    image = None
    for r, row in enumerate(panels):
        for c in range(n_cols):
            axes = axes_grid[r][c]
            if c >= len(row):
                axes.set_visible(False)
                continue
            panel_title, matrix = row[c]
            image = axes.imshow(matrix, cmap="viridis", vmin=low, vmax=high, aspect="auto")
            axes.set_title(panel_title, fontsize=9)
            label_ticks(axes, column_labels, "x", panel_inches)
            label_ticks(axes, row_labels, "y", panel_inches)
            if r == n_rows - 1:
                axes.set_xlabel(x_label, fontsize=8)
            if c == 0:
                axes.set_ylabel(y_label, fontsize=8)
            if annotate:
                for (i, j), value in np.ndenumerate(matrix):
                    text = "-inf" if value == -np.inf else f"{value:{number_format}}"
                    bright = np.isfinite(value) and value > low + 0.6 * (high - low)
                    axes.text(
                        j,
                        i,
                        text,
                        ha="center",
                        va="center",
                        fontsize=7,
                        color="black" if bright else "white",
                    )
    figure.colorbar(image, ax=axes_grid, shrink=0.8)
    return save_figure(figure, path, DPI)


def attention_panel_inches(n_panels: int, n_tokens: int) -> float:
    """A lone panel grows with the prompt (up to MAX_PANEL_INCHES); grids keep PANEL_INCHES."""
    if n_panels > 1:
        return PANEL_INCHES
    return min(MAX_PANEL_INCHES, max(PANEL_INCHES, INCHES_PER_TOKEN * n_tokens))


def attention_maps_figure(
    path: str | Path,
    maps: np.ndarray,
    tokens: Sequence[str],
    layers: Sequence[int],
    heads: Sequence[int],
    title: str,
) -> Path:
    """Attention weights of a model: ``maps`` (n_layers_shown, n_heads_shown, T, T), one row of
    panels per layer and one column per head, tokens on both axes."""
    panels = [
        [(f"layer {layer}, head {head}", maps[r, c]) for c, head in enumerate(heads)]
        for r, layer in enumerate(layers)
    ]
    panel = attention_panel_inches(len(layers) * len(heads), len(tokens))
    return heatmap_grid(path, panels, tokens, tokens, title, panel_inches=panel)


def positional_encoding_heatmap(
    path: str | Path,
    n_positions: int,
    dim: int,
    base: float,
    example: tuple[Sequence[str], np.ndarray] | None = None,
) -> Path:
    """Heatmap of the sinusoidal table PE(pos, j) (seed 003 §9's figure; seed 001), positions
    down, dimensions across; with ``example`` = (tokens, table), a small annotated panel of the
    worked example beside it."""
    table = sinusoidal_table(n_positions, dim, base).numpy()
    n_cols = 2 if example is not None else 1
    figure = Figure(figsize=WIDE_FIGURE, layout="constrained")
    figure.suptitle(f"Sinusoidal positional encodings, base n = {base:g}")
    axes_list = figure.subplots(1, n_cols, squeeze=False, width_ratios=[1, 2][-n_cols:])[0]
    if example is not None:
        tokens, small = example
        axes = axes_list[0]
        axes.imshow(small, cmap="RdBu_r", vmin=-1, vmax=1)
        for (i, j), value in np.ndenumerate(small):
            color = "white" if abs(value) > 0.6 else "black"
            axes.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=8, color=color)
        axes.set_title(f"{' '.join(tokens)!r}: d = {small.shape[1]}", fontsize=9)
        axes.set_xticks(range(small.shape[1]), [f"j={j}" for j in range(small.shape[1])])
        axes.set_yticks(range(len(tokens)), [f"{i} {t}" for i, t in enumerate(tokens)])
        axes.set_xlabel("dimension j")
        axes.set_ylabel("position")
    axes = axes_list[-1]
    image = axes.imshow(table, cmap="RdBu_r", vmin=-1, vmax=1, aspect="auto")
    axes.set_title(f"{n_positions} positions x {dim} dimensions", fontsize=9)
    axes.set_xlabel("dimension j (even: sin, odd: cos)")
    axes.set_ylabel("position")
    figure.colorbar(image, ax=axes, shrink=0.8, label="PE(pos, j)")
    return save_figure(figure, path, DPI)


def positional_encoding_curves(
    path: str | Path,
    dim: int,
    base: float,
    n_positions: int,
    dimensions: Sequence[int],
    tokens: Sequence[str] | None = None,
) -> Path:
    """PE(pos, j) against the position for each dimension j in ``dimensions`` (seed 003 §12's
    figure): sines and cosines whose wavelength grows with j.

    PE(pos, 2i) = sin(pos θ_i) and PE(pos, 2i+1) = cos(pos θ_i) with θ_i = base^(-2i/d), the
    angles ``rope_angles`` computes; it draws the curves through fractional positions, and the
    dots are the table the model uses (``sinusoidal_table``) at the integer positions. With
    ``tokens``, the first positions get large dots and the words in the legend.
    """
    fine = torch.linspace(0.0, n_positions - 1, 20 * n_positions, dtype=torch.float64)
    cos, sin = rope_angles(fine, dim, base)  # (samples, dim/2): cos and sin of pos θ_i
    table = sinusoidal_table(n_positions, dim, base).numpy()  # (n_positions, dim)
    figure = Figure(figsize=WIDE_FIGURE, layout="constrained")
    axes = figure.subplots()
    for j in dimensions:
        curve = (sin if j % 2 == 0 else cos)[:, j // 2]
        kind = "sin" if j % 2 == 0 else "cos"
        (line,) = axes.plot(fine, curve, linewidth=1.2, label=f"j = {j} ({kind}, i = {j // 2})")
        axes.plot(np.arange(n_positions), table[:, j], "o", markersize=2.5, color=line.get_color())
        if tokens is not None:
            axes.plot(
                np.arange(len(tokens)),
                table[: len(tokens), j],
                "o",
                markersize=7,
                color=line.get_color(),
                markeredgecolor="black",
            )
    title = f"Sinusoidal positional encodings per dimension (d = {dim}, base n = {base:g})"
    if tokens is not None:
        title += f"\nlarge dots: {' '.join(tokens)!r} at positions 0-{len(tokens) - 1}"
    axes.set_title(title)
    axes.set_ylim(-1.1, 1.1)
    axes.set_xlabel("position pos")
    axes.set_ylabel("PE(pos, j)")
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return save_figure(figure, path, DPI)


def learning_rate_figure(
    path: str | Path,
    max_lr: float,
    min_lr: float,
    warmup_iters: int,
    lr_decay_iters: int,
    max_iters: int,
    title: str = "Learning-rate schedule",
    logged: Sequence[tuple[int, float]] = (),
    cooldown_fraction: float | None = None,
    cooldown_shape: str = "linear",
) -> Path:
    """The learning rate at every step of a run, by :func:`light_llm.schedule.learning_rate`
    (seed 000 §7, seed 002 §4.2): linear warmup, cosine decay (or with ``cooldown_fraction``
    the peak held, then a cooldown of ``cooldown_shape``), then the floor; with ``logged``
    (step, lr) pairs, also the rates a run really used, as it logged them."""
    steps = np.arange(max_iters)
    rates = [
        learning_rate(
            int(t), max_lr, min_lr, warmup_iters, lr_decay_iters, cooldown_fraction, cooldown_shape
        )
        for t in steps
    ]
    figure = Figure(figsize=WIDE_FIGURE, layout="constrained")
    axes = figure.subplots()
    axes.plot(steps, rates, color="tab:blue", label="schedule of the final settings")
    if logged:
        logged_steps, logged_rates = zip(*logged, strict=True)
        axes.plot(
            logged_steps,
            logged_rates,
            color="tab:orange",
            marker=".",
            markersize=3,
            linewidth=1,
            label="as the run logged it",
        )
    axes.axvline(warmup_iters, color="gray", linestyle=":", label=f"end of warmup ({warmup_iters})")
    axes.axvline(
        lr_decay_iters, color="gray", linestyle="--", label=f"end of decay ({lr_decay_iters})"
    )
    axes.axhline(min_lr, color="tab:red", linestyle=":", label=f"min_lr = {min_lr:g}")
    axes.set_xlabel("optimizer step")
    axes.set_ylabel("learning rate")
    shape = (
        "cosine decay"
        if cooldown_fraction is None
        else f"peak held, then a {'1 - sqrt' if cooldown_shape == 'sqrt' else 'linear'} "
        f"cooldown over {cooldown_fraction:g} of the rest"
    )
    axes.set_title(f"{title}\nlinear warmup + {shape}, max_lr = {max_lr:g}")
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8, loc="upper right")
    return save_figure(figure, path, DPI)


def distributions_figure(
    path: str | Path,
    distributions: Sequence[tuple[str, np.ndarray]],
    labels: Sequence[str],
    title: str,
) -> Path:
    """Grouped bars of probabilities: one group per token, one bar per named distribution."""
    highest = max(float(np.max(p)) for _, p in distributions)
    return grouped_bars(
        path, distributions, labels, title, "probability", y_range=(0, min(1.0, 1.15 * highest))
    )


def grouped_bars(
    path: str | Path,
    series: Sequence[tuple[str, np.ndarray]],
    labels: Sequence[str],
    title: str,
    y_label: str,
    y_range: tuple[float, float] | None = None,
    annotate: bool = False,
    x_label: str | None = None,
    value_format: str = "%.2f",
) -> Path:
    """Grouped bars: one group per label, one bar per named series (values may be negative);
    with ``annotate``, each bar carries its value (``value_format``, 2 decimals unless set)."""
    figure = Figure(figsize=WIDE_FIGURE, layout="constrained")
    axes = figure.subplots()
    positions = np.arange(len(labels))
    width = 0.8 / len(series)
    for k, (name, values) in enumerate(series):
        offset = (k - (len(series) - 1) / 2) * width
        bars = axes.bar(positions + offset, values, width, label=name)
        if annotate:
            axes.bar_label(bars, fmt=value_format, fontsize=7, padding=2)
    axes.set_xticks(positions, labels)
    axes.axhline(0.0, color="black", linewidth=0.8)
    axes.set_ylabel(y_label)
    if x_label:
        axes.set_xlabel(x_label)
    if y_range is not None:
        axes.set_ylim(*y_range)
    else:
        axes.margins(y=0.15)
    axes.set_title(title)
    axes.grid(alpha=0.3, axis="y")
    axes.legend(fontsize=8)
    return save_figure(figure, path, DPI)


def lines_figure(
    path: str | Path,
    x: np.ndarray,
    series: Sequence[tuple[str, np.ndarray, str]],
    title: str,
    x_label: str,
    y_label: str,
    log_x: bool = False,
    log_y: bool = False,
    tick_labels: Sequence[str] | None = None,
) -> Path:
    """Curves ``(name, y, style)`` against one x axis (style: a matplotlib format such as
    "o-" or "--"); ``tick_labels`` names each x (then x is 0, 1, ...)."""
    figure = Figure(figsize=WIDE_FIGURE, layout="constrained")
    axes = figure.subplots()
    for name, y, style in series:
        axes.plot(x, y, style, label=name, linewidth=1.8, markersize=4)
    if log_x:
        axes.set_xscale("log", base=2)
    if log_y:
        axes.set_yscale("log")
    if tick_labels is not None:
        axes.set_xticks(np.arange(len(tick_labels)), tick_labels)
    axes.set_xlabel(x_label)
    axes.set_ylabel(y_label)
    axes.set_title(title)
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8)
    return save_figure(figure, path, DPI)


def trajectories_figure(
    path: str | Path,
    panels: Sequence[tuple[str, Sequence[tuple[str, np.ndarray, str]]]],
    title: str,
    x_label: str,
    y_label: str,
) -> Path:
    """Side-by-side panels of 2-D paths: ``panels`` = [(panel title, [(name, points (n, 2),
    style)])], equal axes so that directions are true."""
    figure = Figure(figsize=WIDE_FIGURE, layout="constrained")
    axes_row = figure.subplots(1, len(panels), squeeze=False)[0]
    for axes, (panel_title, paths) in zip(axes_row, panels, strict=True):
        for name, points, style in paths:
            axes.plot(points[:, 0], points[:, 1], style, label=name, markersize=4)
        axes.set_title(panel_title, fontsize=10)
        axes.set_xlabel(x_label)
        axes.set_ylabel(y_label)
        axes.set_aspect("equal", adjustable="datalim")
        axes.grid(alpha=0.3)
        axes.legend(fontsize=8)
    figure.suptitle(title)
    return save_figure(figure, path, DPI)


def softmax_temperatures_figure(
    path: str | Path, logits: Sequence[float], labels: Sequence[str], temperatures: Sequence[float]
) -> Path:
    """softmax(z / τ) for several temperatures τ (seed 002 §15.4; seed 000 §8), as grouped bars;
    the division is ``generate.filter_logits``, as in sampling."""
    z = torch.tensor([logits])  # (B=1, V)
    distributions = [
        (f"τ = {t:g}", torch.softmax(filter_logits(z, temperature=t), -1)[0].numpy())
        for t in temperatures
    ]
    return distributions_figure(
        path, distributions, labels, f"Softmax with temperature: logits {list(logits)}"
    )


def activations_figure(path: str | Path) -> Path:
    """ReLU, GELU (exact and tanh) and Swish (SiLU, SwiGLU's gate) on [-4, 4], by
    ``nn.feedforward.activation_fn`` and ``torch.nn.functional.silu`` (seed 000 §4; seed 001)."""
    x = torch.linspace(-4.0, 4.0, 401)
    figure = Figure(figsize=WIDE_FIGURE, layout="constrained")
    axes = figure.subplots()
    styles = {"relu": "-", "gelu": "-", "gelu_tanh": ":"}  # the two GELUs nearly coincide
    for name, style in styles.items():
        axes.plot(x, activation_fn(name, x), style, label=name, linewidth=2)
    axes.plot(x, torch.nn.functional.silu(x), "--", label="swish (SwiGLU gate)", linewidth=2)
    axes.set_xlabel("z")
    axes.set_ylabel("activation(z)")
    axes.set_title("Feed-forward activations: ReLU, GELU, GELU (tanh), Swish")
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8)
    return save_figure(figure, path, DPI)


def newton_schulz_figure(
    path: str | Path,
    history: np.ndarray,
    coefficients: tuple[float, float, float],
    title: str,
) -> Path:
    """Left: the singular values (columns of ``history``, (steps + 1, r)) after each
    Newton-Schulz step. Right: the quintic p(σ) = aσ + bσ³ + cσ⁵ that one step applies to
    every singular value (Keller Jordan's Muon), with the line σ = 1."""
    a, b, c = coefficients
    figure = Figure(figsize=WIDE_FIGURE, layout="constrained")
    left, right = figure.subplots(1, 2)
    steps = np.arange(history.shape[0])
    for i in range(history.shape[1]):
        left.plot(steps, history[:, i], marker="o", label=f"σ{i + 1}")
    left.axhline(1.0, color="gray", linestyle=":")
    left.set_xlabel("Newton-Schulz step k (0: G / ||G||_F)")
    left.set_ylabel("X_k along G's singular direction i")
    left.set_xticks(steps)
    left.legend(fontsize=8)
    left.grid(alpha=0.3)
    sigma = np.linspace(0.0, 1.2, 241)
    right.plot(sigma, a * sigma + b * sigma**3 + c * sigma**5, color="tab:blue", label="p(σ)")
    right.plot(sigma, sigma, color="gray", linestyle=":", label="σ")
    right.axhline(1.0, color="tab:red", linestyle=":", label="1")
    right.set_xlabel("σ before a step")
    right.set_ylabel("σ after it")
    terms = f"{a}σ {'-' if b < 0 else '+'} {abs(b)}σ³ {'-' if c < 0 else '+'} {abs(c)}σ⁵"
    right.set_title(f"one step: p(σ) = {terms}", fontsize=10)
    right.legend(fontsize=8)
    right.grid(alpha=0.3)
    figure.suptitle(title)
    return save_figure(figure, path, DPI)
