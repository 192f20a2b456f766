"""The training config's machine-fitted default length (light_llm.train.config.fitted_length)
and corpus-fitted weight decay (fitted_weight_decay): which runs they apply to, what they
give and say."""

import pytest

from light_llm.errors import ConfigError
from light_llm.train.config import (
    FITTED_MAX_ITERS,
    FITTED_PRESETS,
    TrainConfig,
    fitted_length,
    fitted_weight_decay,
)


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


@pytest.mark.parametrize(
    ("train_tokens", "fitted"),
    [(50, True), (10_000, True), (400_000, True), (2_000_000, True), (50_000_000, False)],
)
def test_the_fitted_weight_decay_gives_the_timescale_of_e_passes(train_tokens, fitted):
    """λ = 1 / (η E M): the weights' averaging timescale 1/(ηλ) is E passes of M steps each
    (M = N / (B T G), at least one step), never below the recipe's λ_0."""
    config = TrainConfig(grad_accum=2)
    resolved = config.resolve()
    assert resolved.weight_decay_epochs == 1.7  # the default recipe's
    decay, note = fitted_weight_decay(config, resolved, train_tokens)
    tokens_per_step = resolved.batch_size * resolved.block_size * 2
    steps_per_pass = max(train_tokens / tokens_per_step, 1)
    assert (decay is not None) == fitted
    if decay is None:  # a large corpus: the recipe's decay already forgets within E passes
        assert 1 / (resolved.lr * resolved.weight_decay) <= steps_per_pass * 1.7 and note == ""
    else:
        timescale_in_steps = 1 / (resolved.lr * decay)
        assert timescale_in_steps == pytest.approx(1.7 * steps_per_pass)
        assert decay > resolved.weight_decay and f"{decay:.3g}" in note


@pytest.mark.parametrize(
    ("given", "fitted"),
    [
        ({"weight_decay": 0.3}, False),  # the decay itself given: kept
        ({"weight_decay": 0.3, "weight_decay_epochs": 2.0}, True),  # both: 0.3 the floor
        ({"weight_decay_epochs": 3.0}, True),
        ({"preset": "bpe-cpu"}, False),  # a recipe without the fit
        ({"preset": "bpe-cpu", "weight_decay_epochs": 1.0}, True),
    ],
)
def test_the_fitted_weight_decay_follows_the_flags(given, fitted):
    config = TrainConfig(**given)
    resolved = config.resolve()
    decay, _ = fitted_weight_decay(config, resolved, 20_000)
    assert (decay is not None) == fitted
    if fitted:
        epochs = resolved.weight_decay_epochs
        assert decay == pytest.approx(
            resolved.batch_size * resolved.block_size / 20_000 / (resolved.lr * epochs)
        )


@pytest.mark.parametrize("epochs", [0.5, 0, -1, float("nan"), float("inf")])
def test_fewer_than_one_pass_is_refused(epochs):
    with pytest.raises(ConfigError, match="weight_decay_epochs must be a number of at least 1"):
        TrainConfig(weight_decay_epochs=epochs).resolve()
