"""The training config's machine-fitted default length (light_llm.train.config.fitted_length,
calibrates_length) and corpus-fitted weight decay (fitted_weight_decay): which runs they
apply to, what they give and say."""

import pytest

from light_llm.errors import ConfigError
from light_llm.train.config import (
    FITTED_MAX_ITERS,
    LARGE_TEXT_CHARACTERS,
    LARGE_TEXT_VOCAB,
    CpuKind,
    TrainConfig,
    calibrates_length,
    fitted_count,
    fitted_length,
    fitted_vocab_size,
    fitted_weight_decay,
    flagged_settings,
)

AVX2 = CpuKind("AVX2")  # where the float32 counts were fitted
AVX512_BF16 = CpuKind("AVX512", native_bfloat16=True)  # where the bfloat16 counts were
AMX = CpuKind("AVX512", native_bfloat16=True, amx=True)
SCALAR = CpuKind("DEFAULT")  # ATen's kernels without vector instructions


@pytest.mark.parametrize(
    ("given", "device", "dtype", "cpu", "iterations"),
    [
        ({}, "cpu", "bfloat16", AVX512_BF16, FITTED_MAX_ITERS["qwen3-cpu"]["bfloat16"]),
        ({}, "cpu", "float32", AVX2, None),  # the recipe's own count, said
        (
            {"preset": "bpe-cpu"},
            "cpu",
            "bfloat16",
            AVX512_BF16,
            FITTED_MAX_ITERS["bpe-cpu"]["bfloat16"],
        ),
        ({"preset": "bpe-cpu"}, "cpu", "bfloat16", AMX, FITTED_MAX_ITERS["bpe-cpu"]["bfloat16"]),
        ({"max_iters": 50}, "cpu", "bfloat16", AVX512_BF16, None),
        ({"time": "90s"}, "cpu", "bfloat16", AVX512_BF16, None),
        ({"preset": "nanogpt-cpu"}, "cpu", "bfloat16", AVX512_BF16, None),
        ({}, "cuda", "bfloat16", AVX512_BF16, None),
        ({}, "cpu", "bfloat16", AVX2, None),  # emulated there
        ({}, "cpu", "float32", SCALAR, None),  # measured at the start instead
        ({}, "cpu", "bfloat16", AMX, FITTED_MAX_ITERS["qwen3-cpu"]["bfloat16 with AMX"]),
    ],
)
def test_the_fitted_length_applies_only_to_a_default_run_on_a_cpu_of_a_fitted_kind(
    given, device, dtype, cpu, iterations
):
    """... and not to bfloat16 on a CPU that only emulates it (AVX2), whose steps are far
    slower than any count was fitted to (its warning is precision.emulated_bfloat16_note's),
    nor to the default on a kind of CPU its counts were not fitted on (calibrates_length)."""
    config = TrainConfig(**given)
    resolved = config.resolve()
    fitted, note = fitted_length(config, resolved, device, dtype, cpu)
    assert fitted == iterations
    emulated = dtype == "bfloat16" and not cpu.native_bfloat16
    fitted_preset = resolved.preset in FITTED_MAX_ITERS and device == "cpu" and not emulated
    measured = calibrates_length(config, resolved, device, dtype, cpu)
    if fitted_preset and set(given) <= {"preset"} and not measured:
        assert f"{fitted or resolved.max_iters} iterations" in note and f"({cpu})" in note
    else:
        assert note == ""


@pytest.mark.parametrize(
    ("given", "device", "dtype", "cpu", "measured"),
    [
        ({}, "cpu", "float32", SCALAR, True),
        ({}, "cpu", "bfloat16", AMX, False),  # fitted there too, a count of its own
        ({}, "cpu", "float32", AVX512_BF16, True),  # --dtype float32: fitted on AVX2 only
        ({}, "cpu", "float32", CpuKind("AVX512"), True),  # AVX-512 without bfloat16
        ({}, "cpu", "float32", AVX2, False),
        ({}, "cpu", "bfloat16", AVX512_BF16, False),
        ({}, "cpu", "bfloat16", SCALAR, False),  # emulated: no count is right for it
        ({}, "cuda", "bfloat16", AMX, False),
        ({"max_iters": 50}, "cpu", "float32", SCALAR, False),
        ({"time": "90s"}, "cpu", "float32", SCALAR, False),
        ({"preset": "bpe-cpu"}, "cpu", "float32", SCALAR, False),  # no reference measured
        ({"preset": "nanogpt-cpu"}, "cpu", "float32", SCALAR, False),
    ],
)
def test_the_default_measures_its_length_on_a_cpu_no_count_was_fitted_on(
    given, device, dtype, cpu, measured
):
    """calibrates_length: a new default run on a CPU, in an arithmetic the CPU has, whose
    kind (AVX2 for float32, AVX-512 BF16 with or without AMX for bfloat16) is not one its counts
    were fitted on."""
    config = TrainConfig(**given)
    assert calibrates_length(config, config.resolve(), device, dtype, cpu) is measured


