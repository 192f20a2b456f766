"""Pictures of the analyses, as PNG files (matplotlib's object API, no pyplot): the logit lens
as a stages x positions grid, attributions as bars, tables of heads (importance, roles,
patching) as heatmaps, a text's surprise as bars."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from light_llm.atomic import save_figure

CELL_INCHES = 0.55  # one cell of a heatmap
MIN_INCHES, MAX_INCHES = 4.0, 40.0


def visible(token: str) -> str:
    """A token as a label: spaces and newlines made visible, '$' kept literal (no mathtext)."""
    shown = token.replace(" ", "␣").replace("\n", "\\n").replace("\t", "\\t")
    return shown.replace("$", r"\$") or "''"


def readable_on(rgba: Sequence[float]) -> str:
    """Black or white ("black", "white"): whichever a text on a cell of colour ``rgba`` (sRGB
    in [0, 1]) contrasts with more, by WCAG 2's contrast ratio (L1 + 0.05) / (L2 + 0.05) of
    relative luminances L = 0.2126 R + 0.7152 G + 0.0722 B over the linearised channels
    (c / 12.92 up to 0.04045, else ((c + 0.055) / 1.055)^2.4): black wins above L = 0.179,
    where (L + 0.05) / 0.05 = 1.05 / (L + 0.05)."""
    channels = np.asarray(rgba[:3], dtype=float)
    linear = np.where(channels <= 0.04045, channels / 12.92, ((channels + 0.055) / 1.055) ** 2.4)
    luminance = float(linear @ np.array([0.2126, 0.7152, 0.0722]))
    return "black" if (luminance + 0.05) ** 2 > 0.05 * 1.05 else "white"


def size(n_cols: int, n_rows: int, extra_width: float = 2.5) -> tuple[float, float]:
    width = min(MAX_INCHES, max(MIN_INCHES, CELL_INCHES * n_cols + extra_width))
    return width, min(MAX_INCHES, max(3.0, CELL_INCHES * n_rows + 2.0))


def heatmap(
    matrix: np.ndarray,
    row_labels: Sequence[str],
    col_labels: Sequence[str],
    path: str | Path,
    title: str,
    value_label: str,
    *,
    diverging: bool = False,
    annotations: np.ndarray | None = None,
) -> Path:
    """``matrix`` (rows x columns) as a heatmap with its labels; ``diverging`` centres the
    colours on 0 (red above, blue below); ``annotations`` (same shape, strings) are written in
    the cells (the values themselves when None and the matrix is small)."""
    matrix = np.asarray(matrix, dtype=float)
    figure = Figure(figsize=size(matrix.shape[1], matrix.shape[0]))
    axes = figure.add_subplot()
    if diverging:
        bound = float(np.nanmax(np.abs(matrix))) if np.isfinite(matrix).any() else 1.0
        image = axes.imshow(matrix, cmap="RdBu_r", vmin=-bound or -1, vmax=bound or 1)
    else:
        image = axes.imshow(matrix, cmap="viridis")
    figure.colorbar(image, ax=axes, label=value_label, shrink=0.8)
    axes.set_xticks(range(len(col_labels)), [visible(c) for c in col_labels], rotation=90)
    axes.set_yticks(range(len(row_labels)), list(row_labels))
    if annotations is None and matrix.size <= 400:
        annotations = np.vectorize(lambda v: f"{v:.2f}")(matrix)
    if annotations is not None:
        for (row, col), text in np.ndenumerate(annotations):
            value = matrix[row, col]  # drawn in its colour; a NaN cell is left blank (white)
            cell = image.cmap(image.norm(value)) if np.isfinite(value) else (1.0, 1.0, 1.0)
            axes.text(
                col,
                row,
                visible(str(text)),
                ha="center",
                va="center",
                fontsize=6,
                color=readable_on(cell),
            )
    axes.set_title(title, fontsize=10)
    figure.tight_layout()
    return save_figure(figure, path)


def bars(
    values: np.ndarray, labels: Sequence[str], path: str | Path, title: str, value_label: str
) -> Path:
    """Horizontal bars, one per label, positive red and negative blue."""
    values = np.asarray(values, dtype=float)
    figure = Figure(figsize=(8.0, max(3.0, 0.25 * len(values) + 1.5)))
    axes = figure.add_subplot()
    colours = ["#c0392b" if v >= 0 else "#2e6da4" for v in values]
    axes.barh(range(len(values)), values, color=colours)
    axes.set_yticks(range(len(values)), [visible(label) for label in labels], fontsize=8)
    axes.invert_yaxis()
    axes.axvline(0.0, color="black", linewidth=0.8)
    axes.set_xlabel(value_label)
    axes.set_title(title, fontsize=10)
    figure.tight_layout()
    return save_figure(figure, path)
