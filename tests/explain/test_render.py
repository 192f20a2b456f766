"""Steps as text and JSON: labels, 4 decimals, seed figures beside the exact ones, JSON that
round-trips every value."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from light_llm import explain
from light_llm.explain import Step
from light_llm.explain.render import PAGE_WIDTH, example_json, example_text, step_text


def test_seed_differs_uses_the_seeds_own_decimals():
    step = Step("t", "x", [0.3651, 1.0954, 0.7303], "seed", seed_value=[0.36, 1.10, float("nan")])
    assert step.seed_differs.tolist() == [True, False, False]  # 0.3651 rounds to 0.37
    assert step.differs_from_seed
    assert not Step("t", "x", 1.118034, "s", seed_value=1.118, seed_decimals=3).differs_from_seed


def test_seed_figure_of_the_wrong_shape_is_refused():
    with pytest.raises(ValueError, match="shape"):
        Step("t", "x", [1.0, 2.0], "s", seed_value=[1.0])


def test_matrix_text_has_labels_four_decimals_and_marks_differences():
    step = Step(
        "Scores",
        "dot products",
        [[1.05, 0.64], [0.64, 2.5]],
        "seed 001",
        seed_value=[[1.05, 0.74], [0.74, 2.66]],
        rows=("The", "cat"),
        columns=("The", "cat"),
    )
    text = step_text(1, 1, step)
    assert "[seed figure differs]" in text
    assert "(seed 001)" in text
    lines = text.splitlines()
    row = next(line for line in lines if line.strip().startswith("cat"))
    # exact values to 4 decimals, then the seed's figures as printed, differences starred
    assert row.split() == ["cat", "0.6400", "2.5000", "|", "0.74*", "2.66*"]


def test_vector_text_has_exact_and_seed_rows():
    step = Step("v", "x", [0.4291, 0.5501], "s", seed_value=[0.46, 0.55], columns=("a", "b"))
    lines = step_text(2, 5, step).splitlines()
    assert lines[0] == "2/5. v   [seed figure differs]"
    assert lines[-2].split() == ["exact", "0.4291", "0.5501"]
    assert lines[-1].split() == ["seed", "0.46*", "0.55"]


def test_tiny_numbers_switch_to_scientific_notation_and_ints_stay_ints():
    assert "9.9010e-06" in step_text(1, 1, Step("lr", "x", [9.901e-6, 1e-3], "s"))
    text = step_text(1, 1, Step("ids", "x", np.array([101, 1045]), "s"))
    assert text.splitlines()[-1].split() == ["exact", "101", "1045"]


@pytest.mark.parametrize("name", explain.names())
def test_every_example_renders_within_the_page(name):
    example = explain.get(name)
    text = example_text(name, example.summary, example.steps())
    assert text.startswith(f"{name}: ")
    assert max(len(line) for line in text.splitlines()) <= PAGE_WIDTH


@pytest.mark.parametrize("name", explain.names())
def test_json_round_trips_every_value(name):
    example = explain.get(name)
    steps = example.steps()
    parsed = json.loads(json.dumps(example_json(name, example.summary, steps)))
    assert [s["title"] for s in parsed["steps"]] == [s.title for s in steps]
    for step, data in zip(steps, parsed["steps"], strict=True):
        decoded = np.array(data["value"], dtype=object)
        decoded = np.vectorize(lambda x: float(x) if x is not None else math.nan)(decoded)
        np.testing.assert_array_equal(decoded, np.asarray(step.value, dtype=np.float64))
        assert data["shape"] == list(np.shape(step.value))
        assert data["differs_from_seed"] == step.differs_from_seed
        if step.seed_value is not None:
            seed = np.vectorize(lambda x: math.nan if x is None else float(x))(
                np.array(data["seed_value"], dtype=object)
            )
            np.testing.assert_array_equal(seed, step.seed_value)
