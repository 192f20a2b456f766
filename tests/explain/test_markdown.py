"""Examples as Markdown pages: a heading per step, tables whose cells are the text output's
numbers, the seed's figures marked, picture links that point at the written files."""

from __future__ import annotations

import re

import numpy as np
import pytest

from light_llm import explain
from light_llm.explain.markdown import example_markdown, picture_links
from light_llm.explain.render import format_number


def table_rows(page: str) -> list[list[str]]:
    return [
        [cell.strip() for cell in line.strip("|").split("|")]
        for line in page.splitlines()
        if line.startswith("| ") and not line.startswith("|---")
    ]


@pytest.mark.parametrize("name", explain.names())
def test_every_example_is_a_page_with_one_heading_per_step(name):
    example = explain.get(name)
    steps = example.steps()
    page = example_markdown(name, example.summary, steps)
    assert page.startswith(f"# `light-llm explain {name}`\n")
    headings = re.findall(r"^## (\d+)\. (.*)$", page, flags=re.MULTILINE)
    assert [int(n) for n, _ in headings] == list(range(1, len(steps) + 1))
    for (_, heading), step in zip(headings, steps, strict=True):
        assert heading.startswith(step.title)


def test_matrix_cells_are_the_exact_values_and_seed_differences_are_starred():
    example = explain.get("tiny-attention")
    steps = example.steps()
    page = example_markdown("tiny-attention", example.summary, steps)
    weights = next(s for s in steps if s.title == "A = softmax(S)")
    section = page.split("## 3. A = softmax(S)")[1].split("## 4.")[0]
    rows = table_rows(section)
    assert rows[0] == ["", "token 1", "token 2"]
    assert rows[1] == ["token 1", *(format_number(x) for x in np.asarray(weights.value)[0])]
    assert ["token 1", "0.38*", "0.62*"] in rows  # the seed's table, differences marked
    assert "\n## 3. A = softmax(S) (seed figure differs)\n" in page


def test_picture_links_are_relative_to_the_page(tmp_path):
    pictures = explain.write_figures("norms", tmp_path / "pictures")
    links = picture_links(pictures, tmp_path / "pages")
    assert links == [("../pictures/norms.png", "norms")]
    example = explain.get("norms")
    page = example_markdown("norms", example.summary, example.steps(), links)
    assert "![norms](../pictures/norms.png)" in page