def test_a_cpu_kind_says_what_it_is_and_where_its_counts_were_fitted():
    assert (str(AVX2), str(AMX), str(SCALAR)) == ("AVX2", "AVX512 with AMX", "DEFAULT")
    assert AVX2.fitted("float32") and not AVX2.fitted("bfloat16")
    assert AVX512_BF16.fitted("bfloat16") and not AVX512_BF16.fitted("float32")
    assert AMX.fitted("bfloat16") and not AMX.fitted("float32") and not SCALAR.fitted("float32")


def test_a_kind_with_a_count_of_its_own_takes_it_and_another_the_dtypes():
    """fitted_count: AMX's own count for the default, the AVX-512 BF16 count for a preset with
    none for AMX (bpe-cpu), the recipe's (None) in float32."""
    counts = FITTED_MAX_ITERS["qwen3-cpu"]
    assert fitted_count("qwen3-cpu", "bfloat16", AMX) == counts["bfloat16 with AMX"]
    assert fitted_count("qwen3-cpu", "bfloat16", AVX512_BF16) == counts["bfloat16"]
    bpe_counts = (
        fitted_count("bpe-cpu", "bfloat16", AMX),
        fitted_count("bpe-cpu", "bfloat16", AVX512_BF16),
    )
    assert bpe_counts[0] == bpe_counts[1]
    assert fitted_count("qwen3-cpu", "float32", AVX2) is None
    assert fitted_count("nanogpt-cpu", "bfloat16", AMX) is None


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
        if train_tokens < 4096:
            assert f"the {train_tokens} training tokens are fewer than a step's 4,096" in note
        else:
            steps = f"{train_tokens / 4096:,.0f} steps"
            assert f"a pass over the {train_tokens:,} training tokens takes {steps}" in note


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
    with pytest.raises(ConfigError, match="--weight-decay-epochs must be a number of at least 1"):
        TrainConfig(weight_decay_epochs=epochs).resolve()


@pytest.mark.parametrize(
    ("flags", "characters", "fitted"),
    [
        ({}, LARGE_TEXT_CHARACTERS, True),  # the default preset's BPE, from a large text
        ({}, LARGE_TEXT_CHARACTERS - 1, False),
        ({"vocab_size": 300}, 10 * LARGE_TEXT_CHARACTERS, False),  # a size asked for
        ({"tokenizer": "char"}, 10 * LARGE_TEXT_CHARACTERS, False),
        ({"preset": "bpe-cpu"}, 10 * LARGE_TEXT_CHARACTERS, False),  # its recipe's 768
    ],
)
def test_the_vocabulary_fitted_to_a_large_text_is_the_default_presets_alone(
    flags, characters, fitted
):
    config = TrainConfig(**flags).resolve()
    assert fitted_vocab_size(config, characters) == (LARGE_TEXT_VOCAB if fitted else None)


def test_a_message_names_settings_by_their_flags_and_leaves_flags_and_paths_alone():
    message = (
        "lr_decay_iters (5) must not be less than warmup_iters (10); min_lr in [0, lr]; "
        "add --lr-schedule wsd; /tmp/max_iters/x and out-max_iters stay; beta2 too."
    )
    assert flagged_settings(message) == (
        "--lr-decay-iters (5) must not be less than --warmup-iters (10); --min-lr in [0, --lr]; "
        "add --lr-schedule wsd; /tmp/max_iters/x and out-max_iters stay; --beta2 too."
    )


def test_a_refusal_of_the_api_names_the_flag():
    with pytest.raises(ConfigError, match=r"^--eval-interval must be a positive integer, got 0\.$"):
        TrainConfig(eval_interval=0).resolve()


@pytest.mark.parametrize("min_lr", [5.0, -1e-4, float("nan")])
def test_a_floor_above_the_peak_rate_names_both_flags_and_the_peak(min_lr):
    with pytest.raises(ConfigError) as refused:
        TrainConfig(lr=3e-3, min_lr=min_lr).resolve()
    assert str(refused.value) == f"--min-lr must lie between 0 and --lr (0.003), got {min_lr}."
