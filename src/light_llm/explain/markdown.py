"""A worked example as a Markdown page: a heading per step, its seed reference and explanation,
its value as a table (4 decimals, as the text output), the seed's printed figures as a second
table with ``*`` on each that differs, and the example's pictures as image links.

The page reads on its own: it opens with the example's summary and a line saying how the
numbers were computed, and closes with the steps whose seed figures differ.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from light_llm.explain.render import (
    format_number,
    format_seed,
    labels,
    scientific_for,
    seed_matrix_cells,
    vector_cells,
)
from light_llm.explain.steps import Step

INTRO = (
    "Every value below is computed by light-llm's own code (the layers, optimiser and "
    "tokenizers the models train with), printed to 4 decimals. Where the seed document prints "
    "a figure, it is shown in a second table, marked * where it differs from the exact value."
)


def cell(text: str) -> str:
    """A table cell: pipes escaped so they do not split the cell."""
    return text.replace("|", "\\|")


def table(cells: list[list[str]], row_labels: Sequence[str], column_labels: Sequence[str]) -> str:
    """A Markdown table, numbers right-aligned, row labels in the first column."""
    header = "| | " + " | ".join(cell(label) for label in column_labels) + " |"
    rule = "|---|" + "---:|" * len(column_labels)
    rows = [
        f"| {cell(label)} | " + " | ".join(cell(x) for x in row) + " |"
        for label, row in zip(row_labels, cells, strict=True)
    ]
    return "\n".join([header, rule, *rows])


def value_markdown(step: Step) -> str:
    """The value, and the seed's figure where it prints one."""
    value = np.asarray(step.value)
    scientific = scientific_for(step)
    seed, differs = step.seed_value, step.seed_differs
    if value.ndim == 0:
        line = f"**= {format_number(step.value, scientific)}**"
        if seed is not None:
            figure = format_seed(float(seed), step.seed_decimals, bool(differs))
            line += f" (the seed prints {figure}{', which differs' if differs else ''})"
        return line
    if value.ndim == 1:
        cells, row_labels = vector_cells(step)
        return table(cells, row_labels, labels(step.columns, value.shape[0]))
    row_labels = labels(step.rows, value.shape[0])
    column_labels = labels(step.columns, value.shape[1])
    exact = table(
        [[format_number(x, scientific) for x in row] for row in value.tolist()],
        row_labels,
        column_labels,
    )
    if seed is None:
        return exact
    seed_cells = seed_matrix_cells(step)
    return (
        f"{exact}\n\nThe seed's figures (· = none printed, * = differs):\n\n"
        f"{table(seed_cells, row_labels, column_labels)}"
    )


def step_markdown(number: int, step: Step, level: int = 2) -> str:
    flag = " (seed figure differs)" if step.differs_from_seed else ""
    heading = "#" * level
    return "\n\n".join(
        [
            f"{heading} {number}. {step.title}{flag}",
            f"*{step.seed}*",
            step.text,
            value_markdown(step),
        ]
    )


def example_markdown(
    name: str,
    summary: str,
    steps: list[Step],
    pictures: Sequence[tuple[str, str]] = (),
    level: int = 1,
) -> str:
    """The example as a Markdown page, its title a heading of ``level`` (2 inside a page of
    several examples); ``pictures`` are (link target, caption) pairs."""
    heading = "#" * level
    parts = [
        f"{heading} `light-llm explain {name}`",
        summary[0].upper() + summary[1:] + ".",
        INTRO,
    ]
    parts += [step_markdown(number, step, level + 1) for number, step in enumerate(steps, 1)]
    if pictures:
        parts.append(f"{heading}# Pictures")
        parts += [f"![{caption}]({target})" for target, caption in pictures]
    differing = [str(n) for n, step in enumerate(steps, 1) if step.differs_from_seed]
    if differing:
        parts.append(
            f"The seed's printed figures differ from the exact values in step(s) "
            f"{', '.join(differing)} (marked *)."
        )
    elif any(step.seed_value is not None for step in steps):
        parts.append("Every figure the seed prints agrees with the exact value to its decimals.")
    return "\n\n".join(parts) + "\n"


def picture_links(paths: Sequence[Path], page_folder: Path | None) -> list[tuple[str, str]]:
    """(link target, caption) of each picture: relative to the page's folder when the page is
    a file, else the path as written."""
    links = []
    for path in paths:
        target = path.as_posix()
        if page_folder is not None:
            target = Path(os.path.relpath(path.resolve(), page_folder.resolve())).as_posix()
        links.append((target, path.stem.replace("_", " ")))
    return links
