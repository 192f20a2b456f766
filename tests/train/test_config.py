"""The training config's machine-fitted default length (light_llm.train.config.fitted_length)
and corpus-fitted weight decay (fitted_weight_decay): which runs they apply to, what they
give and say."""

import pytest

from light_llm.errors import ConfigError
from light_llm.train.config import (
    FITTED_MAX_ITERS,
    TrainConfig,
    fitted_length,
    fitted_weight_decay,
)


@pytest.mark.parametrize(
    ("given", "device", "dtype", "native", "iterations"),
    [
        ({}, "cpu", "bfloat16", True, FITTED_MAX_ITERS["qwen3-cpu"].get("bfloat16")),
        ({}, "cpu", "float32", True, FITTED_MAX_ITERS["qwen3-cpu"].get("float32")),
        (
            {"preset": "bpe-cpu"},
            "cpu",
            "bfloat16",
            True,
            FITTED_MAX_ITERS["bpe-cpu"].get("bfloat16"),
        ),
        ({"max_iters": 50}, "cpu", "bfloat16", True, None),
        ({"time": "90s"}, "cpu", "bfloat16", True, None),
        ({"preset": "nanogpt-cpu"}, "cpu", "bfloat16", True, None),
        ({}, "cuda", "bfloat16", True, None),
        ({}, "cpu", "bfloat16", False, None),
    ],
)
def test_the_fitted_length_applies_only_to_a_default_run_on_a_cpu(
    given, device, dtype, native, iterations
):
    """... and not to bfloat16 on a CPU that only emulates it (``native`` False), whose steps
    are far slower than any count was fitted to (its warning is
    precision.emulated_bfloat16_note's)."""
    config = TrainConfig(**given)
    resolved = config.resolve()
    fitted, note = fitted_length(config, resolved, device, dtype, "AVX512", native)
    assert fitted == iterations
    fitted_preset = resolved.preset in FITTED_MAX_ITERS and device == "cpu" and native
    if fitted_preset and set(given) <= {"preset"}:
        assert f"{fitted or resolved.max_iters} iterations" in note and "(AVX512)" in note
    else:
        assert note == ""


# λ = 1 / (η E M) by hand, from the default recipe's η = 3e-3, E = 1.7 and a step of B T G =
# 32 x 64 x 2 = 4096 tokens; None where that λ is below the recipe's 0.1 (1 / (3e-3 x 1.7 x
# 12,207) = 0.016 for 50M tokens)
@pytest.mark.parametrize(
    ("train_tokens", "expected"),
    [
        (50, 1 / (3e-3 * 1.7 * 1)),  # less than one step a pass: M = 1
        (10_000, 1 / (3e-3 * 1.7 * (10_000 / 4096))),
        (400_000, 1 / (3e-3 * 1.7 * (400_000 / 4096))),
        (2_000_000, 1 / (3e-3 * 1.7 * (2_000_000 / 4096))),
        (50_000_000, None),
    ],
)
def test_the_fitted_weight_decay_gives_the_timescale_of_e_passes(train_tokens, expected):
    """λ = 1 / (η E M): the weights' averaging timescale 1/(ηλ) is E passes of M steps each
    (M = N / (B T G), at least one step), never below the recipe's λ_0."""
    config = TrainConfig(grad_accum=2)
    resolved = config.resolve()
    recipe = (resolved.lr, resolved.weight_decay_epochs, resolved.weight_decay)
    assert recipe == (3e-3, 1.7, 0.1)
    assert (resolved.batch_size, resolved.block_size) == (32, 64)
    decay, note = fitted_weight_decay(config, resolved, train_tokens)
    if expected is None:  # the recipe's decay is kept, and nothing is said
        assert (decay, note) == (None, "")
    else:
        assert decay == pytest.approx(expected, rel=1e-12)
        assert f"weight decay {expected:.3g}, not 0.1" in note


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
