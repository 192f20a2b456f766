"""The training config's machine-fitted default length (light_llm.train.config.fitted_length):
which runs it applies to, and what it says."""

import pytest

from light_llm.train.config import FITTED_MAX_ITERS, FITTED_PRESETS, TrainConfig, fitted_length


@pytest.mark.parametrize(
    ("given", "device", "dtype", "iterations"),
    [
        ({}, "cpu", "bfloat16", FITTED_MAX_ITERS.get("bfloat16")),
        ({}, "cpu", "float32", FITTED_MAX_ITERS.get("float32")),
        ({"max_iters": 50}, "cpu", "bfloat16", None),
        ({"time": "90s"}, "cpu", "bfloat16", None),
        ({"preset": "nanogpt-cpu"}, "cpu", "bfloat16", None),
        ({}, "cuda", "bfloat16", None),
    ],
)
def test_the_fitted_length_applies_only_to_a_default_run_on_a_cpu(given, device, dtype, iterations):
    config = TrainConfig(**given)
    resolved = config.resolve()
    fitted, note = fitted_length(config, resolved, device, dtype, "AVX512")
    assert fitted == iterations
    fitted_preset = resolved.preset in FITTED_PRESETS and device == "cpu"
    if fitted_preset and not given:
        assert f"{fitted or resolved.max_iters} iterations" in note and "(AVX512)" in note
    else:
        assert note == ""
