"""The weight average of --ema-beta (light_llm.train.averaging) against the formula by hand,
for NumPy arrays and PyTorch tensors alike."""

import numpy as np
import pytest
import torch

from light_llm.train.averaging import WeightAverage, ema_update


@pytest.mark.parametrize("engine", ["numpy", "torch"])
def test_the_average_starts_at_step_s_then_follows_beta_by_hand(engine):
    """θ̄_1 = θ_1, then θ̄_k = β θ̄_{k-1} + (1 - β) θ_k: after step 4,
    θ̄_4 = β³ θ_1 + (1 - β)(β² θ_2 + β θ_3 + θ_4)."""
    beta, rng = 0.8, np.random.default_rng(0)
    steps = [rng.normal(size=(3, 2)) for _ in range(5)]  # θ_0 .. θ_4, float64
    copy = np.copy if engine == "numpy" else torch.clone
    convert = (lambda a: a.copy()) if engine == "numpy" else torch.from_numpy
    average = WeightAverage(beta, 1, copy)
    weights = {"w": convert(steps[0])}
    average.observe(weights, 0)
    assert average.average is None  # before its start
    for k in range(1, 5):
        weights["w"][...] = convert(steps[k])
        average.observe(weights, k)
        if k == 1:
            assert np.array_equal(np.asarray(average.average["w"]), steps[1])
            assert average.average["w"] is not weights["w"]  # a copy
    by_hand = beta**3 * steps[1] + (1 - beta) * (beta**2 * steps[2] + beta * steps[3] + steps[4])
    assert np.allclose(np.asarray(average.average["w"]), by_hand, rtol=1e-13, atol=0)


def test_ema_update_is_beta_old_plus_one_minus_beta_new():
    average = {"a": np.array([1.0, 2.0])}
    ema_update(average, {"a": np.array([3.0, -2.0])}, 0.75)
    assert average["a"].tolist() == [0.75 * 1 + 0.25 * 3, 0.75 * 2 - 0.25 * 2]


@pytest.mark.parametrize("engine", ["numpy", "torch"])
def test_swapped_in_gives_the_average_then_the_raw_weights_back_bit_for_bit(engine):
    copy = np.copy if engine == "numpy" else torch.clone
    dtype = np.float32 if engine == "numpy" else torch.float32
    raw = (
        np.linspace(-1, 1, 6, dtype=dtype)
        if engine == "numpy"
        else torch.linspace(-1, 1, 6, dtype=dtype)
    )
    weights = {"w": copy(raw)}
    average = WeightAverage(0.9, 0, copy)
    with average.swapped_in(weights) as given:
        assert given is None  # no average yet: nothing changes
    average.observe(weights, 0)
    weights["w"] *= 3
    average.observe(weights, 1)  # θ̄ = 0.9 θ_0 + 0.1 (3 θ_0) = 1.2 θ_0
    trained = copy(weights["w"])
    with average.swapped_in(weights) as given:
        assert np.array_equal(np.asarray(weights["w"]), np.asarray(average.average["w"]))
        assert np.array_equal(np.asarray(given["w"]), np.asarray(trained))
    assert np.array_equal(np.asarray(weights["w"]), np.asarray(trained))
    assert np.allclose(np.asarray(average.average["w"]), 1.2 * np.asarray(raw), rtol=1e-6)
