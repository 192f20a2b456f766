"""Each example's pictures are valid PNG files of the size their layout asks for, and not
blank."""

from __future__ import annotations

import matplotlib.image
import numpy as np
import pytest

from light_llm import explain
from light_llm.errors import DataError
from light_llm.explain import plots
from light_llm.inspect import plots as inspect_plots

WIDE = (int(plots.WIDE_FIGURE[1] * plots.DPI), int(plots.WIDE_FIGURE[0] * plots.DPI))


def grid_pixels(n_rows: int, n_cols: int, panel: float = plots.PANEL_INCHES) -> tuple[int, int]:
    width = max(plots.MIN_WIDTH_INCHES, panel * n_cols + plots.MARGIN_INCHES)
    height = panel * n_rows + plots.MARGIN_INCHES
    return round(height * plots.DPI), round(width * plots.DPI)


def heatmap_pixels(n_rows: int, n_cols: int) -> tuple[int, int]:
    width, height = inspect_plots.size(n_cols, n_rows)
    return round(height * plots.DPI), round(width * plots.DPI)


EXPECTED = {  # example -> {file name: (height, width) in pixels}
    "cat-sat": {"cat_sat_attention.png": grid_pixels(1, 2)},
    "multi-head": {"multi_head_attention.png": grid_pixels(1, 2)},
    "river": {"river_attention.png": WIDE},
    "sinusoidal": {"positional_encoding_heatmap.png": WIDE, "positional_encoding_curves.png": WIDE},
    "sinusoidal-10000": {
        "positional_encoding_heatmap_10000.png": WIDE,
        "positional_encoding_curves_10000.png": WIDE,
    },
    "rope": {"rope_scores.png": grid_pixels(1, 1)},
    "ffn": {"activations.png": WIDE},
    "swiglu": {"activations.png": WIDE},
    "softmax": {"softmax_temperatures.png": WIDE},
    "sampling": {"sampling_filters.png": WIDE, "sampling_temperatures.png": WIDE},
    "lr-schedule": {"learning_rate_schedule.png": WIDE},
    "muon": {"muon_newton_schulz.png": WIDE},
    "tiny-attention": {"tiny_attention.png": grid_pixels(2, 2)},
    "norms": {"norms.png": WIDE},
    "adamw": {"adamw_step.png": WIDE},
    "grad-clip": {"grad_clip.png": WIDE},
    "tokenization": {"tokenization_pair.png": grid_pixels(1, 1)},
    "tiny-transformer": {"tiny_transformer_layernorm.png": WIDE},
    "attention-backprop": {"attention_backprop.png": grid_pixels(2, 2)},
    "mlp-backprop": {"mlp_hidden_layer.png": WIDE},
    "high-dimensions": {"concentration_of_measure.png": WIDE, "mips_hard_attention.png": WIDE},
    "score-variance": {"score_variance.png": WIDE, "softmax_entropy.png": WIDE},
    "gradient-flow": {"gradient_flow.png": WIDE},
    "perplexity": {"next_token_loss.png": WIDE},
    "quantization": {"int8_rounding.png": WIDE},
    "weight-tying": {"weight_tying.png": WIDE},
    "kv-cache": {"kv_cache_work.png": WIDE},
    "linear-attention": {"linear_attention_weights.png": grid_pixels(1, 2)},
    "checkpointing": {"checkpointing_memory.png": WIDE},
    "dropout": {"dropout.png": WIDE},
    "label-smoothing": {"label_smoothing.png": WIDE},
    "initialization": {"initialization_signal.png": WIDE},
    "mixed-precision": {"mixed_precision_rounding.png": WIDE},
    "bert-masking": {"bert_masking_shares.png": WIDE},
    "bpe": {"bpe_merges.png": WIDE},
    "logit-lens": {"logit_lens.png": heatmap_pixels(3, 6)},  # stages x tokens
    "attribution": {"attribution.png": (300, 800)},  # 5 bars: the 3-inch minimum height
    "ablation": {"ablation.png": heatmap_pixels(3, 6)},
    "patching": {"patching.png": heatmap_pixels(2, 3)},
}


def check_png(path, size):
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    image = matplotlib.image.imread(path)
    assert image.shape[:2] == size
    assert image[..., :3].std() > 0.05  # something is drawn


@pytest.mark.parametrize("name", explain.names())
def test_example_pictures_are_valid_images_of_the_expected_size(name, tmp_path):
    written = explain.write_figures(name, tmp_path)
    expected = EXPECTED[name]  # every example has a picture
    assert sorted(path.name for path in written) == sorted(expected)
    for path in written:
        check_png(path, expected[path.name])
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary left


def test_learning_rate_figure_of_any_schedule(tmp_path):
    path = plots.learning_rate_figure(tmp_path / "lr.png", 6e-4, 6e-5, 2000, 600000, 600000)
    check_png(path, WIDE)


def test_heatmap_grid_shape_follows_the_panels(tmp_path):
    panels = [[(f"{r},{c}", np.eye(12)) for c in range(3)] for r in range(2)]
    labels = [f"t{i}" for i in range(12)]
    path = plots.heatmap_grid(tmp_path / "grid.png", panels, labels, labels, "grid")
    check_png(path, grid_pixels(2, 3))


def test_unwritable_destination_is_one_sentence(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(DataError, match="cannot write the picture"):
        explain.write_figures("softmax", blocker / "inside")
