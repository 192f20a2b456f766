"""Steps as aligned plain text (for a terminal or a pipe) and as JSON-ready dicts (for programs).

Text: each step is a numbered title, the seed reference, the explanation, then the value as a
labelled table with 4 decimals; where the seed prints a figure, the seed's table follows with
``*`` on each figure that differs from the exact value. Tables wider than the page are split
into blocks of columns.

JSON: arrays become nested lists; NaN (a figure the seed does not print) becomes null, and
infinities (masked scores) the strings "inf" and "-inf", which strict JSON allows.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence

import numpy as np

from light_llm.explain.steps import Step

PAGE_WIDTH = 100
INDENT = "   "
NOT_PRINTED = "·"  # a cell for which the seed prints no figure
SEPARATOR = "|"  # between the exact table and the seed's, side by side


def format_number(x: float | int, scientific: bool = False) -> str:
    """4 decimals (or 4 in scientific notation for tables of tiny numbers); ints as ints."""
    if isinstance(x, (int, np.integer)):
        return str(int(x))
    if math.isinf(x):
        return "-inf" if x < 0 else "inf"
    if math.isnan(x):
        return "nan"
    text = f"{x:.4e}" if scientific else f"{x:.4f}"
    return text[1:] if text.startswith("-") and float(text) == 0.0 else text


def needs_scientific(values: np.ndarray) -> bool:
    """True when every finite non-zero value is below 0.01 in size, so 4 decimals would hide
    them (e.g. learning rates), or when one reaches 1e7, too wide for fixed decimals."""
    if values.dtype.kind in "iu":
        return False
    finite = np.abs(values[np.isfinite(values) & (values != 0)])
    return finite.size > 0 and bool(finite.max() < 0.01 or finite.max() >= 1e7)


def format_seed(x: float, decimals: int, differs: bool) -> str:
    """The seed's figure as the seed prints it, marked ``*`` where it differs."""
    if math.isnan(x):
        return NOT_PRINTED
    text = ("-inf" if x < 0 else "inf") if math.isinf(x) else f"{x:.{decimals}f}"
    return text + ("*" if differs else "")


def column_widths(cells: list[list[str]], column_labels: Sequence[str]) -> list[int]:
    return [
        max(len(column_labels[j]), *(len(row[j]) for row in cells)) for j in range(len(cells[0]))
    ]


def table_width(
    cells: list[list[str]], row_labels: Sequence[str], column_labels: Sequence[str]
) -> int:
    """Characters a table takes on one line, indent included."""
    label_width = max((len(label) for label in row_labels), default=0)
    return len(INDENT) + label_width + sum(2 + w for w in column_widths(cells, column_labels))


def table_lines(
    cells: list[list[str]], row_labels: Sequence[str], column_labels: Sequence[str]
) -> list[str]:
    """Right-aligned columns under their labels, row labels on the left; blocks of columns
    when the table is wider than the page."""
    label_width = max((len(label) for label in row_labels), default=0)
    widths = column_widths(cells, column_labels)
    blocks, start = [], 0
    while start < len(widths):
        end, used = start, len(INDENT) + label_width
        while end < len(widths) and (end == start or used + 2 + widths[end] <= PAGE_WIDTH):
            used += 2 + widths[end]
            end += 1
        blocks.append((start, end))
        start = end
    lines = []
    for start, end in blocks:
        if lines:
            lines.append("")
        header = "".join(f"  {column_labels[j]:>{widths[j]}}" for j in range(start, end))
        lines.append(f"{INDENT}{'':<{label_width}}{header}")
        for label, row in zip(row_labels, cells, strict=True):
            body = "".join(f"  {row[j]:>{widths[j]}}" for j in range(start, end))
            lines.append(f"{INDENT}{label:<{label_width}}{body}")
    return lines


def labels(given: Sequence[str] | None, count: int) -> list[str]:
    return list(given) if given is not None else [f"[{i}]" for i in range(count)]


def scientific_for(step: Step) -> bool:
    """Whether the step's values are printed in scientific notation."""
    return step.scientific or needs_scientific(np.asarray(step.value))


def vector_cells(step: Step) -> tuple[list[list[str]], list[str]]:
    """A vector's cells: the exact row, and the seed's row where it prints figures; with the
    row labels ("exact", "seed")."""
    value = np.asarray(step.value)
    scientific = scientific_for(step)
    cells = [[format_number(x, scientific) for x in value.tolist()]]
    if step.seed_value is None:
        return cells, ["exact"]
    differs = step.seed_differs.tolist()
    seed_row = [
        format_seed(x, step.seed_decimals, d)
        for x, d in zip(step.seed_value.tolist(), differs, strict=True)
    ]
    return [*cells, seed_row], ["exact", "seed"]


