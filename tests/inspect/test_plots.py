"""The heatmaps' numbers stay readable: each is written in black or white, whichever
contrasts more with its cell's colour by WCAG 2's contrast ratio, worked here from its
published definition (sRGB linearisation, relative luminance, (L1 + 0.05) / (L2 + 0.05))."""

from __future__ import annotations

import numpy as np
from matplotlib import colormaps

from light_llm.inspect import plots
from light_llm.inspect.plots import readable_on

BLACK, WHITE = (0.0, 0.0, 0.0), (1.0, 1.0, 1.0)


def relative_luminance(rgb) -> float:
    def linear(c):
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (linear(c) for c in rgb[:3])
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(a, b) -> float:
    high, low = sorted((relative_luminance(a), relative_luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def test_the_text_colour_is_the_one_of_higher_contrast_on_any_cell():
    cells = np.random.default_rng(0).random((500, 3))
    named = [colormaps[name](x) for name in ("viridis", "RdBu_r") for x in (0.0, 0.5, 1.0)]
    for cell in [*cells, *named, BLACK, WHITE]:
        chosen = BLACK if readable_on(cell) == "black" else WHITE
        other = WHITE if chosen == BLACK else BLACK
        assert contrast(chosen, cell) >= contrast(other, cell) - 1e-9


def test_the_ends_of_the_colour_maps_get_the_text_a_reader_expects():
    assert readable_on(colormaps["viridis"](0.0)) == "white"  # dark purple
    assert readable_on(colormaps["viridis"](1.0)) == "black"  # yellow
    assert readable_on(colormaps["RdBu_r"](1.0)) == "white"  # dark red: the largest Δloss
    assert readable_on(colormaps["RdBu_r"](0.5)) == "black"  # near white: Δloss near 0


def test_a_heatmap_writes_each_number_in_the_colour_readable_on_its_cell(monkeypatch, tmp_path):
    """The numbers of a diverging map (dark at both ends, white at 0) and of viridis (dark
    purple to yellow) in the colour of higher contrast with their cells; a NaN cell is blank
    (the figure's white), so its "nan" is black."""
    drawn = []
    monkeypatch.setattr(plots, "save_figure", lambda figure, path: drawn.append(figure) or path)
    matrix = np.array([[-1.0, 0.0, 1.0], [np.nan, 0.05, -0.05]])
    plots.heatmap(matrix, ["a", "b"], ["x", "y", "z"], tmp_path / "d.png", "t", "v", diverging=True)
    plots.heatmap(np.array([[0.0, 1.0]]), ["a"], ["x", "y"], tmp_path / "v.png", "t", "v")
    colours = [[text.get_color() for text in figure.axes[0].texts] for figure in drawn]
    assert colours[0] == ["white", "black", "white", "black", "black", "black"]
    assert colours[1] == ["white", "black"]
