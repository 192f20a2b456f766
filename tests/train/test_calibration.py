"""The default's length measured against nanoGPT's step on a CPU no count was fitted on
(light_llm.train.calibration): the ratio of two steps, the count it gives, the twin steps'
recipes, and that measuring leaves the run's numbers alone."""

import pytest
import torch

from light_llm.train import calibration
from light_llm.train.calibration import (
    HIGHEST,
    LOWEST,
    REFERENCE,
    TIMED_ROUNDS,
    WARMUP_STEPS,
    Reference,
    calibrated_iterations,
    calibrated_length,
    default_run,
    measure_step_ratio,
    step_ratio,
)
from light_llm.train.config import TrainConfig
from light_llm.train.muon import MuonAdamW
from tests.train.helpers import TINY


def test_the_step_ratio_times_the_two_steps_in_turn_after_their_warmup():
    """Steps that advance a fake clock by known costs: the first calls of each (the warmup,
    far dearer) are left out, and r is the ratio of the timed costs."""
    now = [0.0]
    calls = {"first": 0, "second": 0}

    def costing(name, warmup_cost, cost):
        def step():
            calls[name] += 1
            now[0] += warmup_cost if calls[name] <= WARMUP_STEPS else cost

        return step

    ratio, seconds = step_ratio(
        costing("first", 100.0, 3.0), costing("second", 7.0, 5.0), clock=lambda: now[0]
    )
    assert ratio == pytest.approx(3.0 / 5.0, rel=1e-12)
    assert seconds == pytest.approx(5.0, rel=1e-12)
    assert calls == {"first": WARMUP_STEPS + TIMED_ROUNDS, "second": WARMUP_STEPS + TIMED_ROUNDS}


REF = Reference(machine="a test machine", iterations=1000, ratio=0.5)


@pytest.mark.parametrize(
    ("ratio", "seconds_per_step", "spent", "expected"),
    [
        (0.5, 0.1, 0.0, 1000),  # as on the reference machine
        (0.4, 0.1, 0.0, 800),  # nanoGPT's step relatively faster here: fewer iterations fit
        (0.6, 0.1, 0.0, 1200),
        (0.5, 0.1, 3.0, 970),  # the 3 s of measuring, at 0.1 s a step, come off
        (0.5, 0.2, 3.0, 985),
        (50.0, 0.1, 0.0, HIGHEST * 1000),  # an upset measurement stays within the bounds
        (0.005, 0.1, 0.0, LOWEST * 1000),
        (0.5, 0.001, 3.0, LOWEST * 1000),
    ],
)
def test_the_calibrated_count_scales_the_reference_by_the_ratio_of_steps(
    ratio, seconds_per_step, spent, expected
):
    """N = N_ref r / r_ref - t / s, within [LOWEST, HIGHEST] x N_ref."""
    assert calibrated_iterations(ratio, seconds_per_step, spent, REF) == expected


def test_the_default_run_measured_is_the_recipe_as_it_is():
    """default_run: the preset's recipe with no flag changed, over the 768 ids its BPE
    learns, whatever the run being measured for changed (the count depends on the CPU alone,
    as the fitted counts do)."""
    recipe, model = default_run("qwen3-cpu")
    assert recipe == TrainConfig(preset="qwen3-cpu").resolve()
    assert (model.n_layer, model.n_head, model.n_embd, model.vocab_size) == (3, 2, 96, 768)
    assert (recipe.batch_size, recipe.block_size, recipe.optimizer) == (32, 64, "muon")


def test_the_twin_steps_are_nanogpts_cpu_recipe_and_the_given_one(monkeypatch):
    """The first model built is nanoGPT's README CPU shape (4 layers of 4 heads, 128 wide,
    context 64, its 65 characters, no biases) trained by AdamW on batches of 12, the second
    the model given with its recipe's optimizer (Muon and AdamW for the default's) on
    batches of that recipe's size; measuring leaves the global random state as it was, so
    that the run's numbers do not change."""
    built, optimizers, batches = [], [], []
    real_gpt = calibration.GPT
    real_optimizer = calibration.configure_optimizer

    def recording_gpt(config):
        built.append(config)
        model = real_gpt(config)
        model.register_forward_pre_hook(lambda module, args: batches.append(args[0].shape))
        return model

    def recording_optimizer(model, cfg, device_type):
        optimizers.append(real_optimizer(model, cfg, device_type))
        return optimizers[-1]

    monkeypatch.setattr(calibration, "GPT", recording_gpt)
    monkeypatch.setattr(calibration, "configure_optimizer", recording_optimizer)
    run = TrainConfig(**{**TINY, "max_iters": None}).resolve()
    model_config = run.model_config(vocab_size=50)
    before = torch.get_rng_state()
    ratio, seconds = measure_step_ratio(run, model_config, torch.device("cpu"), "float32")
    assert torch.equal(torch.get_rng_state(), before)
    assert ratio > 0 and seconds > 0
    nanogpt, own = built
    shape = (nanogpt.n_layer, nanogpt.n_head, nanogpt.n_embd, nanogpt.block_size)
    assert shape == (4, 4, 128, 64) and nanogpt.vocab_size == 65 and not nanogpt.bias
    assert own == model_config
    assert type(optimizers[0]) is torch.optim.AdamW and type(optimizers[1]) is MuonAdamW
    steps = WARMUP_STEPS + TIMED_ROUNDS
    assert batches.count(torch.Size([12, 64])) == steps
    assert batches.count(torch.Size([TINY["batch_size"], TINY["block_size"]])) == steps


def test_the_calibrated_length_says_how_it_was_measured(monkeypatch):
    """The sentence gives the count, the CPU, the ratio here and the reference's, and the
    measurements pass through ``agree`` (a distributed run's mean) before the count."""
    measured = []

    def fixed_measurement(cfg, model_config, device, dtype):
        return 0.9 * REFERENCE.ratio, 1.0  # a second a step: the measuring time is ~0 steps

    def agree(values):
        measured.append(values.tolist())
        return values * torch.tensor([2.0 / 0.9, 1.0], dtype=torch.float64)  # r = 2 r_ref

    monkeypatch.setattr(calibration, "measure_step_ratio", fixed_measurement)
    iterations, note = calibrated_length(
        "qwen3-cpu", torch.device("cpu"), "float32", "DEFAULT", agree
    )
    assert measured == [[0.9 * REFERENCE.ratio, 1.0]]
    assert iterations == 2 * REFERENCE.iterations
    assert note.startswith(f"{iterations} iterations: float32 on this CPU (DEFAULT)")
    assert f"took {2 * REFERENCE.ratio:.3f} of the default's here" in note
    assert f"against {REFERENCE.ratio:.3f} on {REFERENCE.machine}" in note
    assert f"where {REFERENCE.iterations} iterations end the default's run" in note


def test_a_real_measurement_on_this_machine_finds_the_default_step_the_longer():
    """The default against nanoGPT's recipe, measured here for real: nanoGPT's step is the
    shorter one (r = 0.56-0.62 on a 2-core AVX2 CPU, 0.54-0.58 with ATen's scalar kernels),
    and the sentence gives the count returned."""
    iterations, note = calibrated_length("qwen3-cpu", torch.device("cpu"), "float32", "X")
    assert note.startswith(f"{iterations} iterations: float32 on this CPU (X)")
    ratio = float(note.split("took ")[1].split(" ")[0])
    assert 0.1 < ratio < 1.0