def seed_matrix_cells(step: Step) -> list[list[str]]:
    """A matrix step's seed figures as cells, ``*`` on each that differs."""
    return [
        [format_seed(x, step.seed_decimals, d) for x, d in zip(row, mask, strict=True)]
        for row, mask in zip(step.seed_value.tolist(), step.seed_differs.tolist(), strict=True)
    ]


def value_lines(step: Step) -> list[str]:
    """The value (and the seed's figure) as text."""
    value = np.asarray(step.value)
    differs = step.seed_differs
    seed = step.seed_value
    scientific = scientific_for(step)
    if value.ndim == 0:
        line = f"{INDENT}= {format_number(step.value, scientific)}"
        if seed is not None:
            figure = format_seed(float(seed), step.seed_decimals, bool(differs))
            line += f"      seed: {figure}{'  <- differs' if differs else ''}"
        return [line]
    if value.ndim == 1:
        cells, row_labels = vector_cells(step)
        return table_lines(cells, row_labels, labels(step.columns, value.shape[0]))
    row_labels = labels(step.rows, value.shape[0])
    column_labels = labels(step.columns, value.shape[1])
    cells = [[format_number(x, scientific) for x in row] for row in value.tolist()]
    if seed is None:
        return table_lines(cells, row_labels, column_labels)
    seed_cells = seed_matrix_cells(step)
    side_by_side = [
        row + [SEPARATOR] + seed_row for row, seed_row in zip(cells, seed_cells, strict=True)
    ]
    side_labels = [*column_labels, SEPARATOR, *column_labels]
    if table_width(side_by_side, row_labels, side_labels) <= PAGE_WIDTH:
        legend = f"exact values | the seed's figures ({NOT_PRINTED} = none printed, * = differs)"
        return [f"{INDENT}{legend}", *table_lines(side_by_side, row_labels, side_labels)]
    lines = table_lines(cells, row_labels, column_labels)
    lines.append(f"{INDENT}the seed's figures ({NOT_PRINTED} = none printed, * = differs):")
    return lines + table_lines(seed_cells, row_labels, column_labels)


def wrap(text: str, indent: str) -> list[str]:
    """``text`` in lines of at most PAGE_WIDTH characters; continuation lines indented."""
    return textwrap.wrap(
        text,
        PAGE_WIDTH,
        initial_indent=indent,
        subsequent_indent=indent or INDENT,
        break_long_words=False,
        break_on_hyphens=False,
    )


def step_text(number: int, total: int, step: Step) -> str:
    """One step: title, reference, explanation, value."""
    flag = "   [seed figure differs]" if step.differs_from_seed else ""
    lines = wrap(f"{number}/{total}. {step.title}{flag}", "")
    lines += wrap(f"({step.seed})", INDENT)
    lines += wrap(step.text, INDENT)
    lines += value_lines(step)
    return "\n".join(lines)


def example_text(name: str, summary: str, steps: list[Step]) -> str:
    """The whole example, with a closing line listing the steps whose seed figures differ."""
    parts = [*wrap(f"{name}: {summary}", ""), ""]
    for number, step in enumerate(steps, 1):
        parts += [step_text(number, len(steps), step), ""]
    differing = [str(n) for n, step in enumerate(steps, 1) if step.differs_from_seed]
    if differing:
        parts += wrap(
            f"The seed's printed figures differ from the exact values in step(s) "
            f"{', '.join(differing)} (marked *).",
            "",
        )
    elif any(step.seed_value is not None for step in steps):
        parts.append("Every figure the seed prints agrees with the exact value to its decimals.")
    return "\n".join(parts).rstrip() + "\n"


def json_ready(value) -> object:
    """Nested lists of numbers; NaN -> None, ±inf -> "inf" / "-inf"."""
    if value is None:
        return None
    array = np.asarray(value)
    if array.dtype.kind in "iub":
        return array.tolist()

    def clean(x: float) -> object:
        if math.isnan(x):
            return None
        if math.isinf(x):
            return "-inf" if x < 0 else "inf"
        return x

    if array.ndim == 0:
        return clean(float(array))
    return np.vectorize(clean, otypes=[object])(array).tolist()


def step_json(step: Step) -> dict:
    differs = step.seed_differs
    return {
        "key": step.key,
        "title": step.title,
        "text": step.text,
        "seed": step.seed,
        "shape": list(np.shape(step.value)),
        "value": json_ready(step.value),
        "rows": None if step.rows is None else list(step.rows),
        "columns": None if step.columns is None else list(step.columns),
        "seed_value": json_ready(step.seed_value),
        "seed_decimals": step.seed_decimals if step.seed_value is not None else None,
        "seed_differs": None if differs is None else np.asarray(differs).tolist(),
        "differs_from_seed": step.differs_from_seed,
    }


def example_json(name: str, summary: str, steps: list[Step]) -> dict:
    return {"name": name, "summary": summary, "steps": [step_json(step) for step in steps]}
